package telemetry_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/internal/stacktest"
	"github.com/ioa-nats/ioa/orchestrator"
	"github.com/ioa-nats/ioa/registry"
	"github.com/ioa-nats/ioa/telemetry"
)

// discard is a span exporter that drops what it is given.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// BenchmarkGoal runs one goal per op (launch, team-up, turns, a task) on
// one in-process stack: bare (no metrics, no tracing: the cost before
// telemetry existed), with metrics (as ioa serve runs), and with metrics
// and tracing (every span recorded and dropped). Compare allocs/op: the
// bare and metrics variants show what telemetry costs when off.
//
//	go test -run '^$' -bench BenchmarkGoal -benchtime 200x ./telemetry
func BenchmarkGoal(b *testing.B) {
	for _, v := range []struct {
		name             string
		metrics, tracing bool
	}{{"bare", false, false}, {"metrics", true, false}, {"metrics+tracing", true, true}} {
		b.Run(v.name, func(b *testing.B) {
			var m *telemetry.Metrics
			if v.metrics {
				m = telemetry.NewMetrics()
			}
			if v.tracing {
				tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sdktrace.NewSimpleSpanProcessor(discard{})))
				telemetry.SetTracerProvider(tp)
				b.Cleanup(func() { telemetry.SetTracerProvider(nil) })
			}
			s := stacktest.Start(b, stacktest.Options{Coordinator: true,
				Orchestrator: orchestrator.Config{Metrics: m}, Registry: registry.Config{Metrics: m}})
			s.RunAgents(b, nil, demoAgents(b)...)
			s.Submit(b, protocol.GoalRequest{Goal: "Compute 6 * 7"}) // warm up
			b.ReportAllocs()
			n, turns := 0, 0
			for b.Loop() {
				res := s.Submit(b, protocol.GoalRequest{Goal: "Compute 6 * 7"})
				if res.Status != protocol.GoalConcluded {
					b.Fatalf("goal %s: %s", res.Status, res.Reason)
				}
				n, turns = n+1, turns+res.Turns
			}
			b.ReportMetric(float64(turns)/float64(n), "turns/op")
		})
	}
}
