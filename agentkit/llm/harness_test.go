package llm_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/llm"
	"github.com/ioa-nats/ioa/agentkit/llm/llmtest"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/internal/stacktest"
	"github.com/ioa-nats/ioa/orchestrator"
	"github.com/nats-io/nats.go"
)

// world is a real embedded NATS with the real registry and orchestrator.
type world struct {
	*stacktest.Stack
	b  *bus.Bus
	nc *nats.Conn
}

func testLogger() *slog.Logger {
	if testing.Verbose() && os.Getenv("IOA_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return nil
}

func newWorld(t *testing.T, cfg orchestrator.Config) *world {
	t.Helper()
	if cfg.SpeakerTimeout == 0 {
		cfg.SpeakerTimeout = 10 * time.Second
	}
	if cfg.GoalTimeout == 0 {
		cfg.GoalTimeout = 40 * time.Second
	}
	if cfg.TaskTimeout == 0 {
		cfg.TaskTimeout = 20 * time.Second
	}
	cfg.Logger = testLogger()
	s := stacktest.Start(t, stacktest.Options{Orchestrator: cfg})
	return &world{Stack: s, b: s.Bus, nc: s.Bus.Conn()}
}

// run hosts agents in an agentkit runtime until the test ends, and waits
// until the registry has them online.
func (w *world) run(t *testing.T, agents ...agentkit.Agent) {
	t.Helper()
	opts := []agentkit.Option{agentkit.WithPolicyTimeout(20 * time.Second), agentkit.WithTaskTimeout(20 * time.Second)}
	if l := testLogger(); l != nil {
		opts = append(opts, agentkit.WithLogger(l))
	}
	w.RunAgents(t, opts, agents...)
}

// submit runs a goal to its end and returns its result.
func (w *world) submit(t *testing.T, req protocol.GoalRequest, within time.Duration) protocol.GoalResult {
	t.Helper()
	req.Wait = true
	ctx, cancel := context.WithTimeout(t.Context(), within)
	defer cancel()
	var res protocol.GoalResult
	if err := bus.Request(ctx, w.nc, w.b.Subjects().Goal(bus.GoalSubmit), req, &res); err != nil {
		t.Fatalf("submit: %v", err)
	}
	return res
}

func (w *world) goal(t *testing.T, id string) protocol.GoalStatus {
	t.Helper()
	var st protocol.GoalStatus
	if err := bus.Request(t.Context(), w.nc, w.b.Subjects().Goal(bus.GoalGet), protocol.GoalIDRequest{GoalID: id}, &st); err != nil {
		t.Fatalf("goal.get: %v", err)
	}
	return st
}

// chatLog reads a chat's log through a member's history subject.
func (w *world) chatLog(t *testing.T, member, comm string) []protocol.AgentMessage {
	t.Helper()
	subject, err := w.b.Subjects().History(member, comm)
	if err != nil {
		t.Fatal(err)
	}
	var h protocol.HistoryReply
	if err := bus.Request(t.Context(), w.nc, subject, protocol.HistoryRequest{}, &h); err != nil {
		t.Fatalf("history: %v", err)
	}
	return h.Messages
}

// watchChats calls fn with every logged message of every chat until the
// test ends.
func (w *world) watchChats(t *testing.T, fn func(protocol.AgentMessage)) {
	t.Helper()
	sub, err := w.nc.Subscribe(w.b.Subjects().AllChats(), func(m *nats.Msg) {
		var am protocol.AgentMessage
		if json.Unmarshal(m.Data, &am) == nil {
			fn(am)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
}

// newModel is a model on the fake server with short timeouts.
func newModel(t *testing.T, srv *llmtest.Server, tweak ...func(*llm.Config)) *llm.Model {
	t.Helper()
	cfg := llm.Config{
		BaseURL: srv.URL, APIKey: "sk-test-secret-key-0123456789", Model: "fake-model",
		Temperature: 0.2, Timeout: 2 * time.Second, Retries: 1, MaxTokens: 700, Backoff: 20 * time.Millisecond,
		MaxResponseBytes: 256 << 10, Logger: testLogger(),
	}
	for _, f := range tweak {
		f(&cfg)
	}
	m, err := llm.NewModel(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

func card(name, desc string, caps ...string) protocol.AgentCard {
	return protocol.AgentCard{Name: name, Description: desc, Capabilities: caps, Type: protocol.TypeAssistant}
}

func funcWorker(fn func(agentkit.Task) (string, error)) agentkit.Worker {
	return agentkit.WorkerFunc(func(_ context.Context, t agentkit.Task) (agentkit.Result, error) {
		s, err := fn(t)
		return agentkit.Result{Conclusion: s}, err
	})
}

// checkGoroutines fails the test if, once every later cleanup has run, the
// goroutine count does not come back near where it was. Call it first.
func checkGoroutines(t *testing.T) {
	t.Helper()
	base := runtime.NumGoroutine()
	t.Cleanup(func() {
		const slack = 6
		start := time.Now()
		deadline := start.Add(10 * time.Second)
		for {
			n := runtime.NumGoroutine()
			if n <= base+slack {
				t.Logf("goroutines: %d at start, %d after shutdown (settled in %v)", base, n, time.Since(start).Round(time.Millisecond))
				return
			}
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				buf = buf[:runtime.Stack(buf, true)]
				t.Errorf("goroutines: %d at start, %d after shutdown\n%s", base, n, buf)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}

// script routes the fake server's requests: team-up tool rounds, needs-team
// checks, worker calls and turns, each to a per-agent queue (turn queues
// may be keyed by agent and a phrase of the goal).
type script struct {
	t          *testing.T
	mu         sync.Mutex
	turns      map[string][]llmtest.Response // agent or agent|goal phrase
	teamUp     map[string]func(llmtest.Request) llmtest.Response
	needsTeam  map[string]llmtest.Response
	work       map[string]llmtest.Response
	unexpected []string
}

func newScript(t *testing.T) *script {
	return &script{t: t, turns: map[string][]llmtest.Response{}, teamUp: map[string]func(llmtest.Request) llmtest.Response{},
		needsTeam: map[string]llmtest.Response{}, work: map[string]llmtest.Response{}}
}

func (s *script) turn(key string, rs ...llmtest.Response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.turns[key] = append(s.turns[key], rs...)
}

// discoverThenTeam scripts IoA's team-up: one agent_discovery, then
// team_up with members.
func discoverThenTeam(queries []string, members ...string) func(llmtest.Request) llmtest.Response {
	return func(r llmtest.Request) llmtest.Response {
		if r.ToolResults() == 0 {
			return llmtest.Call(llm.ToolAgentDiscovery, map[string]any{"queries": queries})
		}
		return llmtest.Call(llm.ToolTeamUp, map[string]any{"team_members": members})
	}
}

func (s *script) handle(r llmtest.Request) llmtest.Response {
	s.mu.Lock()
	defer s.mu.Unlock()
	agent := r.Agent()
	sys := ""
	if len(r.Messages) > 0 {
		sys = r.Messages[0].Content
	}
	switch {
	case len(r.Tools) > 0:
		if f := s.teamUp[agent]; f != nil {
			return f(r)
		}
	case strings.Contains(sys, "(individual) or it needs a team"):
		if a, ok := s.needsTeam[agent]; ok {
			return a
		}
		return llmtest.Answer(map[string]string{"decision": "individual"})
	case strings.Contains(sys, "Answer with the task's result only"):
		if a, ok := s.work[agent]; ok {
			return a
		}
	default:
		text := r.Text()
		for key, q := range s.turns {
			a, phrase, _ := strings.Cut(key, "|")
			if a != agent || len(q) == 0 || (phrase != "" && !strings.Contains(text, "Goal: "+phrase)) {
				continue
			}
			s.turns[key] = q[1:]
			return q[0]
		}
	}
	s.unexpected = append(s.unexpected, agent+": "+clipText(r.Last(), 200))
	return llmtest.Garbage()
}

func (s *script) assertDone() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, q := range s.turns {
		if len(q) > 0 {
			s.t.Errorf("script: %d turn answers for %s never asked for", len(q), k)
		}
	}
	for _, u := range s.unexpected {
		s.t.Errorf("script: unexpected request from %s", u)
	}
}

func clipText(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// move is a turn answer as the model writes it.
type move = map[string]any

// newRawServer serves h at /v1/chat/completions and returns the base URL.
func newRawServer(t *testing.T, h http.Handler) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("POST /v1/chat/completions", h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}
