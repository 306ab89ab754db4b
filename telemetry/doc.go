// Package telemetry is ioa's Prometheus metrics and OpenTelemetry traces.
//
// Metrics: NewMetrics makes one process's metrics on a prometheus.Registry
// of their own (with the Go and process collectors); Handler serves them on
// `ioa serve --http`'s /metrics. The services take a *Metrics in their
// configs (orchestrator.Config.Metrics, registry.Config.Metrics,
// llm.PolicyConfig.Metrics); every method is a no-op on nil, so code that
// was given none pays nothing.
//
// Traces: off unless Setup finds an OTLP exporter configured by the
// standard OTEL_* variables (or a test calls SetTracerProvider). Start and
// StartAgent return the context unchanged and a no-op span when off,
// without allocating. A goal is one trace: the orchestrator starts its root
// span at submission and keeps its traceparent in the goal record; every
// message the referee fans out to a member carries the W3C traceparent
// header of the goal's span, so the member's turn, task, model-call and
// registry-search spans join the trace, in this process or in a foreign
// agent's. HeaderCarrier reads and writes the header key exactly
// ("traceparent"): NATS headers are case sensitive.
//
// Off costs nothing: TestOffIsFree checks that the instrumentation points
// allocate nothing, and BenchmarkGoal counts allocations per goal bare,
// with metrics, and with tracing (go test -run '^$' -bench BenchmarkGoal
// -benchtime 200x ./telemetry).
//
// Imports point down: telemetry uses agentkit/protocol, nats.go,
// client_golang and otel; the services import it, never the reverse.
package telemetry
