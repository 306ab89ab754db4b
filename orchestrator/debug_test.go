package orchestrator_test

import (
	"testing"

	"github.com/nats-io/nats.go"
)

func traceAll(t testing.TB, w *world) {
	_, _ = w.nc.Subscribe(">", func(m *nats.Msg) {
		if len(m.Subject) > 4 && m.Subject[:4] == "$JS." {
			return
		}
		t.Logf("%s %s", m.Subject, string(m.Data))
	})
}
