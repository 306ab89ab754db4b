package orchestrator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/agentkit/rules"
	"github.com/ioa-nats/ioa/agentkit/worker"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/internal/stacktest"
	"github.com/ioa-nats/ioa/orchestrator"
	"github.com/ioa-nats/ioa/registry"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// runAgents runs agentkit agents on w until the test ends.
func runAgents(t *testing.T, w *world, agents ...agentkit.Agent) {
	t.Helper()
	w.RunAgents(t, nil, agents...)
}

var mulRE = regexp.MustCompile(`(\d+)\s*[*x×]\s*(\d+)`)

func funcAgent(name, desc string, caps []string, fn func(agentkit.Task) (string, error)) agentkit.Agent {
	return agentkit.Agent{
		Card: protocol.AgentCard{Name: name, Description: desc, Capabilities: caps, Type: protocol.TypeTool},
		Worker: agentkit.WorkerFunc(func(_ context.Context, t agentkit.Task) (agentkit.Result, error) {
			s, err := fn(t)
			return agentkit.Result{Conclusion: s}, err
		}),
		Policy: rules.New(rules.Config{}),
	}
}

// TestGoalEndToEndWithCoordinatorAndAgentkitAgents runs a goal through the
// real registry, orchestrator and built-in coordinator with four agentkit
// agents (func and exec workers) and the rules policy.
func TestGoalEndToEndWithCoordinatorAndAgentkitAgents(t *testing.T) {
	w := newWorld(t, orchestrator.Config{})
	script := filepath.Join(t.TempDir(), "wc.sh")
	// An exec worker: the task arrives as JSON on stdin.
	if err := os.WriteFile(script, []byte("#!/bin/sh\nwords=$(cat | wc -w)\necho \"the task had $words words\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// The multiplier holds its result until the chat pauses on it, so the
	// walk through pause_and_trigger does not depend on timing.
	paused := make(chan struct{})
	var pausedOnce sync.Once
	sub, err := w.nc.Subscribe(w.b.Subjects().AllChats(), func(m *nats.Msg) {
		var am protocol.AgentMessage
		if json.Unmarshal(m.Data, &am) == nil && am.Type == protocol.MsgPause {
			pausedOnce.Do(func() { close(paused) })
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	runAgents(t, w,
		orchestrator.Coordinator("coordinator", rules.New(rules.Config{})),
		funcAgent("multiplier", "Multiplies numbers: computes products of integers.", []string{"multiplication", "arithmetic"},
			func(t agentkit.Task) (string, error) {
				<-paused
				m := mulRE.FindStringSubmatch(t.TaskDesc)
				if m == nil {
					return "", fmt.Errorf("no product in %q", t.TaskDesc)
				}
				a, _ := strconv.Atoi(m[1])
				b, _ := strconv.Atoi(m[2])
				return strconv.Itoa(a * b), nil
			}),
		funcAgent("distance-converter", "Converts distances between kilometres and miles.", []string{"unit conversion", "kilometres to miles"},
			func(agentkit.Task) (string, error) { return "5 km = 3.107 miles", nil }),
		agentkit.Agent{
			Card:   protocol.AgentCard{Name: "word-counter", Description: "Counts the words of a text.", Capabilities: []string{"word count", "text statistics"}, Type: protocol.TypeTool},
			Worker: &worker.Exec{Command: []string{"/bin/sh", script}},
			Policy: rules.New(rules.Config{}),
		},
		funcAgent("report-writer", "Writes a short report summarising earlier results.", []string{"report writing", "summaries"},
			func(t agentkit.Task) (string, error) {
				var parts []string
				for _, e := range t.Earlier {
					parts = append(parts, e.Result)
				}
				return "REPORT: " + strings.Join(parts, "; "), nil
			}),
	)
	goal := "Multiply 12 x 7. Convert 5 kilometres to miles. Count the words of this sentence. Then write a report summarising the results."
	res := w.submitWait(t, protocol.GoalRequest{Goal: goal})
	if res.Status != protocol.GoalConcluded {
		t.Fatalf("result = %+v", res)
	}
	log := w.chatLog(t, "coordinator", res.CommID)
	for _, m := range log {
		t.Logf("%2d %-18s %-12s %-22s %s %v %s", m.Seq, m.Type, m.Sender, m.State, m.TaskID, m.NextSpeaker, strings.ReplaceAll(m.Content+m.TaskConclusion, "\n", " | "))
	}
	// The turn messages, in order: the async assignment with the plan (no
	// person on the team to ask about it), the pause on what still ran, the
	// dependent sync task, the conclusion. Task reports interleave between
	// them.
	var turns []string
	for _, m := range log {
		if protocol.IsTurnMessage(m.Type) {
			turns = append(turns, m.Type+"/"+m.Sender)
		}
	}
	want := []string{"async_task_assign/coordinator", "pause/coordinator", "sync_task_assign/coordinator", "conclusion/coordinator"}
	if strings.Join(turns, " ") != strings.Join(want, " ") {
		t.Fatalf("turns = %v\nwant    %v", turns, want)
	}
	byType := map[string]protocol.AgentMessage{}
	results := map[string]string{}
	for _, m := range log {
		byType[m.Type] = m
		if m.Type == protocol.MsgTaskResult {
			if m.TaskStatus != protocol.TaskCompleted {
				t.Errorf("task %s: %s %s", m.TaskID, m.TaskStatus, m.TaskConclusion)
			}
			results[m.TaskID+"/"+m.Sender] = m.TaskConclusion
		}
	}
	async := byType[protocol.MsgAsyncAssign]
	var assignees []string
	for _, task := range async.Tasks {
		assignees = append(assignees, task.TaskID+"/"+task.Assignee)
	}
	if got := strings.Join(assignees, " "); got != "t1/multiplier t2/distance-converter t3/word-counter" {
		t.Fatalf("async tasks = %s", got)
	}
	if !strings.HasSuffix(async.UpdatedPlan, "t4 [sync] report-writer: write a report summarising the results") || !strings.HasPrefix(async.Content, "Plan:\n"+async.UpdatedPlan+"\n") {
		t.Fatalf("the async assignment does not state the plan: content %q, updated_plan %q", async.Content, async.UpdatedPlan)
	}
	if p := byType[protocol.MsgPause]; !slices.Contains(p.Triggers, "t1") || p.State != protocol.StatePause {
		t.Fatalf("pause = %+v", p)
	}
	if s := byType[protocol.MsgSyncTaskAssign]; len(s.Tasks) != 1 || s.Tasks[0].Assignee != "report-writer" {
		t.Fatalf("sync = %+v", s.Tasks)
	}
	wantResults := map[string]string{
		"t1/multiplier": "84", "t2/distance-converter": "5 km = 3.107 miles",
		"t3/word-counter": "the task had 32 words", "t4/report-writer": "REPORT: 84; 5 km = 3.107 miles; the task had 32 words",
	}
	if fmt.Sprint(results) != fmt.Sprint(wantResults) {
		t.Fatalf("results = %v\nwant %v", results, wantResults)
	}
	wantConclusion := "Multiply 12 x 7: 84\n" +
		"Convert 5 kilometres to miles: 5 km = 3.107 miles\n" +
		"Count the words of this sentence: the task had 32 words\n" +
		"write a report summarising the results: REPORT: 84; 5 km = 3.107 miles; the task had 32 words"
	if res.Conclusion != wantConclusion || res.Turns != 4 {
		t.Fatalf("conclusion (%d turns):\n%s\nwant:\n%s", res.Turns, res.Conclusion, wantConclusion)
	}
	// Each finished task is an outcome of its assignee in ioa_outcomes, for
	// the registry to learn from.
	kv, err := w.b.KV(t.Context(), bus.BucketOutcomes)
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range []struct{ agent, desc string }{
		{"multiplier", "Multiply 12 x 7"}, {"distance-converter", "Convert 5 kilometres to miles"},
		{"word-counter", "Count the words of this sentence"}, {"report-writer", "write a report summarising the results"},
	} {
		// Written off the chat's path, so maybe just after the goal ended.
		var e jetstream.KeyValueEntry
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if e, err = kv.Get(t.Context(), task.agent); err == nil || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			t.Fatalf("outcome of %s: %v", task.agent, err)
		}
		var rec registry.OutcomeRecord
		if err := json.Unmarshal(e.Value(), &rec); err != nil {
			t.Fatal(err)
		}
		if len(rec.Outcomes) != 1 || rec.Outcomes[0].Status != protocol.TaskCompleted || !strings.Contains(rec.Outcomes[0].Task, task.desc) {
			t.Errorf("outcomes of %s: %+v, want its task %q completed", task.agent, rec.Outcomes, task.desc)
		}
	}
}

// delegating is the rules policy, except that it always wants a sub-team
// for its tasks, so nesting goes as deep as the budget allows.
type delegating struct{ *rules.Policy }

func (delegating) NeedsTeam(_ context.Context, q agentkit.TeamCheck) (string, error) {
	return q.Task.TaskDesc, nil
}

func TestNestedTeamsTwoLevelsDeep(t *testing.T) {
	w := newWorld(t, orchestrator.Config{MaxDepth: 2})
	var depths []int
	var mu sync.Mutex
	runAgents(t, w,
		orchestrator.Coordinator("coordinator", rules.New(rules.Config{})),
		agentkit.Agent{
			Card: protocol.AgentCard{Name: "planner", Description: "Plans trips and their budgets.",
				Capabilities: []string{"trip budget"}, NestedTeams: true},
			Worker: agentkit.WorkerFunc(func(_ context.Context, t agentkit.Task) (agentkit.Result, error) {
				mu.Lock()
				depths = append(depths, t.TeamUpDepth)
				mu.Unlock()
				return agentkit.Result{Conclusion: "budget: 1200 EUR"}, nil
			}),
			Policy: delegating{rules.New(rules.Config{})},
		},
	)
	res := w.submitWait(t, protocol.GoalRequest{Goal: "Plan the trip budget.", Team: []string{"planner"}})
	if res.Status != protocol.GoalConcluded {
		t.Fatalf("result = %+v", res)
	}
	// Root (depth 0) -> child (1) -> grandchild (2): only the grandchild's
	// planner, with no nesting budget left, did the work itself.
	if fmt.Sprint(depths) != "[0]" {
		t.Fatalf("worker ran at team_up_depth %v, want once at 0", depths)
	}
	if !strings.Contains(res.Conclusion, "budget: 1200 EUR") {
		t.Fatalf("root conclusion does not carry the grandchild's: %q", res.Conclusion)
	}
	var root protocol.GoalStatus
	if err := requestJSON(t, w, "goal.get", protocol.GoalIDRequest{GoalID: res.GoalID}, &root); err != nil {
		t.Fatal(err)
	}
	if len(root.Children) != 1 {
		t.Fatalf("root children = %v", root.Children)
	}
	var child protocol.GoalStatus
	_ = requestJSON(t, w, "goal.get", protocol.GoalIDRequest{GoalID: root.Children[0]}, &child)
	if child.Depth != 1 || child.Status != protocol.GoalConcluded || len(child.Children) != 1 || child.ParentGoalID != root.GoalID {
		t.Fatalf("child = %+v", child)
	}
	var grand protocol.GoalStatus
	_ = requestJSON(t, w, "goal.get", protocol.GoalIDRequest{GoalID: child.Children[0]}, &grand)
	if grand.Depth != 2 || grand.Status != protocol.GoalConcluded || grand.MaxDepth != 0 {
		t.Fatalf("grandchild = %+v", grand)
	}
}

// TestRestartedAgentRejoinsItsOpenChat stops an agent's runtime while its
// task runs and starts it again: the new runtime asks which open chats it
// is in, replays the history and runs the task again, long before the
// referee's task timeout would have failed it.
func TestRestartedAgentRejoinsItsOpenChat(t *testing.T) {
	w := newWorld(t, orchestrator.Config{TaskTimeout: time.Minute})
	started := make(chan struct{}, 1)
	first := funcAgent("slowpoke", "Does slow work on request.", []string{"slow work"}, nil)
	first.Worker = agentkit.WorkerFunc(func(ctx context.Context, _ agentkit.Task) (agentkit.Result, error) {
		started <- struct{}{}
		<-ctx.Done() // works until the runtime stops
		return agentkit.Result{}, ctx.Err()
	})
	runAgents(t, w, orchestrator.Coordinator("coordinator", rules.New(rules.Config{})))

	stop1 := runStoppable(t, w, first)
	var sub protocol.SubmitReply
	if err := requestJSON(t, w, "goal.submit", protocol.GoalRequest{Goal: "Do the slow work.", Team: []string{"slowpoke"}}, &sub); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(15 * time.Second):
		t.Fatal("the task never started")
	}
	_ = stop1() // the agent goes away mid-task

	runAgents(t, w, funcAgent("slowpoke", "Does slow work on request.", []string{"slow work"},
		func(agentkit.Task) (string, error) { return "slow work done", nil }))
	var st protocol.GoalStatus
	waitFor(t, "goal to end", func() bool {
		_ = requestJSON(t, w, "goal.get", protocol.GoalIDRequest{GoalID: sub.GoalID}, &st)
		return protocol.GoalEnded(st.Status)
	})
	if st.Status != protocol.GoalConcluded || !strings.Contains(st.Result.Conclusion, "slow work done") {
		t.Fatalf("goal = %s: %+v", st.Status, st.Result)
	}
}

// runStoppable hosts agent in an agentkit runtime of its own, as one process
// would, and returns once it is online; stop ends that runtime (the agent
// deregisters) and returns what its Run returned. The end of the test stops
// it too.
func runStoppable(t *testing.T, w *world, agent agentkit.Agent, opts ...agentkit.Option) (stop func() error) {
	t.Helper()
	nc, err := w.b.NewConn(agent.Card.Name)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := agentkit.NewRuntime(nc, w.b.Subjects(), []agentkit.Agent{agent}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rt.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop = func() error {
		once.Do(func() { cancel(); runErr = <-done })
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	w.WaitOnline(t, agent.Card.Name)
	return stop
}

// A rolling restart: the new process registers the name, then the old one
// stops. The old one hears from its heartbeat that another process holds the
// name (and warns: it may as well be a second process started by mistake).
// Its deregister must leave the name to the new one, which goes on serving
// goals with no gap; before, the name was gone from the registry until the
// new process's next heartbeat found it missing.
func TestRollingRestartKeepsTheName(t *testing.T) {
	// A short ttl: agentkit heartbeats every ttl/3.
	s := stacktest.Start(t, stacktest.Options{Registry: registry.Config{HeartbeatTTL: 600 * time.Millisecond}})
	w := &world{Stack: s, b: s.Bus, nc: s.Bus.Conn()}
	runAgents(t, w, orchestrator.Coordinator("coordinator", rules.New(rules.Config{})))
	worker := func(answer string) agentkit.Agent {
		return funcAgent("stepper", "Does the numbered steps of jobs.", []string{"steps"},
			func(agentkit.Task) (string, error) { return answer, nil })
	}
	old := worker("done by the old process")
	old.Card.Incarnation = "old"
	var oldLog stacktest.Buffer
	stopOld := runStoppable(t, w, old, agentkit.WithLogger(slog.New(slog.NewTextHandler(&oldLog, nil))))
	if strings.Contains(oldLog.String(), "another process") {
		t.Fatalf("the old process warned before any other registered: %s", oldLog.String())
	}

	replacement := worker("done by the new process")
	replacement.Card.Incarnation = "new"
	runAgents(t, w, replacement)
	var info protocol.AgentInfo
	waitFor(t, "the new process registered", func() bool {
		return requestJSON(t, w, "registry.get", protocol.NameRequest{Name: "stepper"}, &info) == nil && info.Incarnation == "new"
	})
	waitFor(t, "the old process to warn of the new one", func() bool {
		return strings.Contains(oldLog.String(), `msg="another process registered this agent's name since`) &&
			strings.Contains(oldLog.String(), "incarnation=old registered=new")
	})
	if err := stopOld(); err != nil {
		t.Fatalf("old runtime: %v", err)
	}

	// Straight after the old process left, with no heartbeat in between.
	if err := requestJSON(t, w, "registry.get", protocol.NameRequest{Name: "stepper"}, &info); err != nil || !info.Online || info.Incarnation != "new" {
		t.Fatalf("after the old process stopped: %+v, %v; want the new one registered and online", info, err)
	}
	res := w.Submit(t, protocol.GoalRequest{Goal: "Do step one of job 7.", Team: []string{"stepper"}})
	if res.Outcome != protocol.OutcomeSucceeded || !strings.Contains(res.Conclusion, "done by the new process") {
		t.Fatalf("goal after the rolling restart: %+v", res)
	}
}
