package agentkit_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/agentkit/rules"
	"github.com/ioa-nats/ioa/bus/bustest"
)

const tripGoal = "Get the weather forecast for Paris; look up the population of Paris; then write a short summary of them."

// trip is a team for tripGoal: a launcher and three specialists. The
// weather and facts workers hold their tasks until release is closed, so
// the test decides when the async tasks end.
type trip struct {
	release chan struct{}
	mu      sync.Mutex
	seen    []agentkit.Task // tasks the writer ran
}

func newTrip() *trip { return &trip{release: make(chan struct{})} }

func (tr *trip) held(answer string) agentkit.Worker {
	return agentkit.WorkerFunc(func(ctx context.Context, t agentkit.Task) (agentkit.Result, error) {
		select {
		case <-tr.release:
			return agentkit.Result{Conclusion: answer}, nil
		case <-ctx.Done():
			return agentkit.Result{}, ctx.Err()
		}
	})
}

func (tr *trip) writer() agentkit.Agent {
	return agentkit.Agent{
		Card: protocol.AgentCard{Name: "writer", Description: "Writes summaries and reports", Capabilities: []string{"summary", "writing"}},
		Worker: agentkit.WorkerFunc(func(_ context.Context, t agentkit.Task) (agentkit.Result, error) {
			tr.mu.Lock()
			tr.seen = append(tr.seen, t)
			tr.mu.Unlock()
			var parts []string
			for _, e := range t.Earlier {
				parts = append(parts, e.Result)
			}
			return agentkit.Result{Conclusion: "Paris: " + strings.Join(parts, ", ")}, nil
		}),
		Policy: rules.New(rules.Config{}),
	}
}

func (tr *trip) specialists() []agentkit.Agent {
	return []agentkit.Agent{
		{
			Card:   protocol.AgentCard{Name: "lead", Description: "Coordinates teams"},
			Worker: agentkit.WorkerFunc(func(context.Context, agentkit.Task) (agentkit.Result, error) { return agentkit.Result{}, errNoMove }),
			Policy: rules.New(rules.Config{}),
		},
		{
			Card:   protocol.AgentCard{Name: "weather", Description: "Weather forecasts for any city", Capabilities: []string{"weather", "forecast"}},
			Worker: tr.held("sunny, 21C"),
			Policy: rules.New(rules.Config{}),
		},
		{
			Card:   protocol.AgentCard{Name: "facts", Description: "Facts and statistics about cities: population, area", Capabilities: []string{"population", "statistics"}},
			Worker: tr.held("2.1 million people"),
			Policy: rules.New(rules.Config{}),
		},
	}
}

// step is what the test expects of one logged message; a group of steps
// may be logged in any order (concurrent task reports).
type step struct {
	typ, sender string
	check       func(t *testing.T, m protocol.AgentMessage)
}

func content(want string) func(*testing.T, protocol.AgentMessage) {
	return func(t *testing.T, m protocol.AgentMessage) {
		t.Helper()
		if m.Content != want {
			t.Errorf("seq %d content:\n got %q\nwant %q", m.Seq, m.Content, want)
		}
	}
}

// assertLog checks the log against groups of steps. Within a group the
// order is free, but the states must still follow in log order, so a group
// lists its states separately, in order.
func assertLog(t *testing.T, log []protocol.AgentMessage, groups [][]step, states []protocol.State) {
	t.Helper()
	var flat []string
	for _, m := range log {
		flat = append(flat, fmt.Sprintf("%d %s %s -> %s", m.Seq, m.Sender, m.Type, m.State))
	}
	dump := strings.Join(flat, "\n")
	i := 0
	for _, g := range groups {
		if i+len(g) > len(log) {
			t.Fatalf("log too short:\n%s", dump)
		}
		got := log[i : i+len(g)]
		for _, s := range g {
			j := slices.IndexFunc(got, func(m protocol.AgentMessage) bool { return m.Type == s.typ && m.Sender == s.sender })
			if j < 0 {
				t.Fatalf("no %s from %s at seq %d..%d:\n%s", s.typ, s.sender, i+1, i+len(g), dump)
			}
			if s.check != nil {
				s.check(t, got[j])
			}
			got = slices.Delete(slices.Clone(got), j, j+1)
		}
		i += len(g)
	}
	if i != len(log) {
		t.Fatalf("log has %d messages, want %d:\n%s", len(log), i, dump)
	}
	for k, m := range log {
		if m.Seq != uint64(k+1) || m.State != states[k] {
			t.Errorf("message %d: seq %d state %s, want seq %d state %s", k, m.Seq, m.State, k+1, states[k])
		}
	}
}

func tripSteps(writerResult string) ([][]step, []protocol.State) {
	const plan = "t1 [async] weather: Get the weather forecast for Paris\n" +
		"t2 [async] facts: look up the population of Paris\n" +
		"t3 [sync] writer: write a short summary of them"
	result := func(task, want string) func(*testing.T, protocol.AgentMessage) {
		return func(t *testing.T, m protocol.AgentMessage) {
			t.Helper()
			if m.TaskID != task || m.TaskStatus != protocol.TaskCompleted || m.TaskConclusion != want {
				t.Errorf("seq %d: task %s %s %q, want %s completed %q", m.Seq, m.TaskID, m.TaskStatus, m.TaskConclusion, task, want)
			}
		}
	}
	groups := [][]step{
		{{typ: protocol.MsgSystem, sender: protocol.SystemSender, check: func(t *testing.T, m protocol.AgentMessage) {
			var names []string
			for _, c := range m.Team {
				names = append(names, c.Name)
			}
			if want := []string{"lead", "weather", "facts", "writer"}; !slices.Equal(names, want) {
				t.Errorf("team %v, want %v (launcher, then the best match per clause)", names, want)
			}
		}}},
		{{typ: protocol.MsgAsyncAssign, sender: "lead", check: func(t *testing.T, m protocol.AgentMessage) {
			// No person on the team: the plan comes with the first step.
			content("Plan:\n"+plan+"\nStarting the independent tasks: t1, t2.")(t, m)
			if m.UpdatedPlan != plan {
				t.Errorf("first step: updated_plan %q, want the plan", m.UpdatedPlan)
			}
			want := []protocol.Task{
				{TaskID: "t1", Assignee: "weather", TaskAbstract: "Get the weather forecast for Paris", TaskDesc: "Get the weather forecast for Paris"},
				{TaskID: "t2", Assignee: "facts", TaskAbstract: "look up the population of Paris", TaskDesc: "look up the population of Paris"},
			}
			if !slices.Equal(m.Tasks, want) {
				t.Errorf("async tasks %+v, want %+v", m.Tasks, want)
			}
		}}},
		{{typ: protocol.MsgTaskProgress, sender: "weather"}, {typ: protocol.MsgTaskProgress, sender: "facts"}},
		{{typ: protocol.MsgPause, sender: "lead", check: func(t *testing.T, m protocol.AgentMessage) {
			if !slices.Equal(m.Triggers, []string{"t1", "t2"}) {
				t.Errorf("triggers %v", m.Triggers)
			}
		}}},
		{{typ: protocol.MsgTaskResult, sender: "weather", check: result("t1", "sunny, 21C")},
			{typ: protocol.MsgTaskResult, sender: "facts", check: result("t2", "2.1 million people")}},
		{{typ: protocol.MsgSyncTaskAssign, sender: "lead", check: func(t *testing.T, m protocol.AgentMessage) {
			want := "write a short summary of them\n\nResults so far:\n" +
				"- Get the weather forecast for Paris: sunny, 21C\n- look up the population of Paris: 2.1 million people"
			if len(m.Tasks) != 1 || m.Tasks[0].TaskID != "t3" || m.Tasks[0].Assignee != "writer" || m.Tasks[0].TaskDesc != want {
				t.Errorf("sync task %+v, want t3 for writer with desc %q", m.Tasks, want)
			}
		}}},
		{{typ: protocol.MsgTaskResult, sender: "writer", check: result("t3", writerResult)}},
		{{typ: protocol.MsgConclusion, sender: "lead", check: content(
			"Get the weather forecast for Paris: sunny, 21C\n" +
				"look up the population of Paris: 2.1 million people\n" +
				"write a short summary of them: " + writerResult)}},
	}
	D, A, P, S, C := protocol.StateDiscussion, protocol.StateAsyncTasks, protocol.StatePause, protocol.StateSyncTasks, protocol.StateConclusion
	states := []protocol.State{D, A, A, D, P, P, D, S, D, C}
	return groups, states
}

func TestLaunchToConclusion(t *testing.T) {
	f := newFakeNet(t)
	tr := newTrip()
	f.start(append(tr.specialists(), tr.writer()))
	comm := f.launch("lead", protocol.LaunchRequest{GoalID: "g1", Goal: tripGoal, MaxTurns: 20, Depth: 1})
	f.waitLog(comm, "the pause", hasType(protocol.MsgPause))
	close(tr.release)
	log := f.waitLog(comm, "the conclusion", hasType(protocol.MsgConclusion))
	groups, states := tripSteps("Paris: sunny, 21C, 2.1 million people")
	assertLog(t, log, groups, states)

	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(tr.seen) != 1 {
		t.Fatalf("writer ran %d tasks, want 1", len(tr.seen))
	}
	w := tr.seen[0]
	if w.CommID != comm || w.GoalID != "g1" || w.Goal != tripGoal || w.TeamUpDepth != 1 || w.Async || len(w.Earlier) != 2 {
		t.Errorf("writer's task lacks its context: %+v", w)
	}
}

// An agent stopped in the middle of a chat and started again knows nothing;
// the next message it sees is far past seq 1, so it rebuilds its replica
// from history and does its part.
func TestRestartRebuildsFromHistory(t *testing.T) {
	f := newFakeNet(t)
	tr := newTrip()
	f.start(tr.specialists())
	stopWriter := f.start([]agentkit.Agent{tr.writer()})
	comm := f.launch("lead", protocol.LaunchRequest{GoalID: "g1", Goal: tripGoal, MaxTurns: 20, Depth: 1})
	f.waitLog(comm, "the pause", hasType(protocol.MsgPause))

	stopWriter()
	if calls, online := f.registrations("writer"); calls != 1 || online {
		t.Fatalf("after stop: %d registrations, online %v; want 1 and deregistered", calls, online)
	}
	f.start([]agentkit.Agent{tr.writer()})
	close(tr.release)
	log := f.waitLog(comm, "the conclusion", hasType(protocol.MsgConclusion))
	groups, states := tripSteps("Paris: sunny, 21C, 2.1 million people")
	assertLog(t, log, groups, states)
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(tr.seen) != 1 || len(tr.seen[0].Earlier) != 2 {
		t.Fatalf("the restarted writer ran %+v; want t3 with both earlier results from the replayed log", tr.seen)
	}
}

// A worker that panics fails its task; a policy that panics makes the safe
// move instead (a member hands the turn back to the launcher).
func TestPanicsBecomeFailuresAndFallbacks(t *testing.T) {
	f := newFakeNet(t)
	f.start([]agentkit.Agent{
		{
			Card:   protocol.AgentCard{Name: "lead", Description: "Coordinates teams"},
			Worker: agentkit.WorkerFunc(func(context.Context, agentkit.Task) (agentkit.Result, error) { return agentkit.Result{}, errNoMove }),
			Policy: asksFirst{rules.New(rules.Config{}), "crashy"},
		},
		{
			Card:   protocol.AgentCard{Name: "crashy", Description: "Does risky things"},
			Worker: agentkit.WorkerFunc(func(context.Context, agentkit.Task) (agentkit.Result, error) { panic("boom") }),
			Policy: panicky{},
		},
	})
	comm := f.launch("lead", protocol.LaunchRequest{GoalID: "g2", Goal: "Do the risky thing", Team: []string{"crashy"}, MaxTurns: 10})
	log := f.waitLog(comm, "the conclusion", hasType(protocol.MsgConclusion))
	groups := [][]step{
		{{typ: protocol.MsgSystem, sender: protocol.SystemSender}},
		{{typ: protocol.MsgDiscussion, sender: "lead", check: content("Over to crashy.")}},
		{{typ: protocol.MsgDiscussion, sender: "crashy", check: func(t *testing.T, m protocol.AgentMessage) {
			if !slices.Equal(m.NextSpeaker, []string{"lead"}) || !strings.Contains(m.Content, "panic: policy boom") {
				t.Errorf("fallback move %q next %v", m.Content, m.NextSpeaker)
			}
		}}},
		{{typ: protocol.MsgSyncTaskAssign, sender: "lead"}},
		{{typ: protocol.MsgTaskResult, sender: "crashy", check: func(t *testing.T, m protocol.AgentMessage) {
			if m.TaskStatus != protocol.TaskFailed || m.TaskConclusion != "panic: boom" {
				t.Errorf("task_result %s %q, want failed %q", m.TaskStatus, m.TaskConclusion, "panic: boom")
			}
		}}},
		{{typ: protocol.MsgConclusion, sender: "lead", check: content("Do the risky thing: FAILED: panic: boom\nNote: 1 of 1 tasks did not complete.")}},
	}
	D, S, C := protocol.StateDiscussion, protocol.StateSyncTasks, protocol.StateConclusion
	assertLog(t, log, groups, []protocol.State{D, D, D, S, D, C})
}

// asksFirst is the rules policy, but for the launcher's first turn, which
// it hands to member: the only way a rules team gives a program the turn.
type asksFirst struct {
	*rules.Policy
	member string
}

func (p asksFirst) NextMessage(ctx context.Context, t agentkit.Turn) (protocol.AgentMessage, error) {
	if t.Chat.Turn == 0 && t.Self.Name == t.Chat.Launcher {
		return protocol.AgentMessage{Type: protocol.MsgDiscussion, Content: "Over to " + p.member + ".", NextSpeaker: []string{p.member}}, nil
	}
	return p.Policy.NextMessage(ctx, t)
}

type panicky struct{}

func (panicky) TeamUp(context.Context, agentkit.TeamUpRequest) (agentkit.TeamUpDecision, error) {
	panic("policy boom")
}
func (panicky) NextMessage(context.Context, agentkit.Turn) (protocol.AgentMessage, error) {
	panic("policy boom")
}
func (panicky) NeedsTeam(context.Context, agentkit.TeamCheck) (string, error) { panic("policy boom") }

// An async task done before progress_after is acknowledged by its result
// alone: the chat holds one message for it, not a task_progress and a
// task_result, and the assigner moves on without pausing. A task still
// running then reports progress first (TestLaunchToConclusion).
func TestQuickAsyncTaskIsAcknowledgedByItsResult(t *testing.T) {
	f := newFakeNet(t)
	tr := newTrip()
	close(tr.release) // the specialists answer at once
	// A minute leaves no doubt the tasks end first, on any machine.
	f.start(append(tr.specialists(), tr.writer()), agentkit.WithProgressAfter(time.Minute))
	comm := f.launch("lead", protocol.LaunchRequest{GoalID: "g1", Goal: tripGoal, MaxTurns: 20, Depth: 1})
	log := f.waitLog(comm, "the conclusion", hasType(protocol.MsgConclusion))
	counts := map[string]int{}
	for _, m := range log {
		counts[m.Type]++
	}
	if counts[protocol.MsgTaskProgress] != 0 || counts[protocol.MsgPause] != 0 || counts[protocol.MsgTaskResult] != 3 {
		t.Fatalf("message counts %v: want 3 task results, no task_progress and no pause", counts)
	}
}

func TestProgressAfterMustNotBeNegative(t *testing.T) {
	b := bustest.New(t)
	nc, err := b.NewConn("x")
	if err != nil {
		t.Fatal(err)
	}
	_, err = agentkit.NewRuntime(nc, b.Subjects(), newTrip().specialists(), agentkit.WithProgressAfter(-time.Second))
	if err == nil || !strings.Contains(err.Error(), "progress delay") {
		t.Fatalf("err = %v, want the negative progress delay refused", err)
	}
}
