package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/tmc/langchaingo/llms"
)

// The team-up tools, as in IoA.
const (
	ToolAgentDiscovery = "agent_discovery"
	ToolTeamUp         = "team_up"
)

var teamUpTools = []llms.Tool{
	{Type: "function", Function: &llms.FunctionDefinition{
		Name: ToolAgentDiscovery,
		Description: "Search the registry for agents able to help. Give several short queries, one per skill the goal needs. " +
			"Each agent found has a score (its rank among the results, 0 to 1) and a match (how well its card covers the queries, 0 to 1); " +
			"low_match:true means it probably cannot do the work: leave it out, and if no agent fits a part of the goal, say so in the conclusion.",
		Parameters: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"queries": map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": "short descriptions of the skills needed"},
			},
			"required": []string{"queries"},
		},
	}},
	{Type: "function", Function: &llms.FunctionDefinition{
		Name:        ToolTeamUp,
		Description: "Form the team: the names of the agents, found with agent_discovery, that will work on the goal with you.",
		Parameters: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"team_members": map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": "agent names"},
			},
			"required": []string{"team_members"},
		},
	}},
}

// discovered is one agent found by agent_discovery, as the model sees it.
type discovered struct {
	Name        string  `json:"name"`
	Description string  `json:"description"`
	Score       float64 `json:"score"`
	Match       float64 `json:"match"`
	LowMatch    bool    `json:"low_match,omitempty"`
}

// TeamUp takes the team the goal names; otherwise the model discovers
// agents and forms the team with tool calls over at most TeamUpRounds
// rounds, the last forcing team_up. Names the registry did not return are
// dropped. If the model never forms a team, the registry's best matches
// for the goal are taken.
func (p *Policy) TeamUp(ctx context.Context, req agentkit.TeamUpRequest) (agentkit.TeamUpDecision, error) {
	self := req.Self.Name
	if len(req.Team) > 0 {
		var members []string
		for _, n := range req.Team {
			if n != self && !slices.Contains(members, n) && len(members) < p.cfg.MaxTeam-1 {
				members = append(members, n)
			}
		}
		return agentkit.TeamUpDecision{Members: members}, nil
	}
	if req.Registry == nil {
		return agentkit.TeamUpDecision{}, errors.New("llm: team-up needs a registry")
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.TurnTimeout)
	defer cancel()
	found := map[string]discovered{}
	msgs := []llms.MessageContent{
		system(fmt.Sprintf("You are %s: %s\nYou launch a team of agents for a goal. First call %s with short queries, one per skill the goal needs. Then call %s with the names of the agents you need (at most %d, not yourself). Use only names that %s returned.",
			self, clip(oneLine(req.Self.Description), 400), ToolAgentDiscovery, ToolTeamUp, p.cfg.MaxTeam-1, ToolAgentDiscovery)),
		human("Goal: " + clip(req.Goal, 4000)),
	}
	var cause error
	for round := 0; round < p.cfg.TeamUpRounds; round++ {
		opts := []llms.CallOption{llms.WithTools(teamUpTools)}
		if round == p.cfg.TeamUpRounds-1 {
			opts = append(opts, llms.WithToolChoice(llms.ToolChoice{Type: "function", Function: &llms.FunctionReference{Name: ToolTeamUp}}))
		}
		choice, err := p.call(ctx, self, req.GoalID, msgs, opts...)
		if err != nil {
			cause = err
			break
		}
		calls := choice.ToolCalls
		if len(calls) == 0 {
			// Some servers answer a forced call as text.
			if members := p.acceptTeam(ctx, req, found, textTeam(choice.Content)); len(members) > 0 {
				return agentkit.TeamUpDecision{Members: members}, nil
			}
			cause = errors.New("the model called no tool")
			msgs = append(msgs, ai(clip(choice.Content, 1000)), human(fmt.Sprintf("Call %s or %s.", ToolAgentDiscovery, ToolTeamUp)))
			continue
		}
		parts := make([]llms.ContentPart, 0, len(calls))
		for _, c := range calls {
			if c.FunctionCall != nil {
				parts = append(parts, c)
			}
		}
		msgs = append(msgs, llms.MessageContent{Role: llms.ChatMessageTypeAI, Parts: parts})
		for _, c := range calls {
			if c.FunctionCall == nil {
				continue
			}
			var out string
			switch c.FunctionCall.Name {
			case ToolAgentDiscovery:
				out = p.discover(ctx, req, found, c.FunctionCall.Arguments)
			case ToolTeamUp:
				var args struct {
					TeamMembers any `json:"team_members"`
				}
				_ = json.Unmarshal([]byte(c.FunctionCall.Arguments), &args)
				if members := p.acceptTeam(ctx, req, found, stringsOf(args.TeamMembers)); len(members) > 0 {
					return agentkit.TeamUpDecision{Members: members}, nil
				}
				cause = fmt.Errorf("team_up named no agent the registry knows: %s", clip(c.FunctionCall.Arguments, 200))
				out = `{"error":"none of these agents is known; call team_up with names returned by agent_discovery"}`
			default:
				out = fmt.Sprintf(`{"error":"unknown tool %q"}`, c.FunctionCall.Name)
			}
			msgs = append(msgs, llms.MessageContent{Role: llms.ChatMessageTypeTool, Parts: []llms.ContentPart{
				llms.ToolCallResponse{ToolCallID: c.ID, Name: c.FunctionCall.Name, Content: out},
			}})
		}
	}
	p.log.Warn("team-up by the model failed; taking the registry's best matches that match well enough", "agent", self, "goal_id", req.GoalID, "err", cause)
	res, err := req.Registry.Search(ctx, protocol.SearchRequest{Queries: []string{clip(req.Goal, 1000)}, Limit: p.cfg.SearchLimit, Exclude: []string{self}})
	if err != nil {
		return agentkit.TeamUpDecision{}, fmt.Errorf("llm: team-up: %w", err)
	}
	var members []string
	for _, r := range res {
		if r.Name != self && len(members) < min(p.cfg.MaxTeam-1, 3) && (p.cfg.MinMatch < 0 || r.Match >= p.cfg.MinMatch) {
			members = append(members, r.Name)
		}
	}
	return agentkit.TeamUpDecision{Members: members}, nil
}

// discover runs agent_discovery and returns the tool's answer.
func (p *Policy) discover(ctx context.Context, req agentkit.TeamUpRequest, found map[string]discovered, rawArgs string) string {
	var args struct {
		Queries any `json:"queries"`
		Query   any `json:"query"`
	}
	_ = json.Unmarshal([]byte(rawArgs), &args)
	var queries []string
	for _, q := range append(stringsOf(args.Queries), stringsOf(args.Query)...) {
		if q = strings.TrimSpace(q); q != "" && len(queries) < 8 {
			queries = append(queries, clip(q, 300))
		}
	}
	if len(queries) == 0 {
		return `{"error":"give queries: a list of short skill descriptions"}`
	}
	res, err := req.Registry.Search(ctx, protocol.SearchRequest{Queries: queries, Limit: p.cfg.SearchLimit, Exclude: []string{req.Self.Name}})
	if err != nil {
		return fmt.Sprintf(`{"error":%q}`, "search failed: "+err.Error())
	}
	out := make([]discovered, 0, len(res))
	for _, r := range res {
		d := discovered{Name: r.Name, Description: clip(oneLine(r.Description), 300), Score: float64(int(r.Score*1000)) / 1000,
			Match: float64(int(r.Match*1000)) / 1000, LowMatch: r.Match < p.cfg.MinMatch}
		found[r.Name] = d
		out = append(out, d)
	}
	b, _ := json.Marshal(map[string]any{"agents": out})
	return string(b)
}

// acceptTeam keeps the names the registry knows: found by discovery, or
// confirmed by a search for the name itself.
func (p *Policy) acceptTeam(ctx context.Context, req agentkit.TeamUpRequest, found map[string]discovered, names []string) []string {
	var members []string
	for _, n := range names {
		n = strings.TrimPrefix(strings.TrimSpace(n), "@")
		if n == req.Self.Name || !protocol.ValidName(n) || slices.Contains(members, n) || len(members) >= p.cfg.MaxTeam-1 {
			continue
		}
		if _, ok := found[n]; !ok {
			res, err := req.Registry.Search(ctx, protocol.SearchRequest{Query: n, Limit: 10, Exclude: []string{req.Self.Name}})
			if err != nil || !slices.ContainsFunc(res, func(r protocol.SearchResult) bool { return r.Name == n }) {
				continue
			}
		}
		members = append(members, n)
	}
	return members
}

// textTeam reads {"team_members": [...]} from an answer given as text.
func textTeam(s string) []string {
	raw, err := extractJSON(s)
	if err != nil {
		return nil
	}
	var v struct {
		TeamMembers any `json:"team_members"`
	}
	if json.Unmarshal([]byte(raw), &v) != nil {
		return nil
	}
	return stringsOf(v.TeamMembers)
}

// stringsOf reads a string or a list of strings.
func stringsOf(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, e := range v {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
