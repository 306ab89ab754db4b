// Package bustest gives each test its own real embedded NATS server with
// JetStream, on a temporary store and a random loopback port, closed when
// the test ends.
package bustest

import (
	"testing"

	"github.com/ioa-nats/ioa/bus"
)

// New starts a bus for t. Options may adjust the config before start.
func New(t testing.TB, opts ...func(*bus.Config)) *bus.Bus {
	t.Helper()
	cfg := bus.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0"}
	for _, o := range opts {
		o(&cfg)
	}
	b, err := bus.Start(t.Context(), cfg)
	if err != nil {
		t.Fatalf("bustest: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}
