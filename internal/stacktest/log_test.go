package stacktest

import (
	"strings"
	"testing"
)

// recorder is a testing.TB that keeps what is logged.
type recorder struct {
	testing.TB
	lines    []string
	cleanups []func()
}

func (r *recorder) Log(args ...any)  { r.lines = append(r.lines, args[0].(string)) }
func (r *recorder) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }
func (r *recorder) runCleanups() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

// Warnings and errors reach the test's log, one line a record; info and
// debug do not; nothing is logged once the test's cleanups have run.
func TestLogger(t *testing.T) {
	r := &recorder{TB: t}
	log := Logger(r)
	log.Info("started")
	log.Warn("slow watch", "lag", "2s")
	log.Error("lost", "agent", "a")
	r.runCleanups()
	log.Warn("after the test")
	if len(r.lines) != 2 {
		t.Fatalf("logged %d lines, want 2: %q", len(r.lines), r.lines)
	}
	if !strings.Contains(r.lines[0], "level=WARN") || !strings.Contains(r.lines[0], `msg="slow watch" lag=2s`) {
		t.Errorf("first line %q", r.lines[0])
	}
	if !strings.Contains(r.lines[1], "level=ERROR") || strings.HasSuffix(r.lines[1], "\n") {
		t.Errorf("second line %q", r.lines[1])
	}
}
