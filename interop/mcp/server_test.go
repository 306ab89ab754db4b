package mcp_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/agentkit/rules"
	"github.com/ioa-nats/ioa/bus/auth"
	"github.com/ioa-nats/ioa/internal/stacktest"
	"github.com/ioa-nats/ioa/interop/mcp"
)

func doubler() agentkit.Agent {
	return agentkit.Agent{
		Card: protocol.AgentCard{Name: "doubler", Description: "Doubles a word: writes it twice.", Capabilities: []string{"double a word", "repeat a word twice"}, Type: protocol.TypeTool},
		Worker: agentkit.WorkerFunc(func(_ context.Context, t agentkit.Task) (agentkit.Result, error) {
			f := strings.Fields(t.TaskDesc)
			w := strings.Trim(f[len(f)-1], ".")
			return agentkit.Result{Conclusion: w + w}, nil
		}),
		Policy: rules.New(rules.Config{}),
	}
}

// connect serves NewServer on one end of an in-memory pipe and returns a
// go-sdk client session on the other.
func connect(t *testing.T, srv *sdk.Server) *sdk.ClientSession {
	t.Helper()
	ct, st := sdk.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, st) }()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test-client", Version: "1"}, nil).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.Close()
		cancel()
		<-done
	})
	return cs
}

func text(r *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func call(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) *sdk.CallToolResult {
	t.Helper()
	r, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return r
}

// An MCP client (the go-sdk's) submits a goal to a secure ioa as a client
// identity and gets its result; the goal is that identity's.
func TestServerSubmitsGoalsForAClient(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{Coordinator: true, Secure: true})
	s.RunAgents(t, nil, doubler())
	nc, _ := s.Dial(t, s.Creds(t, "ide", auth.Client))
	cs := connect(t, mcp.NewServer(nc, s.Bus.Subjects(), mcp.ServerOptions{As: "ide"}))

	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	if got := strings.Join(names, ","); got != "cancel_goal,goal_status,list_agents,search_agents,submit_goal" {
		t.Errorf("tools %s", got)
	}

	r := call(t, cs, "submit_goal", map[string]any{"goal": "Double the word tick."})
	if r.IsError || !strings.Contains(text(r), "ticktick") {
		t.Fatalf("submit_goal: error=%v %s", r.IsError, text(r))
	}
	var res mcp.GoalOut
	raw, _ := json.Marshal(r.StructuredContent)
	if err := json.Unmarshal(raw, &res); err != nil || res.Status != protocol.GoalConcluded || res.Outcome != protocol.OutcomeSucceeded || res.GoalID == "" {
		t.Fatalf("structured result %s: %v", raw, err)
	}
	// A goal nobody could do concludes having done nothing: an error to
	// the client, saying what was not done.
	r = call(t, cs, "submit_goal", map[string]any{"goal": "Write a haiku about the moon."})
	var none mcp.GoalOut
	raw, _ = json.Marshal(r.StructuredContent)
	if err := json.Unmarshal(raw, &none); err != nil || !r.IsError || none.Outcome != protocol.OutcomeFailed ||
		len(none.Undone) != 1 || !strings.Contains(text(r), "concluded (failed)") {
		t.Errorf("a goal nobody could do: error=%v %s; structured %s", r.IsError, text(r), raw)
	}

	r = call(t, cs, "goal_status", map[string]any{"goal_id": res.GoalID})
	var st mcp.StatusOut
	raw, _ = json.Marshal(r.StructuredContent)
	if err := json.Unmarshal(raw, &st); err != nil || st.Submitter != "ide" || st.Status != protocol.GoalConcluded {
		t.Fatalf("goal_status %s: %v", raw, err)
	}

	r = call(t, cs, "search_agents", map[string]any{"query": "repeat a word"})
	if r.IsError || !strings.Contains(string(mustJSON(r.StructuredContent)), `"name":"doubler"`) {
		t.Errorf("search_agents: %s", mustJSON(r.StructuredContent))
	}
	r = call(t, cs, "list_agents", map[string]any{"online_only": true})
	if r.IsError || !strings.Contains(string(mustJSON(r.StructuredContent)), `"name":"coordinator"`) {
		t.Errorf("list_agents: %s", mustJSON(r.StructuredContent))
	}

	// Bad input: clear tool errors, and the session goes on.
	for _, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"submit_goal", map[string]any{"goal": "  "}, "goal is required"},
		{"submit_goal", map[string]any{"goal": "x", "timeout": "soon"}, "not a positive duration"},
		{"submit_goal", map[string]any{"goal": "Double the word a.", "team": []string{"Not A Name"}}, "team member"},
		{"goal_status", map[string]any{"goal_id": "gnothere1234"}, "not"},
		{"cancel_goal", map[string]any{"goal_id": ""}, "goal_id is required"},
	} {
		r := call(t, cs, c.tool, c.args)
		if !r.IsError || !strings.Contains(text(r), c.want) {
			t.Errorf("%s %v: error=%v %q, want an error with %q", c.tool, c.args, r.IsError, text(r), c.want)
		}
	}
	if _, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "no_such_tool"}); err == nil || !strings.Contains(err.Error(), "no_such_tool") {
		t.Errorf("unknown tool: %v", err)
	}
	if r, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "submit_goal", Arguments: map[string]any{"goal": 7}}); err == nil && (!r.IsError || !strings.Contains(text(r), "goal")) {
		t.Errorf("a number for the goal: %q", text(r))
	}
	r = call(t, cs, "submit_goal", map[string]any{"goal": "Double the word tock."})
	if r.IsError || !strings.Contains(text(r), "tocktock") {
		t.Fatalf("after the errors: %s", text(r))
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
