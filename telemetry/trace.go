package telemetry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// TracerName is the instrumentation scope of ioa's spans.
const TracerName = "github.com/ioa-nats/ioa"

// GenAI semantic-convention attribute keys
// (https://opentelemetry.io/docs/specs/semconv/gen-ai/).
const (
	AttrOperation    = attribute.Key("gen_ai.operation.name")
	AttrAgentName    = attribute.Key("gen_ai.agent.name")
	AttrConversation = attribute.Key("gen_ai.conversation.id")
	AttrModel        = attribute.Key("gen_ai.request.model")
	AttrInputTokens  = attribute.Key("gen_ai.usage.input_tokens")
	AttrOutputTokens = attribute.Key("gen_ai.usage.output_tokens")
	AttrToolName     = attribute.Key("gen_ai.tool.name")
	// ioa's own.
	AttrGoalID  = attribute.Key("ioa.goal.id")
	AttrTaskID  = attribute.Key("ioa.task.id")
	AttrStatus  = attribute.Key("ioa.status")
	AttrOutcome = attribute.Key("ioa.outcome")
)

// GenAI operation names used by ioa's spans.
const (
	OpInvokeAgent = "invoke_agent" // a goal, a turn, a team-up
	OpExecuteTool = "execute_tool" // a task
	OpChat        = "chat"         // a model call
)

var (
	enabled atomic.Bool
	tracer  atomic.Pointer[trace.Tracer]
	noSpan  = trace.SpanFromContext(context.Background()) // the no-op span
	tc      = propagation.TraceContext{}
)

// Enabled reports whether spans are recorded in this process. It is false
// unless Setup found an exporter configured or SetTracerProvider was called.
func Enabled() bool { return enabled.Load() }

// SetTracerProvider makes tp the process's tracer provider (also otel's
// global one) and turns tracing on; nil turns it off again. Tests use it
// with an in-memory exporter.
func SetTracerProvider(tp trace.TracerProvider) {
	if tp == nil {
		enabled.Store(false)
		otel.SetTracerProvider(noop.NewTracerProvider())
		return
	}
	t := tp.Tracer(TracerName)
	tracer.Store(&t)
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	enabled.Store(true)
}

// Setup turns tracing on when the standard OpenTelemetry environment asks
// for it, exporting with OTLP over HTTP (protobuf):
//
//   - OTEL_TRACES_EXPORTER=otlp, or unset with OTEL_EXPORTER_OTLP_ENDPOINT
//     or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT set: on;
//   - OTEL_TRACES_EXPORTER=none, OTEL_SDK_DISABLED=true, or nothing set: off
//     (unlike the SDK's own default, ioa exports nothing unless told where);
//   - the exporter reads OTEL_EXPORTER_OTLP_* (endpoint, headers, timeout,
//     ...), the SDK OTEL_TRACES_SAMPLER and OTEL_BSP_*, the resource
//     OTEL_SERVICE_NAME (default service) and OTEL_RESOURCE_ATTRIBUTES.
//
// It returns a shutdown that flushes the spans (a no-op when off).
func Setup(ctx context.Context, service string) (shutdown func(context.Context) error, err error) {
	none := func(context.Context) error { return nil }
	on, err := tracingWanted()
	if err != nil || !on {
		return none, err
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return none, fmt.Errorf("telemetry: OTLP exporter: %w", err)
	}
	attrs := []attribute.KeyValue{}
	if os.Getenv("OTEL_SERVICE_NAME") == "" && service != "" {
		attrs = append(attrs, attribute.String("service.name", service))
	}
	res, err := resource.New(ctx, resource.WithTelemetrySDK(), resource.WithAttributes(attrs...), resource.WithFromEnv())
	if err != nil && res == nil {
		return none, fmt.Errorf("telemetry: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	SetTracerProvider(tp)
	return func(ctx context.Context) error {
		SetTracerProvider(nil)
		return tp.Shutdown(ctx)
	}, nil
}

// tracingWanted reads the environment as Setup describes.
func tracingWanted() (bool, error) {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return false, nil
	}
	switch p := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"); {
	case p == "" && os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL") == "":
	case p == "http/protobuf", p == "" && os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL") == "http/protobuf":
	default:
		if p == "" {
			p = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
		}
		return false, fmt.Errorf("telemetry: OTEL_EXPORTER_OTLP_PROTOCOL %q is not supported: ioa exports traces with http/protobuf", p)
	}
	switch e := strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER")); e {
	case "":
		return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "", nil
	case "none":
		return false, nil
	case "otlp":
		return true, nil
	default:
		return false, errors.New("telemetry: OTEL_TRACES_EXPORTER " + e + " is not supported: use otlp or none")
	}
}

// Start starts a span as a child of ctx's. With tracing off it returns ctx
// itself and a no-op span, without allocating: callers add attributes only
// when span.IsRecording().
func Start(ctx context.Context, name string, kind trace.SpanKind) (context.Context, trace.Span) {
	if !enabled.Load() {
		return ctx, noSpan
	}
	return (*tracer.Load()).Start(ctx, name, trace.WithSpanKind(kind))
}

// StartAgent starts a GenAI span of an agent's work in a chat:
// "<op> <agent>", with gen_ai.operation.name, gen_ai.agent.name and
// gen_ai.conversation.id (the comm id, when known).
func StartAgent(ctx context.Context, op, agent, comm string) (context.Context, trace.Span) {
	if !enabled.Load() {
		return ctx, noSpan
	}
	ctx, span := (*tracer.Load()).Start(ctx, op+" "+agent, trace.WithSpanKind(trace.SpanKindInternal))
	span.SetAttributes(AttrOperation.String(op), AttrAgentName.String(agent))
	if comm != "" {
		span.SetAttributes(AttrConversation.String(comm))
	}
	return ctx, span
}

// Fail marks a span as failed with err (nothing for a nil err).
func Fail(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
}
