package agentkit_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/agentkit/rules"
	"github.com/ioa-nats/ioa/bus"
)

// Lost inbox messages are read from history, and garbage on an inbox is
// dropped without harm.
func TestGapsAndGarbage(t *testing.T) {
	f := newFakeNet(t)
	// weather misses the async assignment (seq 4) and its own progress;
	// writer misses the sync assignment (seq 10).
	f.drop = func(member string, seq uint64) bool {
		return member == "weather" && (seq == 4 || seq == 5) || member == "writer" && seq == 10
	}
	tr := newTrip()
	close(tr.release)
	f.start(append(tr.specialists(), tr.writer()))
	for _, body := range []string{`{not json`, `null`, `{"v":1,"comm_id":"other","seq":1,"type":"discussion"}`, `{"v":1,"comm_id":"c1","seq":0,"type":"discussion"}`} {
		subj, _ := f.subj.Inbox("weather", "c1")
		if err := f.nc.Publish(subj, []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	comm := f.launch("lead", protocol.LaunchRequest{GoalID: "g1", Goal: tripGoal, MaxTurns: 20, Depth: 1})
	log := f.waitLog(comm, "the conclusion", hasType(protocol.MsgConclusion))
	last := log[len(log)-1]
	if !strings.Contains(last.Content, "write a short summary of them: Paris: sunny, 21C, 2.1 million people") {
		for _, m := range log {
			t.Logf("%d %s %s %s %q %v %s %q", m.Seq, m.Sender, m.Type, m.State, m.Content, m.Triggers, m.TaskID, m.TaskConclusion)
		}
		t.Fatalf("conclusion %q", last.Content)
	}
}

// A move the state machine refuses goes back to the policy with the reason;
// after the retries the launcher concludes with what it has.
func TestRefusedMovesEndInFallback(t *testing.T) {
	f := newFakeNet(t)
	p := &stubborn{}
	f.start([]agentkit.Agent{
		{Card: protocol.AgentCard{Name: "lead", Description: "Coordinates"}, Worker: agentkit.WorkerFunc(noWork), Policy: p},
		{Card: protocol.AgentCard{Name: "helper", Description: "Helps"}, Worker: agentkit.WorkerFunc(noWork), Policy: rules.New(rules.Config{})},
	}, agentkit.WithPolicyRetries(2))
	comm := f.launch("lead", protocol.LaunchRequest{GoalID: "g1", Goal: "anything", Team: []string{"helper"}, MaxTurns: 5})
	log := f.waitLog(comm, "the conclusion", hasType(protocol.MsgConclusion))
	if len(log) != 2 || log[1].Sender != "lead" || !strings.HasPrefix(log[1].Content, "Concluded with what is known (the policy gave no valid move: invalid: discussion needs exactly one next_speaker") {
		t.Fatalf("log %+v", log)
	}
	// Nothing was done: the goal is listed as not started, so its outcome
	// is failed, not succeeded.
	if !slices.Equal(log[1].NotStarted, []string{"anything"}) {
		t.Errorf("fallback conclusion's not_started = %q, want the goal", log[1].NotStarted)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.errs) != 3 || p.errs[0] != nil || !errors.Is(p.errs[1], protocol.ErrInvalid) || !errors.Is(p.errs[2], protocol.ErrInvalid) {
		t.Fatalf("policy saw errors %v; want nil, invalid, invalid", p.errs)
	}
}

type stubborn struct {
	mu   sync.Mutex
	errs []error
}

func (s *stubborn) TeamUp(_ context.Context, req agentkit.TeamUpRequest) (agentkit.TeamUpDecision, error) {
	return agentkit.TeamUpDecision{Members: req.Team}, nil
}

func (s *stubborn) NextMessage(_ context.Context, t agentkit.Turn) (protocol.AgentMessage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errs = append(s.errs, t.LastError)
	return protocol.AgentMessage{Type: protocol.MsgDiscussion, NextSpeaker: []string{"nobody"}}, nil
}

func (s *stubborn) NeedsTeam(context.Context, agentkit.TeamCheck) (string, error) { return "", nil }

func noWork(context.Context, agentkit.Task) (agentkit.Result, error) {
	return agentkit.Result{}, errNoMove
}

func TestLaunchErrors(t *testing.T) {
	f := newFakeNet(t)
	f.start([]agentkit.Agent{{Card: protocol.AgentCard{Name: "lead", Description: "Coordinates"}, Worker: agentkit.WorkerFunc(noWork), Policy: rules.New(rules.Config{})}})
	subj, _ := f.subj.AgentLaunchSubject("lead")
	for _, tc := range []struct {
		body string
		want *protocol.Error
	}{
		{`{"goal_id":"g1"`, protocol.ErrInvalid},
		{`{"goal_id":"g1"}`, protocol.ErrInvalid},
		{`{"goal_id":"g.1","goal":"x"}`, protocol.ErrInvalid},
		{`{"goal_id":"g1","goal":"x","team":["Bad Name"]}`, protocol.ErrInvalid},
		// The fake orchestrator refuses a member that is not registered.
		{`{"goal_id":"g1","goal":"x","team":["ghost"],"max_turns":5}`, protocol.ErrNotFound},
	} {
		err := bus.Request(t.Context(), f.nc, subj, []byte(tc.body), nil)
		if !errors.Is(err, tc.want) {
			t.Errorf("launch %s: got %v, want %s", tc.body, err, tc.want.Code)
		}
	}
	inv, _ := f.subj.AgentInviteSubject("lead")
	var out protocol.InviteReply
	if err := bus.Request(t.Context(), f.nc, inv, protocol.InviteRequest{CommID: "c7", GoalID: "g7"}, &out); err != nil || !out.Accept {
		t.Errorf("invite: %+v, %v", out, err)
	}
	if err := bus.Request(t.Context(), f.nc, inv, []byte(`{"comm_id":"a.b"}`), nil); !errors.Is(err, protocol.ErrInvalid) {
		t.Errorf("invite with a bad comm_id: %v", err)
	}
}

// When the registry forgets the agent, the next heartbeat registers it
// again.
func TestHeartbeatReregisters(t *testing.T) {
	f := newFakeNet(t)
	f.start([]agentkit.Agent{{Card: protocol.AgentCard{Name: "lead", Description: "Coordinates"}, Worker: agentkit.WorkerFunc(noWork), Policy: rules.New(rules.Config{})}},
		agentkit.WithHeartbeatInterval(20*time.Millisecond))
	f.mu.Lock()
	delete(f.cards, "lead")
	f.mu.Unlock()
	waitFor(t, "registering again", func() bool { n, on := f.registrations("lead"); return n == 2 && on })
}

// A task that outlives the task timeout fails with a clear reason.
func TestTaskTimeout(t *testing.T) {
	f := newFakeNet(t)
	slow := agentkit.WorkerFunc(func(ctx context.Context, _ agentkit.Task) (agentkit.Result, error) {
		<-ctx.Done()
		return agentkit.Result{}, ctx.Err()
	})
	f.start([]agentkit.Agent{
		{Card: protocol.AgentCard{Name: "lead", Description: "Coordinates"}, Worker: agentkit.WorkerFunc(noWork), Policy: rules.New(rules.Config{})},
		{Card: protocol.AgentCard{Name: "slow", Description: "Slow things"}, Worker: slow, Policy: rules.New(rules.Config{})},
	}, agentkit.WithTaskTimeout(100*time.Millisecond))
	comm := f.launch("lead", protocol.LaunchRequest{GoalID: "g1", Goal: "Do slow things", Team: []string{"slow"}, MaxTurns: 8})
	log := f.waitLog(comm, "the conclusion", hasType(protocol.MsgConclusion))
	if c := log[len(log)-1].Content; !strings.Contains(c, "Do slow things: FAILED: task timed out after 100ms") {
		t.Fatalf("conclusion %q", c)
	}
}

func TestNewRuntimeChecks(t *testing.T) {
	f := newFakeNet(t)
	ok := agentkit.Agent{Card: protocol.AgentCard{Name: "a", Description: "d"}, Worker: agentkit.WorkerFunc(noWork), Policy: rules.New(rules.Config{})}
	bad := []struct {
		name   string
		agents []agentkit.Agent
		opts   []agentkit.Option
	}{
		{"no agents", nil, nil},
		{"bad card", []agentkit.Agent{{Card: protocol.AgentCard{Name: "A"}, Worker: ok.Worker, Policy: ok.Policy}}, nil},
		{"no worker", []agentkit.Agent{{Card: ok.Card, Policy: ok.Policy}}, nil},
		{"neither worker nor policy, not a person", []agentkit.Agent{{Card: ok.Card}}, nil},
		{"a person with a policy", []agentkit.Agent{{Card: protocol.AgentCard{Name: "p", Description: "d", Type: protocol.TypeHuman}, Policy: ok.Policy}}, nil},
		{"twice", []agentkit.Agent{ok, ok}, nil},
		{"bad option", []agentkit.Agent{ok}, []agentkit.Option{agentkit.WithTaskTimeout(0)}},
	}
	for _, tc := range bad {
		if _, err := agentkit.NewRuntime(f.nc, f.subj, tc.agents, tc.opts...); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
	person := agentkit.Agent{Card: protocol.AgentCard{Name: "p", Description: "d", Type: protocol.TypeHuman}}
	if !person.Person() || ok.Person() {
		t.Errorf("Person(): %v for a person, %v for a program", person.Person(), ok.Person())
	}
	rt, err := agentkit.NewRuntime(f.nc, f.subj, []agentkit.Agent{ok, person})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- rt.Run(ctx) }()
	waitFor(t, "registered", func() bool { _, on := f.registrations("a"); return on })
	waitFor(t, "the person registered", func() bool { _, on := f.registrations("p"); return on })
	if err := rt.Run(ctx); !errors.Is(err, agentkit.ErrStarted) {
		t.Errorf("second Run: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}
