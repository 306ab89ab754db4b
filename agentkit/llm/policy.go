package llm

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/telemetry"
	"github.com/tmc/langchaingo/llms"
)

// PolicyConfig tunes the llm policy; the zero value is the default.
type PolicyConfig struct {
	// Context bounds the turn prompts.
	Context ContextConfig
	// Retries is how many times an unusable answer goes back to the model
	// with the reason before the policy makes its fallback move (default
	// 2; negative: none).
	Retries int
	// TurnTimeout bounds one decision, retries included (default 90s);
	// when it passes, the fallback move is made.
	TurnTimeout time.Duration
	// TeamUpRounds bounds the tool-calling rounds of team-up (default 3);
	// the last one forces team_up.
	TeamUpRounds int
	// MaxTeam bounds the team, the launcher included (default 6).
	MaxTeam int
	// SearchLimit is how many agents one agent_discovery returns (default 5).
	SearchLimit int
	// MinMatch is the registry match below which agent_discovery marks a
	// result low_match: it probably cannot do the task (default
	// protocol.DefaultMinMatch; negative: nothing is marked).
	MinMatch float64
	// JSONMode asks the server for a JSON object answer
	// (response_format); not every OpenAI-compatible server supports it.
	JSONMode bool
	// Logger; nil discards. Prompts and answers are logged at debug level
	// only by size.
	Logger *slog.Logger
	// Metrics, if not nil, count the calls and tokens by agent and model
	// (telemetry.Metrics).
	Metrics *telemetry.Metrics
}

func (c PolicyConfig) withDefaults() PolicyConfig {
	switch {
	case c.Retries == 0:
		c.Retries = 2
	case c.Retries < 0:
		c.Retries = 0
	}
	if c.TurnTimeout <= 0 {
		c.TurnTimeout = 90 * time.Second
	}
	if c.TeamUpRounds <= 0 {
		c.TeamUpRounds = 3
	}
	if c.MaxTeam <= 1 {
		c.MaxTeam = 6
	}
	if c.SearchLimit <= 0 {
		c.SearchLimit = 5
	}
	if c.MinMatch == 0 {
		c.MinMatch = protocol.DefaultMinMatch
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Policy is the llm policy: a model decides team-up (with IoA's
// agent_discovery and team_up tools), each move (a JSON answer checked
// against the chat state machine, repaired or retried, then a safe
// fallback) and whether a task needs a nested team. It counts every call's
// tokens and hands them to the runtime (agentkit.UsageMeter). One Policy
// may serve several agents and chats at once.
type Policy struct {
	model llms.Model
	cfg   PolicyConfig
	log   *slog.Logger
	meter Meter
}

var (
	_ agentkit.Policy     = (*Policy)(nil)
	_ agentkit.UsageMeter = (*Policy)(nil)
)

// New returns an llm policy on model (see NewModel).
func New(model llms.Model, cfg PolicyConfig) *Policy {
	cfg = cfg.withDefaults()
	return &Policy{model: model, cfg: cfg, log: cfg.Logger}
}

// TakeUsage implements agentkit.UsageMeter.
func (p *Policy) TakeUsage(agent, goalID string) protocol.Usage {
	return p.meter.TakeUsage(agent, goalID)
}

// Usage returns everything the policy has spent for agent ("" for all).
func (p *Policy) Usage(agent string) protocol.Usage { return p.meter.Total(agent) }

func (p *Policy) call(ctx context.Context, agent, goal string, msgs []llms.MessageContent, opts ...llms.CallOption) (*llms.ContentChoice, error) {
	start := time.Now()
	choice, u, err := Generate(ctx, p.model, msgs, opts...)
	if u.LLMCalls > 0 {
		p.meter.Record(agent, goal, u)
	}
	p.cfg.Metrics.LLMCall(agent, ModelName(p.model), u, time.Since(start), err)
	p.log.Debug("llm call", "agent", agent, "goal_id", goal, "prompt_chars", len(promptText(msgs)),
		"prompt_tokens", u.PromptTokens, "completion_tokens", u.CompletionTokens, "elapsed", time.Since(start), "err", errString(err))
	return choice, err
}

// NextMessage asks the model for the move and returns only a move that the
// chat state machine accepts: the model's, repaired if need be, or after
// Retries refused answers (or a failed call) the fallback.
func (p *Policy) NextMessage(ctx context.Context, t agentkit.Turn) (protocol.AgentMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.TurnTimeout)
	defer cancel()
	self := t.Self.Name
	base := []llms.MessageContent{
		system(SystemPrompt(t.Self, t.Chat, t.Team)),
		human(TurnPrompt(t, p.cfg.Context)),
	}
	msgs := base
	var opts []llms.CallOption
	if p.cfg.JSONMode {
		opts = append(opts, llms.WithJSONMode())
	}
	var cause error
	for attempt := 0; attempt <= p.cfg.Retries; attempt++ {
		choice, err := p.call(ctx, self, t.Chat.GoalID, msgs, opts...)
		if err != nil {
			// The transport has already retried what could be retried.
			cause = err
			break
		}
		m, err := ParseAnswer(choice.Content)
		if err == nil {
			m, err = Complete(t.Chat, self, m)
		}
		if err == nil {
			return m, nil
		}
		cause = err
		p.log.Info("unusable answer", "agent", self, "comm_id", t.Chat.CommID, "attempt", attempt, "err", err)
		// Only the last bad answer goes back, so retries do not grow the
		// prompt.
		msgs = append(base[:len(base):len(base)],
			ai(clip(choice.Content, 2000)),
			human(fmt.Sprintf("That answer cannot be used: %s. Reply with one corrected JSON object only.", clip(oneLine(err.Error()), 300))))
	}
	p.log.Warn("making the fallback move", "agent", self, "comm_id", t.Chat.CommID, "err", cause)
	return Fallback(t.Chat, self, cause), nil
}

// Fallback is the safe move when the model gives none: the launcher
// concludes from the task board; anyone else hands the turn to the
// launcher, or concludes when nothing else is legal.
func Fallback(c protocol.Chat, self string, cause error) protocol.AgentMessage {
	reason := "the model gave no usable move"
	if cause != nil {
		reason += ": " + clip(oneLine(cause.Error()), 200)
	}
	if c.Launcher != self {
		m := protocol.AgentMessage{
			Type:        protocol.MsgDiscussion,
			Content:     fmt.Sprintf("%s hands the turn back to %s (%s).", self, c.Launcher, reason),
			NextSpeaker: []string{c.Launcher},
		}
		if m, err := Complete(c, self, m); err == nil {
			return m
		}
	}
	return protocol.AgentMessage{
		Type:    protocol.MsgConclusion,
		Content: clip(fmt.Sprintf("Concluded from the task board (%s).\n%s", reason, agentkit.TaskReport(c.Tasks)), maxContentChars),
	}
}
