package stacktest

import (
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// heldLines bounds what a fuzz test's logger keeps until the test ends.
const heldLines = 50

// Logger returns a logger that writes records of level WARN and above to
// t.Log, which go test shows only when the test fails: a failure in CI then
// says what the services saw. Records that come after the test's cleanups
// have run (a goroutine that outlived its test) are dropped, as t.Log would
// panic on them.
//
// A fuzz test's *testing.F panics when its Log is called while the fuzz
// target runs, and the services log from their own goroutines at any time
// (a fuzzed request is bad input, so they do); for a fuzz test the last
// heldLines records are kept and logged when its cleanups run.
func Logger(t testing.TB) *slog.Logger {
	w := &testWriter{t: t}
	_, w.hold = t.(*testing.F)
	t.Cleanup(w.stop) // registered first, run last: after the services stop
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct {
	mu      sync.Mutex
	t       testing.TB
	hold    bool     // lines are kept until stop, not logged at once
	held    []string // the last heldLines of them
	dropped int      // lines held and dropped for room
	done    bool
}

var _ io.Writer = (*testWriter)(nil)

func (w *testWriter) Write(p []byte) (int, error) {
	line := strings.TrimSuffix(string(p), "\n")
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.done:
	case !w.hold:
		w.t.Log(line)
	case len(w.held) == heldLines:
		w.held = append(w.held[1:], line)
		w.dropped++
	default:
		w.held = append(w.held, line)
	}
	return len(p), nil
}

func (w *testWriter) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.dropped > 0 {
		w.t.Logf("(%d earlier warnings dropped)", w.dropped)
	}
	for _, line := range w.held {
		w.t.Log(line)
	}
	w.held, w.done = nil, true // done: nothing more is held or logged
}
