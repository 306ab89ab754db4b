package stacktest

import (
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// Logger returns a logger that writes records of level WARN and above to
// t.Log, which go test shows only when the test fails: a failure in CI then
// says what the services saw. Records that come after the test's cleanups
// have run (a goroutine that outlived its test) are dropped, as t.Log would
// panic on them.
func Logger(t testing.TB) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(w.stop) // registered first, run last: after the services stop
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

var _ io.Writer = (*testWriter)(nil)

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}

func (w *testWriter) stop() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}
