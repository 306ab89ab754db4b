package llm

import (
	"context"
	"errors"
	"fmt"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/telemetry"
	"github.com/tmc/langchaingo/llms"
	"go.opentelemetry.io/otel/trace"
)

// ErrEmptyAnswer is returned for a response with no choices.
var ErrEmptyAnswer = errors.New("llm: the model returned no choices")

// Generate calls model once and returns its first choice with the call's
// usage: the provider's token counts, or an estimate where it reported
// none. A panic in the model client becomes an error. Usage is zero when
// no response arrived.
//
// With tracing on (package telemetry) each call is a "chat <model>" span
// with the GenAI attributes: operation, request model, token usage.
func Generate(ctx context.Context, model llms.Model, msgs []llms.MessageContent, opts ...llms.CallOption) (choice *llms.ContentChoice, u protocol.Usage, err error) {
	ctx, span := telemetry.Start(ctx, "chat", trace.SpanKindClient)
	defer func() {
		if p := recover(); p != nil {
			choice, u, err = nil, protocol.Usage{}, fmt.Errorf("llm: model client panicked: %v", p)
		}
		if span.IsRecording() {
			name := ModelName(model)
			span.SetName("chat " + name)
			span.SetAttributes(telemetry.AttrOperation.String(telemetry.OpChat), telemetry.AttrModel.String(name),
				telemetry.AttrInputTokens.Int(u.PromptTokens), telemetry.AttrOutputTokens.Int(u.CompletionTokens))
			telemetry.Fail(span, err)
		}
		span.End()
	}()
	resp, err := model.GenerateContent(ctx, msgs, opts...)
	if err != nil {
		return nil, protocol.Usage{}, err
	}
	u = usageOf(msgs, resp)
	if resp == nil || len(resp.Choices) == 0 || resp.Choices[0] == nil {
		return nil, u, ErrEmptyAnswer
	}
	return resp.Choices[0], u, nil
}

// ModelName is the model a Model (NewModel) was configured with, "" for
// other llms.Model implementations or when the provider's default is used.
func ModelName(model llms.Model) string {
	if m, ok := model.(*Model); ok {
		return m.cfg.Model
	}
	return ""
}

func system(text string) llms.MessageContent { return llms.TextParts(llms.ChatMessageTypeSystem, text) }
func human(text string) llms.MessageContent  { return llms.TextParts(llms.ChatMessageTypeHuman, text) }
func ai(text string) llms.MessageContent     { return llms.TextParts(llms.ChatMessageTypeAI, text) }
