package orchestrator_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/agentkit/rules"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/internal/stacktest"
	"github.com/ioa-nats/ioa/orchestrator"
	"github.com/ioa-nats/ioa/registry"
	"github.com/nats-io/nats.go"
)

func pingPong(other string) func(protocol.Chat) *protocol.AgentMessage {
	return func(c protocol.Chat) *protocol.AgentMessage {
		if c.FinalTurn {
			return &protocol.AgentMessage{Type: protocol.MsgConclusion, Content: "stopped by the turn limit"}
		}
		return &protocol.AgentMessage{Type: protocol.MsgDiscussion, Content: "your turn", NextSpeaker: []string{other}}
	}
}

// startPingPong starts ping (the launcher, who teams up with pong) and pong,
// who hand the turn to each other until the turn limit. talk(other) is what
// one of them says when it holds the turn, other being the one it hands the
// turn to (pingPong: a short line).
func startPingPong(t *testing.T, w *world, talk func(other string) func(protocol.Chat) *protocol.AgentMessage) {
	ping := newWireAgent(t, w.b, card("ping", "talks"))
	ping.team = []string{"pong"}
	ping.speak = talk("pong")
	pong := newWireAgent(t, w.b, card("pong", "talks back"))
	pong.speak = talk("ping")
	ping.start(t.Context())
	pong.start(t.Context())
}

func TestPingPongStopsAtMaxTurns(t *testing.T) {
	w := newWorld(t, orchestrator.Config{})
	startPingPong(t, w, pingPong)
	res := w.submitWait(t, protocol.GoalRequest{Goal: "chat forever", Launcher: "ping", MaxTurns: 7})
	if res.Status != protocol.GoalConcluded || res.Turns != 8 || res.Conclusion != "stopped by the turn limit" {
		t.Fatalf("result = %+v", res)
	}
	log := w.chatLog(t, "ping", res.CommID)
	var limit int
	for _, m := range log {
		if m.Event == protocol.EventTurnLimit {
			limit++
		}
	}
	if limit != 1 {
		t.Fatalf("turn_limit messages = %d, want 1", limit)
	}
}

// A launcher answering 503 for longer than the grace given to one nobody
// answers for is asked again until the launch timeout: its team-up waits
// on partitions whose leases move (CI saw goals fail this way when a NATS
// node was killed).
func TestLaunchRetriesUnavailableBeyondTheGrace(t *testing.T) {
	w := newWorld(t, orchestrator.Config{LaunchTimeout: 20 * time.Second})
	ping := newWireAgent(t, w.b, card("ping", "talks"))
	ping.team = []string{"pong"}
	ping.speak = pingPong("pong")
	ping.launchBusyFor = 4500 * time.Millisecond // > launcherGrace (3s)
	pong := newWireAgent(t, w.b, card("pong", "talks back"))
	pong.speak = pingPong("ping")
	ping.start(t.Context())
	pong.start(t.Context())
	res := w.submitWait(t, protocol.GoalRequest{Goal: "chat a little", Launcher: "ping", MaxTurns: 3})
	if res.Status != protocol.GoalConcluded {
		t.Fatalf("result = %+v, want concluded after the launcher's 503s", res)
	}
}

func TestSilentLauncherAtTurnLimitFailsWithReason(t *testing.T) {
	w := newWorld(t, orchestrator.Config{SpeakerTimeout: 200 * time.Millisecond})
	ping := newWireAgent(t, w.b, card("ping", "talks"))
	ping.team = []string{"pong"}
	ping.speak = func(c protocol.Chat) *protocol.AgentMessage {
		if c.FinalTurn {
			return nil // never concludes
		}
		return &protocol.AgentMessage{Type: protocol.MsgDiscussion, NextSpeaker: []string{"pong"}}
	}
	pong := newWireAgent(t, w.b, card("pong", "talks back"))
	pong.speak = pingPong("ping")
	ping.start(t.Context())
	pong.start(t.Context())
	res := w.submitWait(t, protocol.GoalRequest{Goal: "chat", Launcher: "ping", MaxTurns: 4})
	if res.Status != protocol.GoalFailed || res.Reason != "turn_limit" {
		t.Fatalf("result = %+v", res)
	}
}

// oneTaskThenConclude is a launcher that assigns one sync task to assignee,
// then concludes with the task's status and result.
func oneTaskThenConclude(assignee, desc string) func(protocol.Chat) *protocol.AgentMessage {
	return func(c protocol.Chat) *protocol.AgentMessage {
		if len(c.Tasks) == 0 {
			return &protocol.AgentMessage{Type: protocol.MsgSyncTaskAssign, Tasks: []protocol.Task{{Assignee: assignee, TaskDesc: desc}}}
		}
		return &protocol.AgentMessage{Type: protocol.MsgConclusion, Content: "task " + c.Tasks[0].Status + ": " + c.Tasks[0].Result}
	}
}

// submitUntil submits req without waiting and returns the goal's status
// once its chat exists and member's copy of the chat's log satisfies ok.
func submitUntil(t *testing.T, w *world, req protocol.GoalRequest, what string, ok func([]protocol.AgentMessage) bool, member *wireAgent) protocol.GoalStatus {
	t.Helper()
	var sub protocol.SubmitReply
	if err := requestJSON(t, w, "goal.submit", req, &sub); err != nil {
		t.Fatal(err)
	}
	var st protocol.GoalStatus
	waitFor(t, what, func() bool {
		_ = requestJSON(t, w, "goal.get", protocol.GoalIDRequest{GoalID: sub.GoalID}, &st)
		return st.CommID != "" && ok(member.log(st.CommID))
	})
	return st
}

func TestTaskTimeoutFailsTheTaskAndTheChatGoesOn(t *testing.T) {
	w := newWorld(t, orchestrator.Config{TaskTimeout: 300 * time.Millisecond})
	lead := newWireAgent(t, w.b, card("lead", "leads"))
	lead.team = []string{"sleeper"}
	lead.speak = oneTaskThenConclude("sleeper", "never finishes")
	sleeper := newWireAgent(t, w.b, card("sleeper", "never answers"))
	lead.start(t.Context())
	sleeper.start(t.Context())
	res := w.submitWait(t, protocol.GoalRequest{Goal: "wait", Launcher: "lead"})
	if res.Status != protocol.GoalConcluded || res.Conclusion != "task failed: no result within 300ms" {
		t.Fatalf("result = %+v", res)
	}
	// A stale result after the referee failed the task is refused.
	_, err := sleeper.send(res.CommID, protocol.AgentMessage{Type: protocol.MsgTaskResult, TaskID: "t1", TaskStatus: "completed"})
	if !errors.Is(err, protocol.ErrIllegalTransition) {
		t.Fatalf("stale result: %v", err)
	}
}

// An assignee may report progress on its task at most MaxTaskProgress
// times an attempt (then 429); its result still goes in, and the chat goes on.
func TestTaskProgressIsBoundedPerTask(t *testing.T) {
	w := newWorld(t, orchestrator.Config{MaxTaskProgress: 3})
	lead := newWireAgent(t, w.b, card("lead", "leads"))
	lead.team = []string{"chatty"}
	lead.speak = oneTaskThenConclude("chatty", "report a lot")
	chatty := newWireAgent(t, w.b, card("chatty", "reports progress")) // does no work of its own
	lead.start(t.Context())
	chatty.start(t.Context())
	st := submitUntil(t, w, protocol.GoalRequest{Goal: "progress", Launcher: "lead"}, "the task to be assigned", func(log []protocol.AgentMessage) bool {
		return slices.ContainsFunc(log, func(m protocol.AgentMessage) bool { return m.Type == protocol.MsgSyncTaskAssign })
	}, chatty)
	progress := protocol.AgentMessage{Type: protocol.MsgTaskProgress, TaskID: "t1", Content: "still going"}
	for i := range 3 {
		if _, err := chatty.send(st.CommID, progress); err != nil {
			t.Fatalf("progress report %d: %v", i+1, err)
		}
	}
	if _, err := chatty.send(st.CommID, progress); !errors.Is(err, protocol.ErrQuotaExceeded) || !strings.Contains(err.Error(), "task t1 has reported progress 3 times") {
		t.Fatalf("a fourth progress report: err = %v, want quota_exceeded", err)
	}
	if _, err := chatty.send(st.CommID, protocol.AgentMessage{Type: protocol.MsgTaskResult, TaskID: "t1", TaskStatus: protocol.TaskCompleted, TaskConclusion: "done"}); err != nil {
		t.Fatalf("the result after the limit: %v", err)
	}
	waitFor(t, "the goal to conclude", func() bool {
		_ = requestJSON(t, w, "goal.get", protocol.GoalIDRequest{GoalID: st.GoalID}, &st)
		return st.Status == protocol.GoalConcluded && st.Result != nil && st.Result.Conclusion == "task completed: done"
	})
}

// agentkit stops sending a task's progress once the referee refused one
// for the cap: the worker's later calls get the same error at once, with no
// request on the bus, and its result still concludes the goal.
func TestAgentkitProgressStopsAtTheCap(t *testing.T) {
	const limit = 2
	w := newWorld(t, orchestrator.Config{MaxTaskProgress: limit})
	var sent atomic.Int32 // task_progress requests on the bus
	if _, err := w.nc.Subscribe(w.b.Subjects().AllOutboxes(), func(m *nats.Msg) {
		if strings.Contains(string(m.Data), `"task_progress"`) {
			sent.Add(1)
		}
	}); err != nil {
		t.Fatal(err)
	}
	calls := make(chan []error, 1)
	reporter := funcAgent("reporter", "Does the numbered steps of jobs.", []string{"steps"}, nil)
	reporter.Worker = agentkit.WorkerFunc(func(ctx context.Context, task agentkit.Task) (agentkit.Result, error) {
		var errs []error
		for i := range 3 * limit {
			errs = append(errs, task.Progress(ctx, fmt.Sprintf("step %d", i)))
		}
		calls <- errs
		return agentkit.Result{Conclusion: "reported"}, nil
	})
	runAgents(t, w, orchestrator.Coordinator("coordinator", rules.New(rules.Config{})), reporter)
	res := w.submitWait(t, protocol.GoalRequest{Goal: "Do step one of job 7.", Team: []string{"reporter"}})
	if res.Outcome != protocol.OutcomeSucceeded {
		t.Fatalf("goal: %+v", res)
	}
	errs := <-calls
	if last := errs[len(errs)-1]; !errors.Is(last, protocol.ErrQuotaExceeded) {
		t.Fatalf("the last progress call: %v, want quota_exceeded", last)
	}
	// The cap's worth taken (a "started" report may be among them) and one
	// refused; none after.
	if n := sent.Load(); n > limit+1 {
		t.Fatalf("%d task_progress requests sent for %d calls, want at most %d", n, len(errs), limit+1)
	}
}

func TestGoalTimeout(t *testing.T) {
	w := newWorld(t, orchestrator.Config{})
	lead, _, _, _, _ := startedChat(t, w) // nobody speaks
	_ = lead
	res := w.submitWait(t, protocol.GoalRequest{Goal: "too slow", Launcher: "lead", Timeout: protocol.Duration(300 * time.Millisecond)})
	if res.Status != protocol.GoalTimedOut || res.Reason != "goal_timeout" {
		t.Fatalf("result = %+v", res)
	}
}

// A message that comes after the goal's deadline, before the sweep's tick
// has seen it pass, ends the chat timed_out and is refused: it cannot turn
// a goal that ran out of time into a concluded one.
func TestMessageAfterTheDeadlineEndsTheGoal(t *testing.T) {
	w := newWorld(t, orchestrator.Config{SweepInterval: time.Hour}) // no tick in this test
	lead := newWireAgent(t, w.b, card("lead", "leads"))
	lead.team = []string{"alpha"}
	alpha := newWireAgent(t, w.b, card("alpha", "works"))
	lead.start(t.Context())
	alpha.start(t.Context())
	st := submitUntil(t, w, protocol.GoalRequest{Goal: "late", Launcher: "lead", Timeout: protocol.Duration(300 * time.Millisecond)},
		"chat to start", func(log []protocol.AgentMessage) bool { return len(log) == 1 }, lead)
	time.Sleep(time.Until(st.Deadline) + 20*time.Millisecond)
	_, err := lead.send(st.CommID, protocol.AgentMessage{Type: protocol.MsgConclusion, Content: "done, late"})
	if !errors.Is(err, protocol.ErrIllegalTransition) || !strings.Contains(err.Error(), "ran out of time") {
		t.Fatalf("a conclusion after the deadline: err = %v, want illegal_transition (ran out of time)", err)
	}
	waitFor(t, "the goal to end timed_out", func() bool {
		_ = requestJSON(t, w, "goal.get", protocol.GoalIDRequest{GoalID: st.GoalID}, &st)
		return st.Status == protocol.GoalTimedOut && st.Result != nil && st.Result.Reason == "goal_timeout"
	})
	if log := w.chatLog(t, "lead", st.CommID); len(log) != 2 || log[1].Event != protocol.EventEnd || log[1].Status != protocol.GoalTimedOut {
		t.Fatalf("chat log = %+v, want the start and a timed_out end", log)
	}
}

func TestNestedGoalsDepthAndCancelTree(t *testing.T) {
	w := newWorld(t, orchestrator.Config{MaxDepth: 1})
	lead, _, _, rootID, comm := startedChat(t, w)
	_ = lead
	submit := func(parent string, pcomm string) (string, error) {
		var r protocol.SubmitReply
		err := requestJSON(t, w, "goal.submit", protocol.GoalRequest{Goal: "sub", Launcher: "lead",
			Parent: &protocol.ParentRef{GoalID: parent, CommID: pcomm, TaskID: "t1"}}, &r)
		return r.GoalID, err
	}
	child, err := submit(rootID, comm)
	if err != nil {
		t.Fatal(err)
	}
	// The child has max_depth 0: a grandchild is refused.
	if _, err := submit(child, ""); !errors.Is(err, protocol.ErrDepthExceeded) {
		t.Fatalf("grandchild: %v", err)
	}
	var root protocol.GoalStatus
	waitFor(t, "child linked and running", func() bool {
		var c protocol.GoalStatus
		_ = requestJSON(t, w, "goal.get", protocol.GoalIDRequest{GoalID: child}, &c)
		_ = requestJSON(t, w, "goal.get", protocol.GoalIDRequest{GoalID: rootID}, &root)
		return len(root.Children) == 1 && c.Status == protocol.GoalRunning && c.Depth == 1 && c.ParentGoalID == rootID
	})
	var st protocol.GoalStatus
	if err := requestJSON(t, w, "goal.cancel", protocol.GoalIDRequest{GoalID: rootID}, &st); err != nil {
		t.Fatal(err)
	}
	if st.Status != protocol.GoalCancelled {
		t.Fatalf("root after cancel = %s", st.Status)
	}
	waitFor(t, "child cancelled", func() bool {
		var c protocol.GoalStatus
		_ = requestJSON(t, w, "goal.get", protocol.GoalIDRequest{GoalID: child}, &c)
		return c.Status == protocol.GoalCancelled
	})
	// The root's chat was ended by the referee.
	log := w.chatLog(t, "lead", comm)
	if last := log[len(log)-1]; last.Event != protocol.EventEnd || last.Status != protocol.GoalCancelled {
		t.Fatalf("last message = %+v", last)
	}
	// Someone outside the team learns nothing of the ended parent: 403,
	// not "has already ended (cancelled)".
	err = requestJSON(t, w, "goal.submit.outsider", protocol.GoalRequest{Goal: "sub", Parent: &protocol.ParentRef{GoalID: rootID}}, nil)
	if !errors.Is(err, protocol.ErrForbidden) {
		t.Fatalf("an outsider's sub-goal of an ended goal: %v, want forbidden", err)
	}
}

func TestSubmitForms(t *testing.T) {
	w := newWorld(t, orchestrator.Config{})
	var r protocol.SubmitReply
	if err := requestJSON(t, w, "goal.submit", []byte("  plain text goal  "), &r); err != nil || r.Status != "accepted" {
		t.Fatalf("plain text: %+v %v", r, err)
	}
	var st protocol.GoalStatus
	waitFor(t, "goal without launcher to fail", func() bool {
		_ = requestJSON(t, w, "goal.get", protocol.GoalIDRequest{GoalID: r.GoalID}, &st)
		return protocol.GoalEnded(st.Status)
	})
	if st.Goal != "plain text goal" || st.Status != protocol.GoalFailed || st.Result.Reason == "" {
		t.Fatalf("status = %+v", st)
	}
	// A goal sent as a JSON string is its text, without the quotes.
	if err := requestJSON(t, w, "goal.submit", []byte(` "quoted \"goal\"" `), &r); err != nil {
		t.Fatalf("JSON string: %v", err)
	}
	if err := requestJSON(t, w, "goal.get", protocol.GoalIDRequest{GoalID: r.GoalID}, &st); err != nil || st.Goal != `quoted "goal"` {
		t.Fatalf("JSON string goal = %q, %v", st.Goal, err)
	}
	for body, want := range map[string]*protocol.Error{
		"":                                   protocol.ErrInvalid,
		`{"goal":""}`:                        protocol.ErrInvalid,
		`{"goal":"x","goal":"y"}`:            protocol.ErrInvalid,
		`{"goal":"x","team":["A"]}`:          protocol.ErrInvalid,
		`{"goal":"x","timeout":"soon"}`:      protocol.ErrInvalid,
		`{"goal":"x"`:                        protocol.ErrInvalid,
		"\xff":                               protocol.ErrInvalid,
		`["a goal","another"]`:               protocol.ErrInvalid,
		`""`:                                 protocol.ErrInvalid,
		" 42 ":                               protocol.ErrInvalid,
		"-1.5e3":                             protocol.ErrInvalid,
		"true":                               protocol.ErrInvalid,
		strings.Repeat("Add 1 and 2. ", 700): protocol.ErrTooLarge, // 9 KB: over an eighth of 64 KiB
		`{"goal":"` + strings.Repeat("Add 1 and 2. ", 700) + `"}`: protocol.ErrTooLarge,
	} {
		if err := requestJSON(t, w, "goal.submit", []byte(body), nil); !errors.Is(err, want) {
			t.Errorf("submit %q: %v", body, err)
		}
	}
	// A JSON scalar is named in the refusal.
	for body, kind := range map[string]string{" 42 ": "JSON number", "-1.5e3": "JSON number", "true": "JSON boolean"} {
		if err := requestJSON(t, w, "goal.submit", []byte(body), nil); err == nil || !strings.Contains(err.Error(), "body is a "+kind) {
			t.Errorf("submit %q: %v, want it to say %q", body, err, kind)
		}
	}
	if err := requestJSON(t, w, "goal.list", protocol.GoalListRequest{Status: "weird"}, nil); !errors.Is(err, protocol.ErrInvalid) {
		t.Errorf("list weird: %v", err)
	}
	if err := requestJSON(t, w, "goal.get", protocol.GoalIDRequest{GoalID: "nope"}, nil); !errors.Is(err, protocol.ErrNotFound) {
		t.Errorf("get unknown: %v", err)
	}
	var list protocol.GoalListReply
	if err := requestJSON(t, w, "goal.list", []byte(""), &list); err != nil || len(list.Goals) != 2 {
		t.Fatalf("list: %+v %v", list, err)
	}
}

// TestGoneMembersLoseTheirTasksAndTurns: members that stop heartbeating
// (offline in the registry) are "gone" (docs/protocol.md section 9): the referee fails
// the task of a gone assignee and gives a gone speaker's turn back to the
// launcher, long before the task and speaker timeouts.
func TestGoneMembersLoseTheirTasksAndTurns(t *testing.T) {
	const ttl = 3 * time.Second
	s := stacktest.Start(t, stacktest.Options{
		Orchestrator: orchestrator.Config{TaskTimeout: time.Minute, SpeakerTimeout: time.Minute},
		Registry:     registry.Config{HeartbeatTTL: ttl},
	})
	w := &world{Stack: s, b: s.Bus, nc: s.Bus.Conn()}
	lead := newWireAgent(t, w.b, card("lead", "leads"))
	lead.team = []string{"ghost"}
	lead.speak = func(c protocol.Chat) *protocol.AgentMessage {
		switch {
		case c.Goal == "task" && len(c.Tasks) == 0:
			return &protocol.AgentMessage{Type: protocol.MsgSyncTaskAssign, Tasks: []protocol.Task{{Assignee: "ghost", TaskDesc: "never finishes"}}}
		case c.Goal == "task":
			return &protocol.AgentMessage{Type: protocol.MsgConclusion, Content: "task " + c.Tasks[0].Status + ": " + c.Tasks[0].Result}
		case c.Turn == 0:
			return &protocol.AgentMessage{Type: protocol.MsgDiscussion, Content: "your turn", NextSpeaker: []string{"ghost"}}
		default:
			return &protocol.AgentMessage{Type: protocol.MsgConclusion, Content: "the turn came back"}
		}
	}
	ghost := newWireAgent(t, w.b, card("ghost", "registers, then never heartbeats"))
	lead.start(t.Context())
	ghost.start(t.Context())
	// The lead stays online; the ghost's registration runs out after ttl.
	go func() {
		for {
			select {
			case <-t.Context().Done():
				return
			case <-time.After(ttl / 4):
			}
			_ = bus.Request(t.Context(), lead.nc, w.b.Subjects().Registry(bus.RegistryHeartbeat), protocol.NameRequest{Name: "lead"}, nil)
		}
	}()
	// Both goals at once: each waits goneCheckAfter before the referee asks.
	type outcome struct {
		res protocol.GoalResult
		err error
	}
	results := make(chan outcome, 2)
	for _, goal := range []string{"task", "turn"} {
		go func() {
			var o outcome
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			o.err = bus.Request(ctx, w.nc, w.b.Subjects().Goal(bus.GoalSubmit), protocol.GoalRequest{Goal: goal, Launcher: "lead", Wait: true}, &o.res)
			results <- o
		}()
	}
	for range 2 {
		o := <-results
		if o.err != nil {
			t.Fatal(o.err)
		}
		res := o.res
		want := map[string]string{
			"task": "task failed: ghost left: it is offline (no heartbeat)",
			"turn": "the turn came back",
		}
		var goal string
		for g, c := range want {
			if c == res.Conclusion {
				goal = g
			}
		}
		if res.Status != protocol.GoalConcluded || goal == "" {
			t.Fatalf("result = %+v, want concluded with one of %q", res, want)
		}
		if goal == "turn" {
			log := w.chatLog(t, "lead", res.CommID)
			i := slices.IndexFunc(log, func(m protocol.AgentMessage) bool { return m.Event == protocol.EventSpeakerTimeout })
			if i < 0 || log[i].Content != "ghost is offline (no heartbeat); the turn goes back to lead." {
				t.Fatalf("no speaker_timeout for the gone speaker in %+v", log)
			}
		}
	}
}

// TestHistoryPagesALongChat reads two long chats, logged interleaved in the
// stream, page by page: every after_seq and limit gives exactly the slice of
// the full log (the referee seeks to after_seq rather than reading from the
// start).
func TestHistoryPagesALongChat(t *testing.T) {
	const goals = 2
	w := newWorld(t, orchestrator.Config{MaxTurns: 41})
	startPingPong(t, w, pingPong)
	// An odd turn limit, so that pong reaches it and ping concludes.
	comms := make(chan string, goals)
	for range goals {
		go func() {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			var res protocol.GoalResult
			if err := bus.Request(ctx, w.nc, w.b.Subjects().Goal(bus.GoalSubmit), protocol.GoalRequest{Goal: "chat on", Launcher: "ping", Wait: true, MaxTurns: 41}, &res); err != nil {
				t.Error(err)
			}
			comms <- res.CommID
		}()
	}
	for range goals {
		comm := <-comms
		if t.Failed() {
			return
		}
		full := w.chatLog(t, "ping", comm)
		if len(full) < 40 {
			t.Fatalf("chat %s has %d messages, want at least 40", comm, len(full))
		}
		for i, m := range full {
			if m.Seq != uint64(i+1) {
				t.Fatalf("message %d has seq %d", i, m.Seq)
			}
		}
		n := len(full)
		subject, _ := w.b.Subjects().History("ping", comm)
		for _, after := range []int{0, 1, 15, 16, 17, 30, n - 1, n, n + 5} {
			for _, limit := range []int{0, 1, 5} {
				var h protocol.HistoryReply
				if err := bus.Request(t.Context(), w.nc, subject, protocol.HistoryRequest{AfterSeq: uint64(after), Limit: limit}, &h); err != nil {
					t.Fatal(err)
				}
				want := full[min(after, n):]
				if limit > 0 && len(want) > limit {
					want = want[:limit]
				}
				got := make([]uint64, len(h.Messages))
				for i, m := range h.Messages {
					got[i] = m.Seq
				}
				wantSeqs := make([]uint64, len(want))
				for i, m := range want {
					wantSeqs[i] = m.Seq
				}
				if !slices.Equal(got, wantSeqs) {
					t.Fatalf("history after %d limit %d = %v, want %v", after, limit, got, wantSeqs)
				}
			}
		}
	}
}

// TestHistoryPageFitsThePayload: a chat of messages each just under the
// size limit (over it once stamped) is read in pages that fit the
// connection's max payload. A page of them all (1.3 MB) was never sent, and
// the member asking for it waited for nothing.
func TestHistoryPageFitsThePayload(t *testing.T) {
	w := newWorld(t, orchestrator.Config{MaxTurns: 21})
	big := strings.Repeat("x", 65_380) // with the JSON around it, just under 64 KiB
	talk := func(other string) func(protocol.Chat) *protocol.AgentMessage {
		return func(c protocol.Chat) *protocol.AgentMessage {
			if c.FinalTurn {
				return &protocol.AgentMessage{Type: protocol.MsgConclusion, Content: "done"}
			}
			return &protocol.AgentMessage{Type: protocol.MsgDiscussion, Content: big, NextSpeaker: []string{other}}
		}
	}
	startPingPong(t, w, talk)
	res := w.submitWait(t, protocol.GoalRequest{Goal: "talk at length", Launcher: "ping", MaxTurns: 21}) // odd: pong reaches it, ping concludes
	if res.Status != protocol.GoalConcluded {
		t.Fatalf("result = %+v", res)
	}
	subject, _ := w.b.Subjects().History("pong", res.CommID)
	var seqs []uint64
	for after, pages := uint64(0), 0; ; pages++ {
		var h protocol.HistoryReply
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		err := bus.Request(ctx, w.nc, subject, protocol.HistoryRequest{AfterSeq: after}, &h)
		cancel()
		if err != nil {
			t.Fatalf("history after %d: %v", after, err)
		}
		if pages == 0 && (len(h.Messages) < 2 || uint64(len(h.Messages)) >= h.LastSeq) {
			t.Fatalf("first page holds %d of %d messages; want a page that fits the payload", len(h.Messages), h.LastSeq)
		}
		for _, m := range h.Messages {
			seqs = append(seqs, m.Seq)
		}
		if len(h.Messages) == 0 || h.Messages[len(h.Messages)-1].Seq >= h.LastSeq {
			break
		}
		after = h.Messages[len(h.Messages)-1].Seq
	}
	if len(seqs) < 20 || seqs[len(seqs)-1] != uint64(len(seqs)) {
		t.Fatalf("paged seqs %v, want 1..n with n >= 20", seqs)
	}
}
