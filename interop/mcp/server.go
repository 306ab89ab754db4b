package mcp

import (
	"context"
	"fmt"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/interop/internal/ioaclient"
)

// ServerOptions tune the MCP server.
type ServerOptions struct {
	// As is the identity goals are submitted for (identity-bound
	// subjects); empty means the plain subjects, the admin's.
	As string
	// MaxWait bounds how long submit_goal waits for a result (default 1h;
	// the server's goal timeout ends every goal sooner).
	MaxWait time.Duration
	// Version is reported in the MCP handshake.
	Version string
}

// SubmitArgs are submit_goal's arguments.
type SubmitArgs struct {
	Goal    string   `json:"goal" jsonschema:"the goal, in plain language, e.g. Convert 42 km to miles. Then write a Markdown report of the results."`
	Team    []string `json:"team,omitempty" jsonschema:"names of agents to work on it (skips discovery); see search_agents"`
	Timeout string   `json:"timeout,omitempty" jsonschema:"how long the goal may take, e.g. 2m (the server's limit applies)"`
}

// GoalIDArgs name a goal.
type GoalIDArgs struct {
	GoalID string `json:"goal_id" jsonschema:"the goal's id, as submit_goal returned it"`
}

// SearchArgs are search_agents' arguments.
type SearchArgs struct {
	Query string `json:"query" jsonschema:"what the agent should be able to do"`
	Limit int    `json:"limit,omitempty" jsonschema:"how many agents at most (default 5)"`
}

// ListArgs are list_agents' arguments.
type ListArgs struct {
	OnlineOnly bool `json:"online_only,omitempty" jsonschema:"only the agents that are running now"`
}

// AgentsOut is what search_agents and list_agents return.
type AgentsOut struct {
	Agents []AgentOut `json:"agents"`
}

// AgentOut is one agent.
type AgentOut struct {
	Name         string   `json:"name"`
	Description  string   `json:"description"`
	Capabilities []string `json:"capabilities,omitempty"`
	Online       bool     `json:"online"`
	Score        float64  `json:"score,omitempty"`
}

// GoalOut is a goal's result as the tools return it. Outcome says how much
// of it was done (succeeded, partial or failed) and Undone what was not.
type GoalOut struct {
	GoalID     string   `json:"goal_id"`
	Status     string   `json:"status"`
	Outcome    string   `json:"outcome,omitempty"`
	Conclusion string   `json:"conclusion"`
	Reason     string   `json:"reason,omitempty"`
	Undone     []string `json:"undone,omitempty"`
	CommID     string   `json:"comm_id,omitempty"`
	Turns      int      `json:"turns"`
	Elapsed    string   `json:"elapsed"`
}

func goalOut(r protocol.GoalResult) GoalOut {
	return GoalOut{r.GoalID, r.Status, r.Outcome, r.Conclusion, r.Reason, r.Undone, r.CommID, r.Turns, r.Elapsed.D().String()}
}

// StatusOut is a goal's record as the tools return it.
type StatusOut struct {
	GoalID    string   `json:"goal_id"`
	Status    string   `json:"status"`
	Goal      string   `json:"goal"`
	Submitter string   `json:"submitter,omitempty"`
	Team      []string `json:"team"`
	CommID    string   `json:"comm_id,omitempty"`
	Children  []string `json:"children"`
	CreatedAt string   `json:"created_at"`
	Result    *GoalOut `json:"result,omitempty"`
}

func statusOut(st protocol.GoalStatus) StatusOut {
	out := StatusOut{
		GoalID: st.GoalID, Status: st.Status, Goal: st.Goal, Submitter: st.Submitter,
		Team: nonNil(st.Team), CommID: st.CommID, Children: nonNil(st.Children),
		CreatedAt: st.CreatedAt.UTC().Format(time.RFC3339Nano),
	}
	if st.Result != nil {
		r := goalOut(*st.Result)
		out.Result = &r
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// NewServer returns an MCP server whose tools reach the ioa on nc:
// submit_goal (submit and wait for the result), goal_status, cancel_goal,
// search_agents and list_agents. Run it with Server.Run on a transport,
// e.g. &mcp.StdioTransport{}.
func NewServer(nc *nats.Conn, subj bus.Subjects, o ServerOptions) *sdk.Server {
	c := &ioaclient.Client{NC: nc, Subj: subj, As: o.As}
	if o.MaxWait <= 0 {
		o.MaxWait = time.Hour
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	s := sdk.NewServer(&sdk.Implementation{Name: "ioa", Title: "ioa: the Internet of Agents", Version: o.Version}, &sdk.ServerOptions{
		Instructions: "ioa runs a registry of agents that team up in group chats to reach goals. Hand a goal to a team with submit_goal; find who can help with search_agents.",
	})
	sdk.AddTool(s, &sdk.Tool{
		Name:        "submit_goal",
		Description: "Hand a goal to a team of ioa agents and wait for its result: the registry finds the agents, they discuss, split the work into tasks and conclude. The result's outcome says whether all of it (succeeded), part of it (partial) or none of it (failed, an error) was done.",
	}, func(ctx context.Context, _ *sdk.CallToolRequest, a SubmitArgs) (*sdk.CallToolResult, GoalOut, error) {
		goal := strings.TrimSpace(a.Goal)
		if goal == "" {
			return nil, GoalOut{}, fmt.Errorf("goal is required")
		}
		req := protocol.GoalRequest{Goal: goal, Team: a.Team}
		wait := o.MaxWait
		if a.Timeout != "" {
			d, err := time.ParseDuration(a.Timeout)
			if err != nil || d <= 0 {
				return nil, GoalOut{}, fmt.Errorf("timeout %q is not a positive duration such as 2m", a.Timeout)
			}
			req.Timeout = protocol.Duration(d)
			wait = min(wait, d+30*time.Second)
		}
		ctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		res, err := c.SubmitWait(ctx, req)
		if err != nil {
			return nil, GoalOut{}, fmt.Errorf("submit: %w", err)
		}
		status := res.Status
		if res.Outcome != "" {
			status += " (" + res.Outcome + ")"
		}
		text := fmt.Sprintf("goal %s %s after %d turns:\n%s", res.GoalID, status, res.Turns, res.Conclusion)
		if res.Reason != "" {
			text += "\n(reason: " + res.Reason + ")"
		}
		// A goal that concluded having done nothing is an error to the
		// client, as one that failed is: its request was not met.
		return &sdk.CallToolResult{
			Content: []sdk.Content{&sdk.TextContent{Text: text}},
			IsError: res.Status != protocol.GoalConcluded || res.Outcome == protocol.OutcomeFailed,
		}, goalOut(res), nil
	})
	sdk.AddTool(s, &sdk.Tool{
		Name:        "goal_status",
		Description: "The status of a goal submitted earlier: accepted, forming, running, concluded, failed, cancelled or timed_out, its team and, once it has ended, its result.",
	}, func(ctx context.Context, _ *sdk.CallToolRequest, a GoalIDArgs) (*sdk.CallToolResult, StatusOut, error) {
		if a.GoalID == "" {
			return nil, StatusOut{}, fmt.Errorf("goal_id is required")
		}
		st, err := c.Get(ctx, a.GoalID)
		if err != nil {
			return nil, StatusOut{}, err
		}
		return nil, statusOut(st), nil
	})
	sdk.AddTool(s, &sdk.Tool{
		Name:        "cancel_goal",
		Description: "Cancel a running goal (and its nested goals).",
	}, func(ctx context.Context, _ *sdk.CallToolRequest, a GoalIDArgs) (*sdk.CallToolResult, StatusOut, error) {
		if a.GoalID == "" {
			return nil, StatusOut{}, fmt.Errorf("goal_id is required")
		}
		st, err := c.Cancel(ctx, a.GoalID)
		if err != nil {
			return nil, StatusOut{}, err
		}
		return nil, statusOut(st), nil
	})
	sdk.AddTool(s, &sdk.Tool{
		Name:        "search_agents",
		Description: "Find the registered ioa agents that can do something, best first.",
	}, func(ctx context.Context, _ *sdk.CallToolRequest, a SearchArgs) (*sdk.CallToolResult, AgentsOut, error) {
		if strings.TrimSpace(a.Query) == "" {
			return nil, AgentsOut{}, fmt.Errorf("query is required")
		}
		if a.Limit <= 0 {
			a.Limit = 5
		}
		res, err := c.Search(ctx, protocol.SearchRequest{Query: a.Query, Limit: a.Limit})
		if err != nil {
			return nil, AgentsOut{}, err
		}
		out := AgentsOut{Agents: []AgentOut{}}
		for _, r := range res {
			out.Agents = append(out.Agents, AgentOut{Name: r.Name, Description: r.Description, Capabilities: r.Capabilities, Online: r.Online, Score: r.Score})
		}
		return nil, out, nil
	})
	sdk.AddTool(s, &sdk.Tool{
		Name:        "list_agents",
		Description: "List the agents registered with ioa.",
	}, func(ctx context.Context, _ *sdk.CallToolRequest, a ListArgs) (*sdk.CallToolResult, AgentsOut, error) {
		res, err := c.Agents(ctx, a.OnlineOnly, 1000)
		if err != nil {
			return nil, AgentsOut{}, err
		}
		out := AgentsOut{Agents: []AgentOut{}}
		for _, r := range res.Agents {
			out.Agents = append(out.Agents, AgentOut{Name: r.Name, Description: r.Description, Capabilities: r.Capabilities, Online: r.Online})
		}
		return nil, out, nil
	})
	return s
}
