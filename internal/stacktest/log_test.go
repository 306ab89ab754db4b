package stacktest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ioa-nats/ioa/internal/fuzzworker"
)

// recorder is a testing.TB that keeps what is logged.
type recorder struct {
	testing.TB
	lines    []string
	cleanups []func()
	failed   bool
}

func (r *recorder) Failed() bool { return r.failed }

func (r *recorder) Log(args ...any) { r.lines = append(r.lines, args[0].(string)) }
func (r *recorder) Logf(format string, a ...any) {
	r.lines = append(r.lines, fmt.Sprintf(format, a...))
}
func (r *recorder) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }
func (r *recorder) runCleanups() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

// Warnings and errors reach the test's log, one line a record; info and
// debug do not when the test passes; nothing is logged once the test's
// cleanups have run.
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

// A failed test's log ends with the last storyLines info records (not
// debug), after its warnings.
func TestLoggerStoryOfAFailure(t *testing.T) {
	r := &recorder{TB: t}
	log := Logger(r)
	for i := range storyLines + 2 {
		log.Info("step", "n", i)
	}
	log.Debug("detail")
	log.Warn("slow watch")
	r.failed = true
	r.runCleanups()
	if len(r.lines) != storyLines+2 {
		t.Fatalf("logged %d lines, want %d", len(r.lines), storyLines+2)
	}
	if !strings.Contains(r.lines[0], "level=WARN") {
		t.Errorf("first line %q, want the warning", r.lines[0])
	}
	if want := fmt.Sprintf("the services' last %d records below WARN (2 earlier dropped):", storyLines); r.lines[1] != want {
		t.Errorf("second line %q, want %q", r.lines[1], want)
	}
	if !strings.Contains(r.lines[2], "level=INFO msg=step n=2") || !strings.Contains(r.lines[storyLines+1], fmt.Sprintf("n=%d", storyLines+1)) {
		t.Errorf("story %q ... %q", r.lines[2], r.lines[storyLines+1])
	}
}

// The services log from their own goroutines while a fuzz target runs,
// when a *testing.F's Log panics: a fuzz test's records are held until its
// cleanups run.
func FuzzLoggerInsideTarget(f *testing.F) {
	fuzzworker.Capture(f)
	log := Logger(f)
	f.Add("slow watch")
	f.Add("")
	f.Fuzz(func(t *testing.T, msg string) {
		done := make(chan struct{})
		go func() { // as a service would: not the target's goroutine
			defer close(done)
			log.Warn(msg)
		}()
		<-done
	})
}

// A held logger keeps the last heldLines records and says how many it dropped.
func TestLoggerHeld(t *testing.T) {
	r := &recorder{TB: t}
	w := &testWriter{t: r, hold: true}
	for i := range heldLines + 3 {
		fmt.Fprintf(w, "line %d\n", i)
	}
	if len(r.lines) != 0 {
		t.Fatalf("logged %d lines before the end, want 0", len(r.lines))
	}
	w.stop()
	fmt.Fprintln(w, "after the end")
	if len(r.lines) != heldLines+1 {
		t.Fatalf("logged %d lines, want %d: %q", len(r.lines), heldLines+1, r.lines)
	}
	if r.lines[0] != "(3 earlier warnings dropped)" || r.lines[1] != "line 3" || r.lines[heldLines] != fmt.Sprintf("line %d", heldLines+2) {
		t.Errorf("lines %q ... %q", r.lines[:2], r.lines[heldLines])
	}
}
