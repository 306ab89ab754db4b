package stacktest

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// heldLines bounds what a fuzz test's logger keeps until the test ends.
const heldLines = 50

// storyLines bounds the records below WARN a logger keeps for a failure.
const storyLines = 300

// Logger returns a logger that writes records of level WARN and above to
// t.Log, which go test shows only when the test fails: a failure in CI then
// says what the services saw. The last storyLines records of level INFO are
// kept too and written when the test has failed, after its warnings: a
// failure that warned of nothing (a step that never came) still shows how
// far each service got. Records that come after the test's cleanups have
// run (a goroutine that outlived its test) are dropped, as t.Log would
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
	warn := slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn})
	info := slog.NewTextHandler(storyWriter{w}, &slog.HandlerOptions{Level: slog.LevelInfo})
	return slog.New(split{warn: warn, info: info})
}

// split sends a record of level WARN and above to warn, and one of level
// INFO to info.
type split struct{ warn, info slog.Handler }

func (h split) Enabled(ctx context.Context, l slog.Level) bool { return h.info.Enabled(ctx, l) }

func (h split) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		return h.warn.Handle(ctx, r)
	}
	return h.info.Handle(ctx, r)
}

func (h split) WithAttrs(as []slog.Attr) slog.Handler {
	return split{warn: h.warn.WithAttrs(as), info: h.info.WithAttrs(as)}
}

func (h split) WithGroup(name string) slog.Handler {
	return split{warn: h.warn.WithGroup(name), info: h.info.WithGroup(name)}
}

// storyWriter keeps the records below WARN for a failure.
type storyWriter struct{ w *testWriter }

func (s storyWriter) Write(p []byte) (int, error) {
	line := strings.TrimSuffix(string(p), "\n")
	w := s.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		if len(w.story) == storyLines {
			w.story = w.story[1:]
			w.storyDropped++
		}
		w.story = append(w.story, line)
	}
	return len(p), nil
}

type testWriter struct {
	mu      sync.Mutex
	t       testing.TB
	hold    bool     // lines are kept until stop, not logged at once
	held    []string // the last heldLines of them
	dropped int      // lines held and dropped for room
	done    bool

	story        []string // the last storyLines records below WARN
	storyDropped int
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
	if w.t.Failed() && len(w.story) > 0 {
		w.t.Logf("the services' last %d records below WARN (%d earlier dropped):", len(w.story), w.storyDropped)
		for _, line := range w.story {
			w.t.Log(line)
		}
	}
	w.held, w.story, w.done = nil, nil, true // done: nothing more is held or logged
}
