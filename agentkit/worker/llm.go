package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/llm"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/tmc/langchaingo/llms"
)

// DefaultLLMTimeout bounds an LLM run when LLM.Timeout is zero.
const DefaultLLMTimeout = 2 * time.Minute

// LLM has a model answer each task, in the role of the agent's card
// description. It counts each call's tokens and hands them to the runtime
// (agentkit.UsageMeter), which reports them with the task's result.
type LLM struct {
	// Model answers; see llm.NewModel.
	Model llms.Model
	// Name and Role are the agent's name and card description: the system
	// prompt.
	Name, Role string
	// Timeout bounds a run (default 2m).
	Timeout time.Duration
	// MaxTokens bounds the answer; 0 leaves the model's default.
	MaxTokens int

	meter llm.Meter
}

var (
	_ agentkit.Worker     = (*LLM)(nil)
	_ agentkit.UsageMeter = (*LLM)(nil)
)

// NewLLM returns an LLM worker for the agent with card.
func NewLLM(model llms.Model, card protocol.AgentCard) *LLM {
	return &LLM{Model: model, Name: card.Name, Role: card.Description}
}

// Earlier results shown to the model, and how much of each.
const (
	llmEarlier      = 8
	llmEarlierChars = 600
)

// Run asks the model once for t's result.
func (w *LLM) Run(ctx context.Context, t agentkit.Task) (agentkit.Result, error) {
	if w.Model == nil {
		return agentkit.Result{}, errors.New("llm worker: no model")
	}
	timeout := w.Timeout
	if timeout <= 0 {
		timeout = DefaultLLMTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	name := w.Name
	if name == "" {
		name = "an agent"
	}
	sys := fmt.Sprintf("You are %s: %s\nYou do a task assigned to you by a team working on a goal. Answer with the task's result only.", name, w.Role)
	var b strings.Builder
	fmt.Fprintf(&b, "Goal of the team: %s\nYour task (%s): %s\n%s\n", t.Goal, t.TaskID, t.TaskAbstract, t.TaskDesc)
	earlier := t.Earlier
	if len(earlier) > llmEarlier {
		earlier = earlier[len(earlier)-llmEarlier:]
	}
	if len(earlier) > 0 {
		b.WriteString("Results of earlier tasks:\n")
		for _, e := range earlier {
			r := e.Result
			if len(r) > llmEarlierChars {
				r = r[:llmEarlierChars] + " [...]"
			}
			fmt.Fprintf(&b, "- %s (%s, %s): %s\n", e.TaskAbstract, e.Assignee, e.Status, r)
		}
	}
	var opts []llms.CallOption
	if w.MaxTokens > 0 {
		opts = append(opts, llms.WithMaxTokens(w.MaxTokens))
	}
	choice, u, err := llm.Generate(ctx, w.Model, []llms.MessageContent{
		llms.TextParts(llms.ChatMessageTypeSystem, sys),
		llms.TextParts(llms.ChatMessageTypeHuman, b.String()),
	}, opts...)
	if u.LLMCalls > 0 {
		w.meter.Record("", t.GoalID, u)
	}
	if err != nil {
		return agentkit.Result{}, fmt.Errorf("llm worker: %w", err)
	}
	out := strings.TrimSpace(choice.Content)
	if out == "" {
		return agentkit.Result{}, errors.New("llm worker: the model gave an empty answer")
	}
	return agentkit.Result{Conclusion: out}, nil
}

// TakeUsage implements agentkit.UsageMeter. The worker serves one agent, so
// agent is not needed.
func (w *LLM) TakeUsage(_ string, goalID string) protocol.Usage { return w.meter.TakeUsage("", goalID) }

// Usage returns everything the worker has spent.
func (w *LLM) Usage() protocol.Usage { return w.meter.Total("") }
