package llm

import (
	"context"
	"errors"
	"fmt"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/tmc/langchaingo/llms"
)

// ErrEmptyAnswer is returned for a response with no choices.
var ErrEmptyAnswer = errors.New("llm: the model returned no choices")

// Generate calls model once and returns its first choice with the call's
// usage: the provider's token counts, or an estimate where it reported
// none. A panic in the model client becomes an error. Usage is zero when
// no response arrived.
func Generate(ctx context.Context, model llms.Model, msgs []llms.MessageContent, opts ...llms.CallOption) (choice *llms.ContentChoice, u protocol.Usage, err error) {
	defer func() {
		if p := recover(); p != nil {
			choice, u, err = nil, protocol.Usage{}, fmt.Errorf("llm: model client panicked: %v", p)
		}
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

func system(text string) llms.MessageContent { return llms.TextParts(llms.ChatMessageTypeSystem, text) }
func human(text string) llms.MessageContent  { return llms.TextParts(llms.ChatMessageTypeHuman, text) }
func ai(text string) llms.MessageContent     { return llms.TextParts(llms.ChatMessageTypeAI, text) }
