package orchestrator_test

import (
	"testing"

	"github.com/ioa-nats/ioa/bus"
)

// requestJSON sends a request to <p>.<rel> and decodes the reply.
func requestJSON(t testing.TB, w *world, rel string, in, out any) error {
	t.Helper()
	return bus.Request(t.Context(), w.nc, w.b.Subjects().Prefix()+"."+rel, in, out)
}
