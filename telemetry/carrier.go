package telemetry

import (
	"context"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// W3C Trace Context header names, exactly as the spec writes them.
const (
	HeaderTraceParent = "traceparent"
	HeaderTraceState  = "tracestate"
)

// HeaderCarrier is a propagation.TextMapCarrier over NATS message headers
// that reads and writes keys exactly as given: NATS header names are case
// sensitive, and the protocol's header is "traceparent", never the
// "Traceparent" of net/http's canonical form (which older nats.go versions
// wrote from Header.Set). nats.Header itself has no Keys, so it is no
// carrier.
type HeaderCarrier nats.Header

var _ propagation.TextMapCarrier = HeaderCarrier(nil)

// Get returns the first value of key, matched exactly.
func (c HeaderCarrier) Get(key string) string {
	if v := c[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// Set replaces the values of key, kept exactly as given.
func (c HeaderCarrier) Set(key, value string) { c[key] = []string{value} }

// Keys lists the header keys.
func (c HeaderCarrier) Keys() []string {
	out := make([]string, 0, len(c))
	for k := range c {
		out = append(out, k)
	}
	return out
}

// Inject writes ctx's span context into h as traceparent (and tracestate)
// and returns h, made if nil. With tracing off or no span in ctx it returns
// h unchanged, so a message carries no header it does not need.
func Inject(ctx context.Context, h nats.Header) nats.Header {
	if !enabled.Load() || !trace.SpanContextFromContext(ctx).IsValid() {
		return h
	}
	if h == nil {
		h = nats.Header{}
	}
	tc.Inject(ctx, HeaderCarrier(h))
	return h
}

// Extract returns ctx with the remote span context of h's traceparent, if
// it has a valid one and tracing is on.
func Extract(ctx context.Context, h nats.Header) context.Context {
	if !enabled.Load() || len(h) == 0 {
		return ctx
	}
	return tc.Extract(ctx, HeaderCarrier(h))
}

// TraceParent returns ctx's span context as a traceparent value, "" with
// tracing off or no span. Records that outlive a span (a goal's) keep it.
func TraceParent(ctx context.Context) string {
	if !enabled.Load() || !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	tc.Inject(ctx, c)
	return c[HeaderTraceParent]
}

// WithTraceParent returns ctx with the remote span context of a
// traceparent value; ctx unchanged when it is "" or invalid, or tracing is off.
func WithTraceParent(ctx context.Context, traceparent string) context.Context {
	if !enabled.Load() || traceparent == "" {
		return ctx
	}
	return tc.Extract(ctx, propagation.MapCarrier{HeaderTraceParent: traceparent})
}

// HeaderOf returns a header carrying only traceparent, nil when it is ""
// or tracing is off.
func HeaderOf(traceparent string) nats.Header {
	if traceparent == "" || !enabled.Load() {
		return nil
	}
	return nats.Header{HeaderTraceParent: []string{traceparent}}
}
