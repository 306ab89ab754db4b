package llm_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/llm"
	"github.com/ioa-nats/ioa/agentkit/llm/llmtest"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/tmc/langchaingo/llms"
)

// fakeSearcher ranks a fixed list of agents and records the queries.
type fakeSearcher struct {
	mu      sync.Mutex
	agents  []protocol.SearchResult
	queries [][]string
}

func (f *fakeSearcher) Search(_ context.Context, req protocol.SearchRequest) ([]protocol.SearchResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queries = append(f.queries, append(req.Queries, req.Query))
	var out []protocol.SearchResult
	for _, a := range f.agents {
		if !slices.Contains(req.Exclude, a.Name) {
			out = append(out, a)
		}
	}
	return out, nil
}

func registryOf(names ...string) *fakeSearcher {
	f := &fakeSearcher{}
	for i, n := range names {
		f.agents = append(f.agents, protocol.SearchResult{Name: n, Description: n + " does things", Score: 1 - float64(i)/10, Match: 0.9})
	}
	return f
}

func leadTurn(t *testing.T) agentkit.Turn {
	c := chatAt(t)
	return agentkit.Turn{Self: protocol.AgentCard{Name: "lead", Description: "leads"}, Chat: c,
		Team: []protocol.AgentCard{{Name: "lead", Description: "leads"}, {Name: "bob", Description: "helps"}}}
}

func TestNextMessageFeedsTheErrorBack(t *testing.T) {
	srv := llmtest.New(t, llmtest.Queue(
		llmtest.Answer(move{"type": "discussion", "content": "hi", "next_speaker": []string{"carol"}}),
		llmtest.Answer(move{"type": "discussion", "content": "hi", "next_speaker": []string{"bob"}}),
	))
	p := llm.New(newModel(t, srv), llm.PolicyConfig{})
	m, err := p.NextMessage(t.Context(), leadTurn(t))
	if err != nil || m.Type != protocol.MsgDiscussion || m.NextSpeaker[0] != "bob" {
		t.Fatalf("%+v %v", m, err)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || !strings.Contains(reqs[1].Last(), "cannot be used") || !strings.Contains(reqs[1].Last(), "carol") {
		t.Fatalf("the retry did not carry the reason: %q", reqs[len(reqs)-1].Last())
	}
	rep, calls := srv.Reported()
	u := p.TakeUsage("lead", "g1")
	if u.LLMCalls != calls || u.PromptTokens != rep.PromptTokens || u.CompletionTokens != rep.CompletionTokens {
		t.Errorf("usage %+v, server reported %+v in %d calls", u, rep, calls)
	}
	if u := p.TakeUsage("lead", "g1"); u != (protocol.Usage{}) {
		t.Errorf("second take = %+v", u)
	}
	if p.Usage("lead").LLMCalls != 2 {
		t.Errorf("total = %+v", p.Usage("lead"))
	}
}

func TestNextMessageBoundedRetriesThenFallback(t *testing.T) {
	srv := llmtest.New(t, llmtest.Always(llmtest.Garbage()))
	p := llm.New(newModel(t, srv), llm.PolicyConfig{Retries: 3})
	m, err := p.NextMessage(t.Context(), leadTurn(t))
	if err != nil || m.Type != protocol.MsgConclusion || !strings.HasPrefix(m.Content, "Concluded from the task board") {
		t.Fatalf("%+v %v", m, err)
	}
	if n := len(srv.Requests()); n != 4 {
		t.Errorf("%d calls, want 1 + 3 retries", n)
	}
	// Retries replace the bad answer rather than pile them up.
	reqs := srv.Requests()
	if len(reqs[3].Messages) != len(reqs[1].Messages) {
		t.Errorf("retry prompts grow: %d then %d messages", len(reqs[1].Messages), len(reqs[3].Messages))
	}
}

func TestNextMessageTurnTimeout(t *testing.T) {
	srv := llmtest.New(t, llmtest.Always(llmtest.Hang()))
	p := llm.New(newModel(t, srv, func(c *llm.Config) { c.Timeout = time.Minute }), llm.PolicyConfig{TurnTimeout: 300 * time.Millisecond})
	// The model hangs for its whole minute: only the turn timeout can
	// produce the fallback before the test's own deadline.
	m, err := p.NextMessage(t.Context(), leadTurn(t))
	if err != nil || m.Type != protocol.MsgConclusion {
		t.Fatalf("%+v %v", m, err)
	}
}

func TestTeamUpWithTools(t *testing.T) {
	reg := registryOf("weather", "writer", "chef")
	var srv *llmtest.Server
	srv = llmtest.New(t, func(r llmtest.Request) llmtest.Response {
		switch len(srv.Requests()) {
		case 1:
			return llmtest.Call(llm.ToolAgentDiscovery, map[string]any{"queries": "weather forecast"}) // a bare string is accepted
		case 2:
			if !strings.Contains(r.Messages[len(r.Messages)-1].Content, `"name":"weather"`) {
				t.Errorf("the tool result did not reach the model: %+v", r.Messages[len(r.Messages)-1])
			}
			return llmtest.Text("I will think about it.")
		default:
			return llmtest.Call(llm.ToolTeamUp, map[string]any{"team_members": []string{"weather", "lead", "nobody", "weather"}})
		}
	})
	p := llm.New(newModel(t, srv), llm.PolicyConfig{})
	d, err := p.TeamUp(t.Context(), agentkit.TeamUpRequest{Self: protocol.AgentCard{Name: "lead", Description: "leads"}, GoalID: "g1", Goal: "Weather in Paris", Registry: reg})
	if err != nil || !slices.Equal(d.Members, []string{"weather"}) {
		t.Fatalf("%+v %v", d, err)
	}
	reqs := srv.Requests()
	if len(reqs) != 3 || !slices.Equal(reqs[0].Tools, []string{llm.ToolAgentDiscovery, llm.ToolTeamUp}) {
		t.Fatalf("%d requests, tools %v", len(reqs), reqs[0].Tools)
	}
	if reqs[0].ForcedTool() != "" || reqs[2].ForcedTool() != llm.ToolTeamUp {
		t.Errorf("tool_choice: round 1 %s, round 3 %s; want only the last round forced to team_up", reqs[0].ToolChoice, reqs[2].ToolChoice)
	}
	if u := p.TakeUsage("lead", "g1"); u.LLMCalls != 3 {
		t.Errorf("usage = %+v", u)
	}
}

// TestDiscoveryMarksLowMatches: agent_discovery shows each agent's score and
// match and marks those below min_match; the registry fallback leaves them
// out.
func TestDiscoveryMarksLowMatches(t *testing.T) {
	reg := registryOf("weather", "chef")
	reg.agents[1].Match = 0.1
	var toolResult string
	srv := llmtest.New(t, func(r llmtest.Request) llmtest.Response {
		if r.ToolResults() == 0 {
			return llmtest.Call(llm.ToolAgentDiscovery, map[string]any{"queries": []string{"weather forecast"}})
		}
		toolResult = r.Messages[len(r.Messages)-1].Content
		return llmtest.Garbage() // then the registry fallback decides
	})
	p := llm.New(newModel(t, srv, func(c *llm.Config) { c.Retries = -1 }), llm.PolicyConfig{TeamUpRounds: 2})
	d, err := p.TeamUp(t.Context(), agentkit.TeamUpRequest{Self: protocol.AgentCard{Name: "lead", Description: "leads"}, GoalID: "g1", Goal: "Weather in Paris", Registry: reg})
	if err != nil || !slices.Equal(d.Members, []string{"weather"}) {
		t.Fatalf("fallback team %+v, %v; want [weather] without the weak chef", d, err)
	}
	want := `{"agents":[{"name":"weather","description":"weather does things","score":1,"match":0.9},` +
		`{"name":"chef","description":"chef does things","score":0.9,"match":0.1,"low_match":true}]}`
	if toolResult != want {
		t.Fatalf("agent_discovery answered\n%s\nwant\n%s", toolResult, want)
	}
}

func TestTeamUpFallsBackToTheRegistry(t *testing.T) {
	for _, resp := range []llmtest.Response{llmtest.Garbage(), llmtest.Status(http.StatusInternalServerError), llmtest.Call(llm.ToolTeamUp, map[string]any{"team_members": []string{"ghost"}})} {
		srv := llmtest.New(t, llmtest.Always(resp))
		p := llm.New(newModel(t, srv, func(c *llm.Config) { c.Retries = -1 }), llm.PolicyConfig{})
		d, err := p.TeamUp(t.Context(), agentkit.TeamUpRequest{Self: protocol.AgentCard{Name: "lead", Description: "x"}, Goal: "g", Registry: registryOf("a", "b", "c", "d")})
		if err != nil || !slices.Equal(d.Members, []string{"a", "b", "c"}) {
			t.Errorf("%+v %v", d, err)
		}
		if n := len(srv.Requests()); n > 3 {
			t.Errorf("%d rounds", n)
		}
	}
}

func TestTeamUpNamedTeamSkipsTheModel(t *testing.T) {
	srv := llmtest.New(t, llmtest.Always(llmtest.Garbage()))
	p := llm.New(newModel(t, srv), llm.PolicyConfig{})
	d, err := p.TeamUp(t.Context(), agentkit.TeamUpRequest{Self: protocol.AgentCard{Name: "lead"}, Team: []string{"lead", "x", "x", "y"}})
	if err != nil || !slices.Equal(d.Members, []string{"x", "y"}) || len(srv.Requests()) != 0 {
		t.Errorf("%+v %v, %d calls", d, err, len(srv.Requests()))
	}
}

func TestNeedsTeam(t *testing.T) {
	check := agentkit.TeamCheck{Self: protocol.AgentCard{Name: "p", Description: "plans", NestedTeams: true},
		Task: agentkit.Task{Task: protocol.Task{TaskID: "t1", TaskDesc: "big job"}, GoalID: "g1", TeamUpDepth: 1}}
	for _, tc := range []struct {
		resp llmtest.Response
		want string
	}{
		{llmtest.Answer(move{"decision": "teamwork", "subgoal": "do the big job"}), "do the big job"},
		{llmtest.Answer(move{"decision": "individual"}), ""},
		{llmtest.Answer(move{"decision": "teamwork"}), ""},
		{llmtest.Answer(move{"decision": 1, "subgoal": []int{1}}), ""},
		{llmtest.Garbage(), ""},
		{llmtest.Status(500), ""},
	} {
		srv := llmtest.New(t, llmtest.Always(tc.resp))
		p := llm.New(newModel(t, srv, func(c *llm.Config) { c.Retries = -1 }), llm.PolicyConfig{})
		got, err := p.NeedsTeam(t.Context(), check)
		if err != nil || got != tc.want {
			t.Errorf("%+v: %q %v, want %q", tc.resp, got, err, tc.want)
		}
	}
	// Not allowed to team up: no call at all.
	srv := llmtest.New(t, llmtest.Always(llmtest.Garbage()))
	p := llm.New(newModel(t, srv), llm.PolicyConfig{})
	check.Task.TeamUpDepth = 0
	if got, _ := p.NeedsTeam(t.Context(), check); got != "" || len(srv.Requests()) != 0 {
		t.Errorf("depth 0: %q, %d calls", got, len(srv.Requests()))
	}
}

func TestMaxTokensOnTheWire(t *testing.T) {
	for _, newer := range []bool{false, true} {
		srv := llmtest.New(t, llmtest.Always(llmtest.Text("ok")))
		m := newModel(t, srv, func(c *llm.Config) { c.MaxTokens = 123; c.MaxCompletionTokensField = newer })
		if _, err := m.GenerateContent(t.Context(), []llms.MessageContent{llms.TextParts(llms.ChatMessageTypeHuman, "hi")}); err != nil {
			t.Fatal(err)
		}
		r := srv.Requests()[0]
		body := string(r.Body)
		if newer {
			if r.MaxCompletionTokens == nil || *r.MaxCompletionTokens != 123 || r.MaxTokens != nil {
				t.Errorf("body %s", body)
			}
		} else if r.MaxTokens == nil || *r.MaxTokens != 123 || r.MaxCompletionTokens != nil {
			t.Errorf("body %s: want max_tokens 123 only", body)
		}
		// A call's own option wins over the config.
		if _, err := m.GenerateContent(t.Context(), []llms.MessageContent{llms.TextParts(llms.ChatMessageTypeHuman, "hi")}, llms.WithMaxTokens(7)); err != nil {
			t.Fatal(err)
		}
		if r := srv.Requests()[1]; !newer && (r.MaxTokens == nil || *r.MaxTokens != 7) {
			t.Errorf("override: %s", r.Body)
		}
	}
}

func TestTransportRetriesThenSucceeds(t *testing.T) {
	srv := llmtest.New(t, llmtest.Queue(llmtest.Status(500), llmtest.Status(429), llmtest.Status(503), llmtest.Text("finally")))
	m := newModel(t, srv, func(c *llm.Config) { c.Retries = 3; c.Timeout = 200 * time.Millisecond })
	resp, err := m.GenerateContent(t.Context(), []llms.MessageContent{llms.TextParts(llms.ChatMessageTypeHuman, "hi")})
	if err != nil || resp.Choices[0].Content != "finally" || len(srv.Requests()) != 4 {
		t.Fatalf("%v, %d requests", err, len(srv.Requests()))
	}
}

func TestTransportGivesUp(t *testing.T) {
	for _, tc := range []struct {
		name string
		resp llmtest.Response
		reqs int
	}{
		{"500", llmtest.Status(500), 2},
		{"400 is not retried", llmtest.Status(400), 1},
		// The request was sent and may be generating (and billed): a
		// timed-out completion is not sent again.
		{"hang is not retried", llmtest.Hang(), 1},
		{"504 is not retried", llmtest.Status(504), 1},
		{"huge", llmtest.Huge(2 << 20), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := llmtest.New(t, llmtest.Always(tc.resp))
			m := newModel(t, srv, func(c *llm.Config) { c.Retries = 1; c.Timeout = 300 * time.Millisecond; c.MaxResponseBytes = 64 << 10 })
			_, err := m.GenerateContent(t.Context(), []llms.MessageContent{llms.TextParts(llms.ChatMessageTypeHuman, "hi")})
			if err == nil || len(srv.Requests()) != tc.reqs {
				t.Errorf("err %v, %d requests, want %d", err, len(srv.Requests()), tc.reqs)
			}
		})
	}
}

// A body with no Content-Length that goes past the cap is cut off too.
func TestTransportCapsStreamedBodies(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"choices":[{"message":{"role":"assistant","content":"`))
		for range 64 {
			_, _ = w.Write(bytes.Repeat([]byte("x"), 4096))
			w.(http.Flusher).Flush()
		}
		_, _ = w.Write([]byte(`"}}]}`))
	})
	srv := newRawServer(t, h)
	m, err := llm.NewModel(llm.Config{BaseURL: srv, APIKey: "k", MaxResponseBytes: 32 << 10, Retries: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	_, err = m.GenerateContent(t.Context(), []llms.MessageContent{llms.TextParts(llms.ChatMessageTypeHuman, "hi")})
	if err == nil {
		t.Fatal("a 256 KiB body passed a 32 KiB cap")
	}
}

func TestAPIKeyIsNeverLogged(t *testing.T) {
	const key = "sk-live-TOPSECRET-abcdef0123456789"
	var logs bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv := llmtest.New(t, llmtest.Queue(llmtest.Status(500), llmtest.Garbage(), llmtest.Hang(), llmtest.Status(401)))
	m := newModel(t, srv, func(c *llm.Config) { c.APIKey = key; c.Logger = logger; c.Timeout = 200 * time.Millisecond })
	p := llm.New(m, llm.PolicyConfig{Logger: logger})
	var errs []string
	for range 3 {
		msg, _ := p.NextMessage(t.Context(), leadTurn(t))
		errs = append(errs, msg.Content)
		_, err := m.GenerateContent(t.Context(), []llms.MessageContent{llms.TextParts(llms.ChatMessageTypeHuman, "hi")})
		if err != nil {
			errs = append(errs, err.Error())
		}
	}
	mu.Lock()
	out := logs.String()
	mu.Unlock()
	if !strings.Contains(out, "llm http") {
		t.Fatalf("no debug lines were logged:\n%s", out)
	}
	if strings.Contains(out, key) || strings.Contains(out, "TOPSECRET") {
		t.Errorf("the key is in the log:\n%s", out)
	}
	for _, e := range errs {
		if strings.Contains(e, "TOPSECRET") {
			t.Errorf("the key is in an error or message: %s", e)
		}
	}
	if got := srv.Requests()[0].Header.Get("Authorization"); got != "Bearer "+key {
		t.Errorf("Authorization = %q: the key was not sent", got)
	}
}

func TestNewModelProviders(t *testing.T) {
	if _, err := llm.NewModel(llm.Config{Provider: "anthropic", APIKey: "k", Model: "claude-x"}); err != nil {
		t.Errorf("anthropic: %v", err)
	}
	if _, err := llm.NewModel(llm.Config{Provider: "cohere"}); !errors.Is(err, llm.ErrConfig) {
		t.Errorf("unknown provider: %v", err)
	}
	// A local OpenAI-compatible server needs no key.
	t.Setenv("OPENAI_API_KEY", "")
	if _, err := llm.NewModel(llm.Config{BaseURL: "http://127.0.0.1:1/v1"}); err != nil {
		t.Errorf("keyless local server: %v", err)
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
