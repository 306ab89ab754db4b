package rules_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/agentkit/rules"
)

// ranking is a Searcher with fixed answers per query; the best first.
// Every result matches well (0.9) unless its name is in weak (0.1).
type ranking struct {
	byQuery map[string][]string
	weak    []string
	mu      sync.Mutex // the policy searches concurrently
	calls   int
	err     error
}

func (r *ranking) Search(_ context.Context, req protocol.SearchRequest) ([]protocol.SearchResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.err != nil {
		return nil, r.err
	}
	var out []protocol.SearchResult
	for _, n := range r.byQuery[req.Query] {
		if !slices.Contains(req.Exclude, n) && (req.Limit == 0 || len(out) < req.Limit) {
			m := 0.9
			if slices.Contains(r.weak, n) {
				m = 0.1
			}
			out = append(out, protocol.SearchResult{Name: n, Score: 1 / float64(len(out)+1), Match: m})
		}
	}
	return out, nil
}

const goal = "Get the weather in Rome; find the population of Rome; then summarize them"

func registry() *ranking {
	return &ranking{byQuery: map[string][]string{
		"Get the weather in Rome":        {"lead", "sky", "census"},
		"find the population of Rome":    {"census", "sky"},
		"summarize them":                 {"outsider", "scribe"},
		"Buy flowers":                    {"florist"},
		"Book a flight and a hotel":      {"travel"},
		"get the weather in Oslo":        {"sky", "lead"},
		"write the report about it":      {"lead", "scribe"},
		"rewrite the report":             {"lead"},
		"polish the wording of the text": {"lead"},
	}}
}

const plan = "t1 [async] sky: Get the weather in Rome\nt2 [async] census: find the population of Rome\nt3 [sync] scribe: summarize them"

func chat(mut func(c *protocol.Chat)) protocol.Chat {
	c := protocol.Chat{
		CommID: "c1", GoalID: "g1", Goal: goal, Launcher: "lead",
		Members: []string{"lead", "sky", "census", "scribe"},
		State:   protocol.StateDiscussion, Speaker: "lead", Turn: 2, MaxTurns: 20, LastSeq: 3, Plan: plan,
	}
	if mut != nil {
		mut(&c)
	}
	return c
}

func task(id, who string, async bool, status, result string) protocol.TaskState {
	text := map[string]string{"t1": "Get the weather in Rome", "t2": "find the population of Rome", "t3": "summarize them"}[id]
	return protocol.TaskState{
		Task:  protocol.Task{TaskID: id, Assignee: who, TaskAbstract: text, TaskDesc: text},
		Async: async, Assigner: "lead", Attempt: 1, Status: status, Result: result, Progressed: status != protocol.TaskRunning || async,
	}
}

var (
	t1run  = task("t1", "sky", true, protocol.TaskRunning, "")
	t2run  = task("t2", "census", true, protocol.TaskRunning, "")
	t1done = task("t1", "sky", true, protocol.TaskCompleted, "sunny")
	t2done = task("t2", "census", true, protocol.TaskCompleted, "2.8M")
	t2fail = task("t2", "census", true, protocol.TaskFailed, "census office closed")
	t3done = task("t3", "scribe", false, protocol.TaskCompleted, "Rome: sunny, 2.8M")
)

func TestNextMessage(t *testing.T) {
	lead := protocol.AgentCard{Name: "lead", Description: "leads"}
	tests := []struct {
		name string
		self protocol.AgentCard
		chat protocol.Chat
		team []protocol.AgentCard
		err  error
		want protocol.AgentMessage
	}{
		{
			name: "launcher states the plan with its first step",
			self: lead,
			chat: chat(func(c *protocol.Chat) { c.Plan, c.Turn, c.LastSeq = "", 0, 1 }),
			want: protocol.AgentMessage{Type: protocol.MsgAsyncAssign, Content: "Plan:\n" + plan + "\nStarting the independent tasks: t1, t2.", UpdatedPlan: plan, Tasks: []protocol.Task{
				{TaskID: "t1", Assignee: "sky", TaskAbstract: "Get the weather in Rome", TaskDesc: "Get the weather in Rome"},
				{TaskID: "t2", Assignee: "census", TaskAbstract: "find the population of Rome", TaskDesc: "find the population of Rome"},
			}},
		},
		{
			name: "launcher asks a person about the plan first",
			self: lead,
			chat: chat(func(c *protocol.Chat) { c.Plan, c.Turn, c.LastSeq = "", 0, 1 }),
			team: []protocol.AgentCard{lead, {Name: "sky"}, {Name: "census", Type: protocol.TypeHuman}, {Name: "scribe", Type: protocol.TypeHuman}},
			want: protocol.AgentMessage{Type: protocol.MsgDiscussion, Content: "Plan:\n" + plan, UpdatedPlan: plan, NextSpeaker: []string{"census"}},
		},
		{
			name: "launcher alone assigns to itself",
			self: lead,
			chat: chat(func(c *protocol.Chat) { c.Plan, c.Members, c.Goal = "", []string{"lead"}, "Buy flowers" }),
			want: protocol.AgentMessage{Type: protocol.MsgSyncTaskAssign, Content: "Plan:\nt1 [sync] lead: Buy flowers\nNext: t1.", UpdatedPlan: "t1 [sync] lead: Buy flowers",
				Tasks: []protocol.Task{{TaskID: "t1", Assignee: "lead", TaskAbstract: "Buy flowers", TaskDesc: "Buy flowers"}}},
		},
		{
			name: "nobody can do anything: the plan rides on the conclusion",
			self: lead,
			chat: chat(func(c *protocol.Chat) { c.Plan, c.Turn, c.LastSeq, c.Goal = "", 0, 1, "Fix the sink" }),
			want: protocol.AgentMessage{Type: protocol.MsgConclusion, UpdatedPlan: "t1 [none] -: Fix the sink",
				Content: "Plan:\nt1 [none] -: Fix the sink\nFix the sink: NOT DONE: no registered agent can do this; it needs an agent able to: Fix the sink",
				Undone:  []string{"Fix the sink"}},
		},
		{
			name: "member answers the plan",
			self: protocol.AgentCard{Name: "census"},
			chat: chat(func(c *protocol.Chat) { c.Speaker = "census" }),
			want: protocol.AgentMessage{Type: protocol.MsgDiscussion, Content: "census: ready for: find the population of Rome", NextSpeaker: []string{"lead"}},
		},
		{
			name: "member with nothing to do",
			self: protocol.AgentCard{Name: "idle"},
			chat: chat(func(c *protocol.Chat) { c.Speaker, c.Members = "idle", append(c.Members, "idle") }),
			want: protocol.AgentMessage{Type: protocol.MsgDiscussion, Content: "idle: ready; nothing in the plan is mine", NextSpeaker: []string{"lead"}},
		},
		{
			name: "independent clauses go async together",
			self: lead,
			chat: chat(nil),
			want: protocol.AgentMessage{Type: protocol.MsgAsyncAssign, Content: "Starting the independent tasks: t1, t2.", Tasks: []protocol.Task{
				{TaskID: "t1", Assignee: "sky", TaskAbstract: "Get the weather in Rome", TaskDesc: "Get the weather in Rome"},
				{TaskID: "t2", Assignee: "census", TaskAbstract: "find the population of Rome", TaskDesc: "find the population of Rome"},
			}},
		},
		{
			name: "pause on the running async tasks",
			self: lead,
			chat: chat(func(c *protocol.Chat) { c.Tasks = []protocol.TaskState{t1run, t2run} }),
			want: protocol.AgentMessage{Type: protocol.MsgPause, Content: "Waiting for t1, t2.", Triggers: []string{"t1", "t2"}},
		},
		{
			name: "pause only on what still runs",
			self: lead,
			chat: chat(func(c *protocol.Chat) { c.Tasks = []protocol.TaskState{t1done, t2run} }),
			want: protocol.AgentMessage{Type: protocol.MsgPause, Content: "Waiting for t2.", Triggers: []string{"t2"}},
		},
		{
			name: "dependent clause goes sync with the results",
			self: lead,
			chat: chat(func(c *protocol.Chat) { c.Tasks = []protocol.TaskState{t1done, t2fail} }),
			want: protocol.AgentMessage{Type: protocol.MsgSyncTaskAssign, Content: "Next: t3.", Tasks: []protocol.Task{{
				TaskID: "t3", Assignee: "scribe", TaskAbstract: "summarize them",
				TaskDesc: "summarize them\n\nResults so far:\n- Get the weather in Rome: sunny\n- find the population of Rome: FAILED: census office closed",
			}}},
		},
		{
			name: "conclusion from the results",
			self: lead,
			chat: chat(func(c *protocol.Chat) { c.Tasks = []protocol.TaskState{t1done, t2done, t3done} }),
			want: protocol.AgentMessage{Type: protocol.MsgConclusion, Content: "Get the weather in Rome: sunny\nfind the population of Rome: 2.8M\nsummarize them: Rome: sunny, 2.8M"},
		},
		{
			name: "failed task is noted",
			self: lead,
			chat: chat(func(c *protocol.Chat) { c.Tasks = []protocol.TaskState{t1done, t2fail, t3done} }),
			want: protocol.AgentMessage{Type: protocol.MsgConclusion, Content: "Get the weather in Rome: sunny\nfind the population of Rome: FAILED: census office closed\nsummarize them: Rome: sunny, 2.8M\nNote: 1 of 3 tasks did not complete."},
		},
		{
			name: "final turn concludes at once",
			self: lead,
			chat: chat(func(c *protocol.Chat) { c.FinalTurn, c.Tasks = true, []protocol.TaskState{t1done, t2run} }),
			want: protocol.AgentMessage{Type: protocol.MsgConclusion, Content: "Get the weather in Rome: sunny\nfind the population of Rome: not finished (running)\n" +
				"summarize them: NOT DONE: not started (t3 for scribe) before the chat ended\nNote: 1 of 2 tasks did not complete.",
				NotStarted: []string{"summarize them"}},
		},
		{
			name: "refused move concludes",
			self: lead,
			chat: chat(nil),
			err:  protocol.ErrIllegalTransition,
			want: protocol.AgentMessage{Type: protocol.MsgConclusion, Content: "No tasks were run.\n" +
				"Get the weather in Rome: NOT DONE: not started (t1 for sky) before the chat ended\n" +
				"find the population of Rome: NOT DONE: not started (t2 for census) before the chat ended\n" +
				"summarize them: NOT DONE: not started (t3 for scribe) before the chat ended",
				NotStarted: []string{"Get the weather in Rome", "find the population of Rome", "summarize them"}},
		},
		{
			name: "single clause is one sync task",
			self: lead,
			chat: chat(func(c *protocol.Chat) { c.Goal, c.Plan = "Buy flowers", "t1 [sync] sky: Buy flowers" }),
			want: protocol.AgentMessage{Type: protocol.MsgSyncTaskAssign, Content: "Next: t1.", Tasks: []protocol.Task{{TaskID: "t1", Assignee: "sky", TaskAbstract: "Buy flowers", TaskDesc: "Buy flowers"}}},
		},
	}
	p := rules.New(rules.Config{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			turn := agentkit.Turn{Self: tt.self, Chat: tt.chat, Team: tt.team, LastError: tt.err, Registry: registry()}
			got, err := p.NextMessage(t.Context(), turn)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
			again, _ := p.NextMessage(t.Context(), turn)
			if !reflect.DeepEqual(got, again) {
				t.Errorf("not deterministic: %+v then %+v", got, again)
			}
			// Whatever the policy says must be legal in that state.
			m := got
			m.Sender, m.Seq = tt.self.Name, tt.chat.LastSeq+1
			if _, err := protocol.Apply(tt.chat, m); err != nil {
				t.Errorf("the FSM refuses the move: %v", err)
			}
		})
	}
}

// Without a registry answer the plan falls back to the words of the team's
// cards, and then to the launcher itself.
func TestPlanWithoutRegistry(t *testing.T) {
	c := chat(func(c *protocol.Chat) {
		c.Plan, c.Goal, c.Members = "", "Buy flowers; fix the sink", []string{"lead", "florist"}
	})
	turn := agentkit.Turn{
		Self: protocol.AgentCard{Name: "lead"}, Chat: c,
		Team:     []protocol.AgentCard{{Name: "lead", Description: "leads"}, {Name: "florist", Description: "sells flowers"}},
		Registry: &ranking{err: errors.New("registry down")},
	}
	got, err := rules.New(rules.Config{}).NextMessage(t.Context(), turn)
	if err != nil {
		t.Fatal(err)
	}
	want := "t1 [async] florist: Buy flowers\nt2 [async] lead: fix the sink"
	if got.UpdatedPlan != want {
		t.Errorf("plan %q, want %q", got.UpdatedPlan, want)
	}
}

func TestTeamUp(t *testing.T) {
	self := protocol.AgentCard{Name: "lead", Description: "leads"}
	t.Run("discovery takes the best match per clause", func(t *testing.T) {
		r := registry()
		got, err := rules.New(rules.Config{}).TeamUp(t.Context(), agentkit.TeamUpRequest{Self: self, Goal: goal, Registry: r})
		if err != nil {
			t.Fatal(err)
		}
		// "lead" ranks first for the weather clause but is excluded.
		if want := []string{"sky", "census", "outsider"}; !slices.Equal(got.Members, want) {
			t.Errorf("members %v, want %v", got.Members, want)
		}
	})
	t.Run("a weak best match adds nobody", func(t *testing.T) {
		r := registry()
		r.weak = []string{"outsider", "census"}
		got, err := rules.New(rules.Config{}).TeamUp(t.Context(), agentkit.TeamUpRequest{Self: self, Goal: goal, Registry: r})
		if err != nil {
			t.Fatal(err)
		}
		// weather: sky; population: census is weak, sky next; summarize:
		// outsider is weak, scribe next.
		if want := []string{"sky", "scribe"}; !slices.Equal(got.Members, want) {
			t.Errorf("members %v, want %v", got.Members, want)
		}
	})
	t.Run("nobody matches: the launcher alone, no error", func(t *testing.T) {
		r := registry()
		r.weak = []string{"sky", "census", "outsider", "scribe"}
		got, err := rules.New(rules.Config{}).TeamUp(t.Context(), agentkit.TeamUpRequest{Self: self, Goal: goal, Registry: r})
		if err != nil || len(got.Members) != 0 {
			t.Errorf("got %v, %v; want no members and no error", got.Members, err)
		}
		got, err = rules.New(rules.Config{MinMatch: -1}).TeamUp(t.Context(), agentkit.TeamUpRequest{Self: self, Goal: goal, Registry: r})
		if want := []string{"sky", "census", "outsider"}; err != nil || !slices.Equal(got.Members, want) {
			t.Errorf("without a threshold: got %v, %v; want %v", got.Members, err, want)
		}
	})
	t.Run("team size is capped", func(t *testing.T) {
		got, err := rules.New(rules.Config{MaxTeam: 2}).TeamUp(t.Context(), agentkit.TeamUpRequest{Self: self, Goal: goal, Registry: registry()})
		if err != nil || !slices.Equal(got.Members, []string{"sky"}) {
			t.Errorf("got %v, %v; want [sky]", got.Members, err)
		}
	})
	t.Run("named team skips discovery", func(t *testing.T) {
		r := &ranking{err: errors.New("must not be called")}
		got, err := rules.New(rules.Config{}).TeamUp(t.Context(), agentkit.TeamUpRequest{Self: self, Goal: goal, Team: []string{"b", "lead", "a", "b"}, Registry: r})
		if err != nil || !slices.Equal(got.Members, []string{"b", "a"}) || r.calls != 0 {
			t.Errorf("got %v, %v after %d searches; want [b a] and no search", got.Members, err, r.calls)
		}
	})
	t.Run("registry errors fail the launch", func(t *testing.T) {
		_, err := rules.New(rules.Config{}).TeamUp(t.Context(), agentkit.TeamUpRequest{Self: self, Goal: goal, Registry: &ranking{err: errors.New("down")}})
		if err == nil {
			t.Error("no error")
		}
	})
}

func TestNeedsTeam(t *testing.T) {
	nested := protocol.AgentCard{Name: "lead", Description: "leads", NestedTeams: true}
	tests := []struct {
		name  string
		self  protocol.AgentCard
		desc  string
		depth int
		want  bool
	}{
		{"another agent is best for a clause", nested, "get the weather in Oslo, and then write the report about it", 1, true},
		{"this agent is best for every clause", nested, "rewrite the report; polish the wording of the text", 1, false},
		{"one clause", nested, "get the weather in Oslo", 1, false},
		{"no depth left", nested, "get the weather in Oslo; write the report about it", 0, false},
		{"card does not allow it", protocol.AgentCard{Name: "lead"}, "get the weather in Oslo; write the report about it", 1, false},
		{"earlier results are not part of the task", nested, "rewrite the report\n\nResults so far:\n- get the weather in Oslo: rain", 1, false},
	}
	p := rules.New(rules.Config{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			task := agentkit.Task{Task: protocol.Task{TaskID: "t1", TaskDesc: tt.desc}, TeamUpDepth: tt.depth}
			got, err := p.NeedsTeam(t.Context(), agentkit.TeamCheck{Self: tt.self, Task: task, Registry: registry()})
			if err != nil || (got != "") != tt.want {
				t.Errorf("got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

// TestNoCapableAgent: a clause no registered agent matches well enough is
// given to nobody; the launcher concludes saying so, and lists it in
// undone, beside the tasks that ran.
func TestNoCapableAgent(t *testing.T) {
	lead := protocol.AgentCard{Name: "lead"}
	r := registry()
	r.weak = []string{"outsider", "scribe"} // nobody can summarize
	p := rules.New(rules.Config{})
	c := chat(func(c *protocol.Chat) { c.Plan = "" })
	got, err := p.NextMessage(t.Context(), agentkit.Turn{Self: lead, Chat: c, Registry: r})
	if err != nil {
		t.Fatal(err)
	}
	want := "t1 [async] sky: Get the weather in Rome\nt2 [async] census: find the population of Rome\nt3 [none] -: summarize them"
	if got.UpdatedPlan != want {
		t.Fatalf("plan %q, want %q", got.UpdatedPlan, want)
	}
	items := rules.ParsePlan(got.UpdatedPlan)
	if len(items) != 3 || items[2].Assignee != "" || items[2].Async || rules.FormatPlan(items) != want {
		t.Fatalf("the plan does not read back: %+v", items)
	}
	// Both tasks done: the launcher concludes with the undone part.
	c = chat(func(c *protocol.Chat) {
		c.Plan = want
		c.Tasks = []protocol.TaskState{
			{Task: protocol.Task{TaskID: "t1", Assignee: "sky", TaskAbstract: "Get the weather in Rome"}, Async: true, Status: protocol.TaskCompleted, Result: "sunny"},
			{Task: protocol.Task{TaskID: "t2", Assignee: "census", TaskAbstract: "find the population of Rome"}, Async: true, Status: protocol.TaskCompleted, Result: "2.8 million"},
		}
	})
	got, err = p.NextMessage(t.Context(), agentkit.Turn{Self: lead, Chat: c, Registry: r})
	if err != nil {
		t.Fatal(err)
	}
	if got.Type != protocol.MsgConclusion || !slices.Equal(got.Undone, []string{"summarize them"}) ||
		!strings.Contains(got.Content, "summarize them: NOT DONE: no registered agent can do") || !strings.Contains(got.Content, "Get the weather in Rome: sunny") {
		t.Fatalf("conclusion %+v", got)
	}
	m := got
	m.Sender, m.Seq = "lead", c.LastSeq+1
	ended, err := protocol.Apply(c, m)
	if err != nil {
		t.Fatalf("the FSM refuses the conclusion: %v", err)
	}
	outcome, reason, undone := protocol.GoalOutcome(ended.Outcome, &ended, nil)
	if outcome != protocol.OutcomePartial || !slices.Equal(undone, []string{"summarize them"}) || !strings.Contains(reason, "2 of 3 parts done") {
		t.Fatalf("outcome %s (%s), undone %v", outcome, reason, undone)
	}
}

// The plan gives each clause to the member recruited for it from the
// answers that formed the team, without asking the registry again; a plan
// for a goal whose team was formed elsewhere asks it.
func TestPlanReusesTheSearchesThatFormedTheTeam(t *testing.T) {
	self := protocol.AgentCard{Name: "lead", Description: "leads"}
	p := rules.New(rules.Config{})
	r := registry()
	team, err := p.TeamUp(t.Context(), agentkit.TeamUpRequest{Self: self, GoalID: "g1", Goal: goal, Registry: r})
	if err != nil {
		t.Fatal(err)
	}
	formedBy := r.calls
	c := chat(func(c *protocol.Chat) {
		c.Plan, c.Turn, c.LastSeq = "", 0, 1
		c.Members = append([]string{"lead"}, team.Members...)
	})
	// A registry that now answers differently: the plan must not see it.
	r.byQuery["summarize them"] = []string{"sky"}
	m, err := p.NextMessage(t.Context(), agentkit.Turn{Self: self, Chat: c, Registry: r})
	if err != nil {
		t.Fatal(err)
	}
	want := "t1 [async] sky: Get the weather in Rome\nt2 [async] census: find the population of Rome\nt3 [sync] outsider: summarize them"
	if m.UpdatedPlan != want || r.calls != formedBy {
		t.Fatalf("plan %q after %d more searches; want %q and none", m.UpdatedPlan, r.calls-formedBy, want)
	}
	// Taken once: a second plan (another chat of the same goal id, a retry)
	// asks the registry.
	m, err = p.NextMessage(t.Context(), agentkit.Turn{Self: self, Chat: c, Registry: r})
	if err != nil || r.calls == formedBy {
		t.Fatalf("second plan: %v after %d searches; want the registry asked", err, r.calls-formedBy)
	}
	if !strings.Contains(m.UpdatedPlan, "t3 [sync] sky: summarize them") {
		t.Fatalf("second plan %q: want the registry's new answer", m.UpdatedPlan)
	}
}
