// Package interop builds the agents whose workers speak another protocol:
// an MCP server's tools (worker kind mcp, package interop/mcp) or a remote
// A2A agent (worker kind a2a, package interop/a2a). It reaches the server
// when the agent is built, to fill the agent's card from what the server
// offers. The A2A front door and the MCP server that publish ioa itself are
// in the same two packages.
package interop

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"

	"github.com/tmc/langchaingo/llms"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/configs"
	"github.com/ioa-nats/ioa/interop/a2a"
	"github.com/ioa-nats/ioa/interop/mcp"
)

// Kinds are the worker kinds built here.
var Kinds = []string{"mcp", "a2a"}

// Handles reports whether Build makes workers of this kind.
func Handles(kind string) bool { return slices.Contains(Kinds, kind) }

// Options tune Build.
type Options struct {
	// Model, when set, chooses and fills an mcp worker's tool calls (the
	// agent's policy is llm); without it the rules chooser (mcp.Match)
	// does.
	Model  llms.Model
	Logger *slog.Logger
}

// Built is a worker and the card it completed.
type Built struct {
	Worker agentkit.Worker
	Card   protocol.AgentCard
	// Close ends the worker's session (and a stdio MCP server).
	Close func() error
}

// Build reaches the agent's server and returns its worker, with card
// completed: the description from the server when the configuration has
// none, the tools' descriptions or the skills appended to the
// capabilities, and the protocol as a tag.
func Build(ctx context.Context, a configs.Agent, card protocol.AgentCard, o Options) (Built, error) {
	w := a.Worker
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	switch w.Kind {
	case "mcp":
		cfg := mcp.Config{Command: w.Command, Dir: w.Dir, URL: w.URL, Timeout: w.Timeout, MaxResponse: w.MaxOutput, Tools: w.Tools, Logger: log.With("agent", a.Name)}
		if w.Token != "" {
			cfg.Header = http.Header{"Authorization": {"Bearer " + w.Token}}
		}
		if o.Model != nil {
			cfg.Chooser = &mcp.Model{Model: o.Model, Agent: a.Name}
		}
		mw, err := mcp.Dial(ctx, cfg)
		if err != nil {
			return Built{}, err
		}
		if card.Description == "" {
			card.Description = mw.Description()
		}
		card.Capabilities = append(slices.Clone(card.Capabilities), mw.Capabilities()...)
		card.Tags = appendNew(card.Tags, "mcp")
		var worker agentkit.Worker = mw
		if m, ok := cfg.Chooser.(*mcp.Model); ok {
			worker = meteredWorker{mw, m}
		}
		return Built{Worker: worker, Card: card, Close: mw.Close}, nil
	case "a2a":
		aw, err := a2a.DialWorker(ctx, a2a.WorkerConfig{URL: w.URL, Token: w.Token, Timeout: w.Timeout, Logger: log.With("agent", a.Name)})
		if err != nil {
			return Built{}, err
		}
		if card.Description == "" {
			card.Description = aw.Description()
		}
		card.Capabilities = append(slices.Clone(card.Capabilities), aw.Capabilities()...)
		card.Tags = appendNew(appendNew(card.Tags, "a2a"), aw.Tags()...)
		if card.Metadata == nil {
			card.Metadata = map[string]string{}
		}
		card.Metadata["a2a_agent"] = aw.Card().Name
		card.Metadata["a2a_url"] = aw.Card().URL
		return Built{Worker: aw, Card: card, Close: aw.Close}, nil
	}
	return Built{}, fmt.Errorf("worker kind %q is not mcp or a2a", w.Kind)
}

func appendNew(list []string, more ...string) []string {
	out := slices.Clone(list)
	for _, m := range more {
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// meteredWorker reports the model chooser's usage with the task results.
type meteredWorker struct {
	*mcp.Worker
	m *mcp.Model
}

func (w meteredWorker) TakeUsage(agent, goalID string) protocol.Usage {
	return w.m.TakeUsage(agent, goalID)
}
