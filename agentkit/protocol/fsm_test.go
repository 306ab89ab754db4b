package protocol_test

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ioa-nats/ioa/agentkit/protocol"
)

// The team of every test chat: alice launches, bob and carol are members,
// mallory is not.
const (
	alice   = "alice"
	bob     = "bob"
	carol   = "carol"
	mallory = "mallory"
	sys     = protocol.SystemSender
)

const (
	completed = protocol.TaskCompleted
	failed    = protocol.TaskFailed
	running   = protocol.TaskRunning
	cancelled = protocol.TaskCancelled
)

// Message builders. Seq is stamped by apply.

func startMsg(maxTurns int) protocol.AgentMessage {
	return protocol.AgentMessage{
		Type: protocol.MsgSystem, Sender: sys, Event: protocol.EventStart,
		CommID: "c1", GoalID: "g1", Goal: "write a haiku", Launcher: alice,
		Team: []protocol.AgentCard{
			{Name: alice, Description: "leads"},
			{Name: bob, Description: "writes"},
			{Name: carol, Description: "reviews"},
		},
		MaxTurns: maxTurns, TeamUpDepth: 2,
	}
}

func disc(from string, next ...string) protocol.AgentMessage {
	return protocol.AgentMessage{Type: protocol.MsgDiscussion, Sender: from, Content: "hello", NextSpeaker: next}
}

func task(id, assignee string) protocol.Task {
	return protocol.Task{TaskID: id, Assignee: assignee, TaskDesc: "do " + id}
}

func syncAssign(from string, tasks ...protocol.Task) protocol.AgentMessage {
	return protocol.AgentMessage{Type: protocol.MsgSyncTaskAssign, Sender: from, Tasks: tasks}
}

func asyncAssign(from string, tasks ...protocol.Task) protocol.AgentMessage {
	return protocol.AgentMessage{Type: protocol.MsgAsyncAssign, Sender: from, Tasks: tasks}
}

func pause(from string, triggers ...string) protocol.AgentMessage {
	return protocol.AgentMessage{Type: protocol.MsgPause, Sender: from, Triggers: triggers}
}

func conclude(from, text string) protocol.AgentMessage {
	return protocol.AgentMessage{Type: protocol.MsgConclusion, Sender: from, Content: text}
}

// concludeSeen is a conclusion decided on the log up to seq seen.
func concludeSeen(from, text string, seen uint64) protocol.AgentMessage {
	m := conclude(from, text)
	m.SeenSeq = seen
	return m
}

func progress(from, id string) protocol.AgentMessage {
	return protocol.AgentMessage{Type: protocol.MsgTaskProgress, Sender: from, TaskID: id, Content: "working"}
}

func result(from, id, status string) protocol.AgentMessage {
	return protocol.AgentMessage{Type: protocol.MsgTaskResult, Sender: from, TaskID: id, TaskStatus: status, TaskConclusion: "result of " + id}
}

func sysEvent(event string) protocol.AgentMessage {
	return protocol.AgentMessage{Type: protocol.MsgSystem, Sender: sys, Event: event}
}

func end(status, reason string) protocol.AgentMessage {
	m := sysEvent(protocol.EventEnd)
	m.Status, m.Reason, m.Content = status, reason, "ended by the referee"
	return m
}

func from(sender string, m protocol.AgentMessage) protocol.AgentMessage {
	m.Sender = sender
	return m
}

// cloneChat deep-copies a chat (TaskState holds only values).
func cloneChat(c protocol.Chat) protocol.Chat {
	c.Members = slices.Clone(c.Members)
	c.Waiting = slices.Clone(c.Waiting)
	c.Tasks = slices.Clone(c.Tasks)
	return c
}

// apply stamps m.Seq = c.LastSeq+1, applies m and checks what must hold
// for every call: the input chat is not mutated, a refused message returns
// the input unchanged with a protocol error, an accepted one advances
// LastSeq by one.
func apply(t testing.TB, c protocol.Chat, m protocol.AgentMessage) (protocol.Chat, error) {
	t.Helper()
	m.Seq = c.LastSeq + 1
	before := cloneChat(c)
	got, err := protocol.Apply(c, m)
	if !reflect.DeepEqual(c, before) {
		t.Fatalf("Apply(%s from %s) mutated its input:\nbefore %+v\nafter  %+v", m.Type, m.Sender, before, c)
	}
	if err != nil {
		if !reflect.DeepEqual(got, c) {
			t.Fatalf("Apply(%s from %s) failed (%v) but changed the chat:\nin  %+v\nout %+v", m.Type, m.Sender, err, c, got)
		}
		var pe *protocol.Error
		if !errors.As(err, &pe) || pe.Code == protocol.ErrInternal.Code {
			t.Fatalf("Apply(%s from %s): error %v is not a protocol error with a code", m.Type, m.Sender, err)
		}
		return got, err
	}
	if got.LastSeq != c.LastSeq+1 {
		t.Fatalf("Apply(%s from %s): LastSeq = %d, want %d", m.Type, m.Sender, got.LastSeq, c.LastSeq+1)
	}
	return got, nil
}

// mustApply applies every message in order and fails the test on any error.
func mustApply(t testing.TB, c protocol.Chat, msgs ...protocol.AgentMessage) protocol.Chat {
	t.Helper()
	for i, m := range msgs {
		var err error
		if c, err = apply(t, c, m); err != nil {
			t.Fatalf("setup message %d (%s from %s): %v", i, m.Type, m.Sender, err)
		}
	}
	return c
}

func started(t testing.TB, maxTurns int) protocol.Chat {
	t.Helper()
	return mustApply(t, protocol.Chat{}, startMsg(maxTurns))
}

// Common prefixes of chat logs, after the start message.
var (
	// state sync_task_assignment, turn 1: t1 to bob, t2 to carol.
	inSync = []protocol.AgentMessage{syncAssign(alice, task("t1", bob), task("t2", carol))}
	// state async_task_assignment, turn 1: t1 to bob, t2 to carol.
	inAsync = []protocol.AgentMessage{asyncAssign(alice, task("t1", bob), task("t2", carol))}
	// discussion, alice speaks, turn 1, async t1 (bob) and t2 (carol) running.
	asyncRunning = slices.Concat(inAsync, []protocol.AgentMessage{progress(bob, "t1"), progress(carol, "t2")})
	// pause_and_trigger on t1 and t2, turn 2, alice paused.
	inPause = slices.Concat(asyncRunning, []protocol.AgentMessage{pause(alice, "t1", "t2")})
)

func chatLog(parts ...[]protocol.AgentMessage) []protocol.AgentMessage {
	return slices.Concat(parts...)
}

func msgs(m ...protocol.AgentMessage) []protocol.AgentMessage { return m }

// want is what an accepted message must leave behind. waiting is compared
// with slices.Equal (nil equals empty); tasks lists the statuses to check.
type want struct {
	state   protocol.State
	speaker string
	turn    int
	waiting []string
	tasks   map[string]string
}

type fsmCase struct {
	name     string
	maxTurns int // 0 means 10
	setup    []protocol.AgentMessage
	msg      protocol.AgentMessage
	err      error // nil: the message must be accepted
	want     want
	check    func(t *testing.T, c protocol.Chat)
}

func runFSM(t *testing.T, cases []fsmCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			maxTurns := tc.maxTurns
			if maxTurns == 0 {
				maxTurns = 10
			}
			c := mustApply(t, started(t, maxTurns), tc.setup...)
			got, err := apply(t, c, tc.msg)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err = %v, want code %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			checkWant(t, got, tc.want)
			if tc.check != nil {
				tc.check(t, got)
			}
		})
	}
}

func checkWant(t *testing.T, c protocol.Chat, w want) {
	t.Helper()
	if c.State != w.state {
		t.Errorf("State = %q, want %q", c.State, w.state)
	}
	if c.Speaker != w.speaker {
		t.Errorf("Speaker = %q, want %q", c.Speaker, w.speaker)
	}
	if c.Turn != w.turn {
		t.Errorf("Turn = %d, want %d", c.Turn, w.turn)
	}
	if !slices.Equal(c.Waiting, w.waiting) {
		t.Errorf("Waiting = %v, want %v", c.Waiting, w.waiting)
	}
	for id, status := range w.tasks {
		ts, ok := c.Task(id)
		if !ok {
			t.Errorf("task %s missing", id)
			continue
		}
		if ts.Status != status {
			t.Errorf("task %s status = %q, want %q", id, ts.Status, status)
		}
	}
}

func TestApplyStart(t *testing.T) {
	c := started(t, 7)
	if c.State != protocol.StateDiscussion || c.Speaker != alice || c.Turn != 0 {
		t.Fatalf("after start: state %q speaker %q turn %d", c.State, c.Speaker, c.Turn)
	}
	if !slices.Equal(c.Members, []string{alice, bob, carol}) || c.Launcher != alice {
		t.Fatalf("members %v launcher %q", c.Members, c.Launcher)
	}
	if c.MaxTurns != 7 || c.TeamUpDepth != 2 || c.CommID != "c1" || c.GoalID != "g1" || c.Goal != "write a haiku" || c.LastSeq != 1 {
		t.Fatalf("start fields not recorded: %+v", c)
	}
	if len(c.Waiting) != 0 || len(c.Tasks) != 0 || c.FinalTurn || c.Ended() {
		t.Fatalf("fresh chat is not clean: %+v", c)
	}

	bad := func(edit func(m *protocol.AgentMessage)) protocol.AgentMessage {
		m := startMsg(5)
		m.Team = slices.Clone(m.Team)
		edit(&m)
		return m
	}
	cases := []struct {
		name string
		msg  protocol.AgentMessage
		err  error
	}{
		{"empty team", bad(func(m *protocol.AgentMessage) { m.Team = nil }), protocol.ErrInvalid},
		{"repeated member", bad(func(m *protocol.AgentMessage) { m.Team[2].Name = bob }), protocol.ErrInvalid},
		{"invalid member name", bad(func(m *protocol.AgentMessage) { m.Team[1].Name = "Bob.x" }), protocol.ErrInvalid},
		{"system as member", bad(func(m *protocol.AgentMessage) { m.Team[1].Name = sys }), protocol.ErrInvalid},
		{"launcher not in team", bad(func(m *protocol.AgentMessage) { m.Launcher = mallory }), protocol.ErrInvalid},
		{"no launcher", bad(func(m *protocol.AgentMessage) { m.Launcher = "" }), protocol.ErrInvalid},
		{"max_turns zero", bad(func(m *protocol.AgentMessage) { m.MaxTurns = 0 }), protocol.ErrInvalid},
		{"max_turns negative", bad(func(m *protocol.AgentMessage) { m.MaxTurns = -1 }), protocol.ErrInvalid},
		{"sent by a member", bad(func(m *protocol.AgentMessage) { m.Sender = alice }), protocol.ErrForbidden},
		{"not a start event", bad(func(m *protocol.AgentMessage) { m.Event = protocol.EventNote }), protocol.ErrIllegalTransition},
		{"discussion before start", disc(alice, bob), protocol.ErrIllegalTransition},
		{"task result before start", result(sys, "t1", failed), protocol.ErrIllegalTransition},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := apply(t, protocol.Chat{}, tc.msg)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
		})
	}

	t.Run("start twice", func(t *testing.T) {
		_, err := apply(t, started(t, 5), startMsg(5))
		if !errors.Is(err, protocol.ErrIllegalTransition) {
			t.Fatalf("err = %v, want illegal_transition", err)
		}
	})
}

func TestApplySeq(t *testing.T) {
	c := mustApply(t, started(t, 10), disc(alice, bob))
	for _, seq := range []uint64{0, c.LastSeq, c.LastSeq + 2, 1 << 40} {
		m := disc(bob, carol)
		m.Seq = seq
		got, err := protocol.Apply(c, m)
		if !errors.Is(err, protocol.ErrInvalid) {
			t.Errorf("seq %d after %d: err = %v, want invalid", seq, c.LastSeq, err)
		}
		if !reflect.DeepEqual(got, c) {
			t.Errorf("seq %d: refused message changed the chat", seq)
		}
	}
	m := startMsg(3)
	m.Seq = 2
	if _, err := protocol.Apply(protocol.Chat{}, m); !errors.Is(err, protocol.ErrInvalid) {
		t.Errorf("start with seq 2: err = %v, want invalid", err)
	}
	// A wrong seq is refused even after the conclusion, before anything else.
	done := mustApply(t, c, disc(bob, alice), conclude(alice, "x"))
	m = disc(alice, bob)
	m.Seq = done.LastSeq
	if _, err := protocol.Apply(done, m); !errors.Is(err, protocol.ErrInvalid) {
		t.Errorf("stale seq after conclusion: err = %v, want invalid", err)
	}
}

func TestApplyDiscussion(t *testing.T) {
	runFSM(t, []fsmCase{
		{name: "speaker hands the turn to a member", msg: disc(alice, bob),
			want: want{state: protocol.StateDiscussion, speaker: bob, turn: 1}},
		{name: "speaker may name itself", msg: disc(alice, alice),
			want: want{state: protocol.StateDiscussion, speaker: alice, turn: 1}},
		{name: "named member speaks next", setup: msgs(disc(alice, bob)), msg: disc(bob, carol),
			want: want{state: protocol.StateDiscussion, speaker: carol, turn: 2}},
		{name: "updated plan is recorded", msg: func() protocol.AgentMessage {
			m := disc(alice, bob)
			m.UpdatedPlan = "1. draft 2. review"
			return m
		}(), want: want{state: protocol.StateDiscussion, speaker: bob, turn: 1},
			check: func(t *testing.T, c protocol.Chat) {
				if c.Plan != "1. draft 2. review" {
					t.Errorf("Plan = %q", c.Plan)
				}
			}},
		{name: "previous speaker lost the turn", setup: msgs(disc(alice, bob)), msg: disc(alice, carol), err: protocol.ErrNotYourTurn},
		{name: "member out of turn", msg: disc(bob, carol), err: protocol.ErrNotYourTurn},
		{name: "non-member", msg: disc(mallory, bob), err: protocol.ErrNotMember},
		{name: "system sender as a speaker", msg: disc(sys, bob), err: protocol.ErrNotMember},
		{name: "empty sender", msg: disc("", bob), err: protocol.ErrNotMember},
		{name: "next_speaker missing", msg: disc(alice), err: protocol.ErrInvalid},
		{name: "several next speakers", msg: disc(alice, bob, carol), err: protocol.ErrInvalid},
		{name: "same next speaker twice", msg: disc(alice, bob, bob), err: protocol.ErrInvalid},
		{name: "non-member next speaker", msg: disc(alice, mallory), err: protocol.ErrInvalid},
		{name: "system as next speaker", msg: disc(alice, sys), err: protocol.ErrInvalid},
		{name: "empty next speaker", msg: disc(alice, ""), err: protocol.ErrInvalid},
		{name: "unknown type", msg: protocol.AgentMessage{Type: "chat", Sender: alice}, err: protocol.ErrInvalid},
		{name: "empty type", msg: protocol.AgentMessage{Sender: alice}, err: protocol.ErrInvalid},
		{name: "type is case sensitive", msg: protocol.AgentMessage{Type: "Discussion", Sender: alice, NextSpeaker: []string{bob}}, err: protocol.ErrInvalid},
		{name: "unknown type from a non-member", msg: protocol.AgentMessage{Type: "chat", Sender: mallory}, err: protocol.ErrNotMember},
	})
}

func TestApplySyncTasks(t *testing.T) {
	afterFail := chatLog(inSync, msgs(result(bob, "t1", failed), result(carol, "t2", completed)))
	runFSM(t, []fsmCase{
		{name: "assign waits for every task", msg: inSync[0],
			want: want{state: protocol.StateSyncTasks, speaker: "", turn: 1, waiting: []string{"t1", "t2"},
				tasks: map[string]string{"t1": running, "t2": running}},
			check: func(t *testing.T, c protocol.Chat) {
				ts, _ := c.Task("t1")
				if ts.Async || ts.Assigner != alice || ts.Attempt != 1 || ts.Assignee != bob || ts.Progressed || ts.TaskDesc != "do t1" {
					t.Errorf("t1 = %+v", ts)
				}
				if c.Resume != alice {
					t.Errorf("Resume = %q, want alice", c.Resume)
				}
			}},
		{name: "a task abstract alone is a description", msg: syncAssign(alice, protocol.Task{TaskID: "t1", Assignee: bob, TaskAbstract: "draft"}),
			want: want{state: protocol.StateSyncTasks, turn: 1, waiting: []string{"t1"}}},
		{name: "the assigner may assign itself", msg: syncAssign(alice, task("t1", alice)),
			want: want{state: protocol.StateSyncTasks, turn: 1, waiting: []string{"t1"}}},
		{name: "no tasks", msg: syncAssign(alice), err: protocol.ErrInvalid},
		{name: "assignee not a member", msg: syncAssign(alice, task("t1", bob), task("t2", mallory)), err: protocol.ErrInvalid},
		{name: "system as assignee", msg: syncAssign(alice, task("t1", sys)), err: protocol.ErrInvalid},
		{name: "task without description", msg: syncAssign(alice, protocol.Task{TaskID: "t1", Assignee: bob}), err: protocol.ErrInvalid},
		{name: "task id with a dot", msg: syncAssign(alice, task("t.1", bob)), err: protocol.ErrInvalid},
		{name: "task id with a wildcard", msg: syncAssign(alice, task("t*", bob)), err: protocol.ErrInvalid},
		{name: "empty task id", msg: syncAssign(alice, task("", bob)), err: protocol.ErrInvalid},
		{name: "task id twice in one message", msg: syncAssign(alice, task("t1", bob), task("t1", carol)), err: protocol.ErrInvalid},
		{name: "assign out of turn", msg: syncAssign(bob, task("t1", carol)), err: protocol.ErrNotYourTurn},
		{name: "assign by a non-member", msg: syncAssign(mallory, task("t1", bob)), err: protocol.ErrNotMember},

		{name: "nobody speaks while waiting: the assigner", setup: inSync, msg: disc(alice, bob), err: protocol.ErrNotYourTurn},
		{name: "nobody speaks while waiting: an assignee", setup: inSync, msg: disc(bob, alice), err: protocol.ErrNotYourTurn},
		{name: "no new assignment while waiting", setup: inSync, msg: syncAssign(alice, task("t3", bob)), err: protocol.ErrNotYourTurn},
		{name: "no pause while waiting", setup: inSync, msg: pause(alice, "t1"), err: protocol.ErrNotYourTurn},
		{name: "no conclusion while waiting", setup: inSync, msg: conclude(alice, "x"), err: protocol.ErrNotYourTurn},

		{name: "progress does not end the wait", setup: inSync, msg: progress(bob, "t1"),
			want: want{state: protocol.StateSyncTasks, turn: 1, waiting: []string{"t1", "t2"}, tasks: map[string]string{"t1": running}},
			check: func(t *testing.T, c protocol.Chat) {
				if ts, _ := c.Task("t1"); !ts.Progressed {
					t.Error("t1 not marked progressed")
				}
			}},
		{name: "one result of two does not end the wait", setup: inSync, msg: result(bob, "t1", completed),
			want: want{state: protocol.StateSyncTasks, turn: 1, waiting: []string{"t1", "t2"},
				tasks: map[string]string{"t1": completed, "t2": running}},
			check: func(t *testing.T, c protocol.Chat) {
				if ts, _ := c.Task("t1"); ts.Result != "result of t1" {
					t.Errorf("t1 result = %q", ts.Result)
				}
			}},
		{name: "the last result gives the turn back to the assigner", setup: chatLog(inSync, msgs(result(bob, "t1", completed))),
			msg:  result(carol, "t2", failed),
			want: want{state: protocol.StateDiscussion, speaker: alice, turn: 1, tasks: map[string]string{"t1": completed, "t2": failed}},
			check: func(t *testing.T, c protocol.Chat) {
				if c.Resume != "" {
					t.Errorf("Resume = %q after resuming", c.Resume)
				}
			}},
		{name: "the assigner is not always the launcher", setup: msgs(disc(alice, bob), syncAssign(bob, task("t1", carol))),
			msg:  result(carol, "t1", completed),
			want: want{state: protocol.StateDiscussion, speaker: bob, turn: 2}},
		{name: "the referee fails the last task", setup: chatLog(inSync, msgs(result(bob, "t1", completed))),
			msg:  result(sys, "t2", failed),
			want: want{state: protocol.StateDiscussion, speaker: alice, turn: 1, tasks: map[string]string{"t2": failed}}},

		{name: "a failed task may be assigned again", setup: afterFail, msg: syncAssign(alice, task("t1", carol)),
			want: want{state: protocol.StateSyncTasks, turn: 2, waiting: []string{"t1"}, tasks: map[string]string{"t1": running}},
			check: func(t *testing.T, c protocol.Chat) {
				ts, _ := c.Task("t1")
				if ts.Attempt != 2 || ts.Assignee != carol || ts.Result != "" || ts.Progressed {
					t.Errorf("reassigned t1 = %+v", ts)
				}
				if len(c.Tasks) != 2 {
					t.Errorf("reassignment added a task: %d tasks", len(c.Tasks))
				}
			}},
		{name: "a third attempt", setup: chatLog(afterFail, msgs(syncAssign(alice, task("t1", carol)), result(sys, "t1", failed))),
			msg:  asyncAssign(alice, task("t1", bob)),
			want: want{state: protocol.StateAsyncTasks, turn: 3, waiting: []string{"t1"}},
			check: func(t *testing.T, c protocol.Chat) {
				if ts, _ := c.Task("t1"); ts.Attempt != 3 || !ts.Async {
					t.Errorf("t1 = %+v, want attempt 3, async", ts)
				}
			}},
		{name: "the old assignee cannot report on a reassigned task", setup: chatLog(afterFail, msgs(syncAssign(alice, task("t1", carol)))),
			msg: result(bob, "t1", completed), err: protocol.ErrForbidden},
		{name: "a completed task id cannot be reused", setup: afterFail, msg: syncAssign(alice, task("t2", bob)), err: protocol.ErrInvalid},
		{name: "a running task id cannot be reused", setup: asyncRunning, msg: syncAssign(alice, task("t1", carol)), err: protocol.ErrInvalid},
		{name: "one reused id spoils the batch", setup: afterFail, msg: syncAssign(alice, task("t1", bob), task("t2", bob)), err: protocol.ErrInvalid},
	})
}

func TestApplyAsyncTasks(t *testing.T) {
	runFSM(t, []fsmCase{
		{name: "assign waits for progress", msg: inAsync[0],
			want: want{state: protocol.StateAsyncTasks, turn: 1, waiting: []string{"t1", "t2"}, tasks: map[string]string{"t1": running, "t2": running}},
			check: func(t *testing.T, c protocol.Chat) {
				if ts, _ := c.Task("t2"); !ts.Async || ts.Assigner != alice || ts.Attempt != 1 {
					t.Errorf("t2 = %+v", ts)
				}
			}},
		{name: "no tasks", msg: asyncAssign(alice), err: protocol.ErrInvalid},
		{name: "assign out of turn", msg: asyncAssign(carol, task("t1", bob)), err: protocol.ErrNotYourTurn},
		{name: "one progress of two", setup: inAsync, msg: progress(bob, "t1"),
			want: want{state: protocol.StateAsyncTasks, turn: 1, waiting: []string{"t1", "t2"}}},
		{name: "progress twice from the same assignee", setup: chatLog(inAsync, msgs(progress(bob, "t1"))), msg: progress(bob, "t1"),
			want: want{state: protocol.StateAsyncTasks, turn: 1, waiting: []string{"t1", "t2"}}},
		{name: "every assignee progressed: the assigner speaks, tasks keep running", setup: chatLog(inAsync, msgs(progress(bob, "t1"))),
			msg:  progress(carol, "t2"),
			want: want{state: protocol.StateDiscussion, speaker: alice, turn: 1, tasks: map[string]string{"t1": running, "t2": running}},
			check: func(t *testing.T, c protocol.Chat) {
				if r := c.RunningTasks(); !slices.Equal(r, []string{"t1", "t2"}) {
					t.Errorf("RunningTasks = %v", r)
				}
			}},
		{name: "a result counts as progress", setup: chatLog(inAsync, msgs(progress(bob, "t1"))),
			msg:  result(carol, "t2", completed),
			want: want{state: protocol.StateDiscussion, speaker: alice, turn: 1, tasks: map[string]string{"t1": running, "t2": completed}}},
		{name: "a failed result from the referee counts as progress", setup: chatLog(inAsync, msgs(progress(bob, "t1"))),
			msg:  result(sys, "t2", failed),
			want: want{state: protocol.StateDiscussion, speaker: alice, turn: 1, tasks: map[string]string{"t2": failed}}},
		{name: "each task of one assignee needs progress", setup: msgs(asyncAssign(alice, task("t1", bob), task("t2", bob))),
			msg:  progress(bob, "t1"),
			want: want{state: protocol.StateAsyncTasks, turn: 1, waiting: []string{"t1", "t2"}}},
		{name: "the assigner is not always the launcher", setup: msgs(disc(alice, bob), asyncAssign(bob, task("t1", carol))),
			msg:  progress(carol, "t1"),
			want: want{state: protocol.StateDiscussion, speaker: bob, turn: 2}},
		{name: "progress from another member", setup: inAsync, msg: progress(carol, "t1"), err: protocol.ErrForbidden},
		{name: "progress from a non-member", setup: inAsync, msg: progress(mallory, "t1"), err: protocol.ErrNotMember},
		{name: "progress from the referee", setup: inAsync, msg: progress(sys, "t1"), err: protocol.ErrNotMember},
		{name: "progress after the result", setup: chatLog(inAsync, msgs(result(bob, "t1", completed))), msg: progress(bob, "t1"), err: protocol.ErrIllegalTransition},
		{name: "nobody speaks while waiting", setup: inAsync, msg: disc(alice, bob), err: protocol.ErrNotYourTurn},
		{name: "no conclusion while waiting", setup: inAsync, msg: conclude(alice, "x"), err: protocol.ErrNotYourTurn},
	})
}

func TestApplyPause(t *testing.T) {
	runFSM(t, []fsmCase{
		{name: "pause on one running async task", setup: asyncRunning, msg: pause(alice, "t1"),
			want: want{state: protocol.StatePause, turn: 2, waiting: []string{"t1"}},
			check: func(t *testing.T, c protocol.Chat) {
				if c.Resume != alice {
					t.Errorf("Resume = %q, want alice", c.Resume)
				}
			}},
		{name: "pause on every running async task", setup: asyncRunning, msg: pause(alice, "t2", "t1"),
			want: want{state: protocol.StatePause, turn: 2, waiting: []string{"t2", "t1"}}},
		{name: "progress on a trigger does not resume", setup: inPause, msg: progress(bob, "t1"),
			want: want{state: protocol.StatePause, turn: 2, waiting: []string{"t1", "t2"}}},
		{name: "one trigger of two done", setup: inPause, msg: result(bob, "t1", completed),
			want: want{state: protocol.StatePause, turn: 2, waiting: []string{"t1", "t2"}, tasks: map[string]string{"t1": completed, "t2": running}}},
		{name: "every trigger done: the pauser speaks", setup: chatLog(inPause, msgs(result(bob, "t1", completed))),
			msg:  result(carol, "t2", failed),
			want: want{state: protocol.StateDiscussion, speaker: alice, turn: 2, tasks: map[string]string{"t1": completed, "t2": failed}}},
		{name: "the referee failing a trigger resumes", setup: chatLog(asyncRunning, msgs(pause(alice, "t1"))),
			msg:  result(sys, "t1", failed),
			want: want{state: protocol.StateDiscussion, speaker: alice, turn: 2, tasks: map[string]string{"t1": failed, "t2": running}}},
		{name: "the pauser is not always the launcher", setup: chatLog(asyncRunning, msgs(disc(alice, bob), pause(bob, "t2"))),
			msg:  result(carol, "t2", completed),
			want: want{state: protocol.StateDiscussion, speaker: bob, turn: 3}},
		{name: "a result that is not a trigger is recorded", setup: chatLog(asyncRunning, msgs(pause(alice, "t1"))),
			msg:  result(carol, "t2", completed),
			want: want{state: protocol.StatePause, turn: 2, waiting: []string{"t1"}, tasks: map[string]string{"t1": running, "t2": completed}}},
		{name: "no triggers", setup: asyncRunning, msg: pause(alice), err: protocol.ErrInvalid},
		{name: "unknown trigger", setup: asyncRunning, msg: pause(alice, "t1", "t9"), err: protocol.ErrInvalid},
		{name: "invalid trigger id", setup: asyncRunning, msg: pause(alice, "t.>"), err: protocol.ErrInvalid},
		{name: "no tasks at all", msg: pause(alice, "t1"), err: protocol.ErrInvalid},
		{name: "a sync task", setup: chatLog(inSync, msgs(result(bob, "t1", completed), result(carol, "t2", completed))),
			msg: pause(alice, "t1"), err: protocol.ErrInvalid},
		{name: "a finished async task", setup: chatLog(asyncRunning, msgs(result(bob, "t1", completed))), msg: pause(alice, "t2", "t1"), err: protocol.ErrInvalid},
		{name: "a failed async task", setup: chatLog(asyncRunning, msgs(result(sys, "t1", failed))), msg: pause(alice, "t1"), err: protocol.ErrInvalid},
		{name: "a repeated trigger", setup: asyncRunning, msg: pause(alice, "t1", "t2", "t1"), err: protocol.ErrInvalid},
		{name: "pause out of turn", setup: asyncRunning, msg: pause(bob, "t1"), err: protocol.ErrNotYourTurn},
		{name: "pause by a non-member", setup: asyncRunning, msg: pause(mallory, "t1"), err: protocol.ErrNotMember},
		{name: "pause while paused", setup: chatLog(asyncRunning, msgs(pause(alice, "t1"))), msg: pause(alice, "t2"), err: protocol.ErrNotYourTurn},
		{name: "nobody speaks while paused", setup: inPause, msg: disc(alice, bob), err: protocol.ErrNotYourTurn},
	})

	// A running sync task in discussion only exists after a turn limit, when
	// no pause is legal anyway; build that state by hand to check that the
	// trigger rule itself refuses sync tasks.
	t.Run("a running sync task", func(t *testing.T) {
		c := mustApply(t, started(t, 10), chatLog(inSync, msgs(sysEvent(protocol.EventTurnLimit)))...)
		c.FinalTurn = false
		_, err := apply(t, c, pause(alice, "t1"))
		if !errors.Is(err, protocol.ErrInvalid) {
			t.Fatalf("err = %v, want invalid", err)
		}
	})
}

func TestApplyConclusion(t *testing.T) {
	runFSM(t, []fsmCase{
		{name: "the speaker concludes", msg: conclude(alice, "42"),
			want: want{state: protocol.StateConclusion, turn: 1},
			check: func(t *testing.T, c protocol.Chat) {
				if !c.Ended() || c.Outcome != protocol.GoalConcluded || c.Conclusion != "42" || c.Reason != "" || c.Resume != "" {
					t.Errorf("concluded chat = %+v", c)
				}
			}},
		{name: "any speaker may conclude", setup: msgs(disc(alice, carol)), msg: conclude(carol, "done"),
			want: want{state: protocol.StateConclusion, turn: 2}},
		{name: "running tasks are cancelled", setup: chatLog(asyncRunning, msgs(result(bob, "t1", completed))), msg: conclude(alice, "42"),
			want: want{state: protocol.StateConclusion, turn: 2, tasks: map[string]string{"t1": completed, "t2": cancelled}},
			check: func(t *testing.T, c protocol.Chat) {
				if r := c.RunningTasks(); len(r) != 0 {
					t.Errorf("RunningTasks = %v after the conclusion", r)
				}
			}},
		// Seqs: start 1, the assignment 2, the two progresses 3 and 4, t1's result 5.
		{name: "a conclusion that saw every result", setup: chatLog(asyncRunning, msgs(result(bob, "t1", completed))),
			msg:  concludeSeen(alice, "42", 5),
			want: want{state: protocol.StateConclusion, turn: 2, tasks: map[string]string{"t1": completed, "t2": cancelled}},
			check: func(t *testing.T, c protocol.Chat) {
				if ts, _ := c.Task("t1"); ts.EndedSeq != 5 {
					t.Errorf("t1 ended_seq = %d, want 5 (its result's seq)", ts.EndedSeq)
				}
				if ts, _ := c.Task("t2"); ts.EndedSeq != 0 {
					t.Errorf("t2 ended_seq = %d, want 0 (cancelled, no result)", ts.EndedSeq)
				}
			}},
		{name: "a conclusion decided before a result", setup: chatLog(asyncRunning, msgs(result(bob, "t1", completed))),
			msg: concludeSeen(alice, "42", 4), err: protocol.ErrConflict},
		{name: "a conclusion decided before the referee failed a task", setup: chatLog(asyncRunning, msgs(result(sys, "t1", failed))),
			msg: concludeSeen(alice, "42", 4), err: protocol.ErrConflict},
		{name: "a conclusion decided before a progress only", setup: chatLog(asyncRunning, msgs(progress(bob, "t1"))),
			msg:  concludeSeen(alice, "42", 4),
			want: want{state: protocol.StateConclusion, turn: 2}},
		{name: "a conclusion that saw what is not logged yet", setup: chatLog(asyncRunning, msgs(result(bob, "t1", completed))),
			msg: concludeSeen(alice, "42", 6), err: protocol.ErrInvalid},
		{name: "conclusion out of turn", msg: conclude(bob, "x"), err: protocol.ErrNotYourTurn},
		{name: "conclusion by a non-member", msg: conclude(mallory, "x"), err: protocol.ErrNotMember},
		{name: "conclusion while paused", setup: inPause, msg: conclude(alice, "x"), err: protocol.ErrNotYourTurn},
	})
}

// Every message after the end is refused with illegal_transition, whoever
// sends it and whatever it is.
func TestApplyAfterConclusion(t *testing.T) {
	ends := map[string]protocol.AgentMessage{
		"conclusion": conclude(alice, "42"),
		"system end": end(protocol.GoalCancelled, "cancel"),
	}
	later := []protocol.AgentMessage{
		disc(alice, bob),
		disc(bob, alice),
		conclude(alice, "again"),
		syncAssign(alice, task("t3", bob)),
		asyncAssign(alice, task("t3", bob)),
		pause(alice, "t2"),
		progress(carol, "t2"),
		result(carol, "t2", completed),
		result(sys, "t2", failed),
		result(bob, "t1", completed),
		sysEvent(protocol.EventNote),
		sysEvent(protocol.EventTurnLimit),
		sysEvent(protocol.EventSpeakerTimeout),
		end(protocol.GoalFailed, "again"),
		startMsg(5),
		disc(mallory, bob),
		from(alice, sysEvent(protocol.EventNote)),
		{Type: "bogus", Sender: alice},
	}
	for name, last := range ends {
		c := mustApply(t, started(t, 10), chatLog(asyncRunning, msgs(last))...)
		if !c.Ended() {
			t.Fatalf("%s: chat not ended: %q", name, c.State)
		}
		if ts, _ := c.Task("t2"); ts.Status != cancelled {
			t.Fatalf("%s: t2 = %q, want cancelled", name, ts.Status)
		}
		for _, m := range later {
			t.Run(name+"/"+m.Type+"/"+m.Event+"/"+m.Sender, func(t *testing.T) {
				_, err := apply(t, c, m)
				if !errors.Is(err, protocol.ErrIllegalTransition) {
					t.Fatalf("err = %v, want illegal_transition", err)
				}
			})
		}
	}
}

// Results of async tasks arrive in any state before the conclusion; they are
// recorded and change nothing else unless they complete a wait.
func TestApplyTaskReports(t *testing.T) {
	runFSM(t, []fsmCase{
		{name: "async result in discussion", setup: chatLog(asyncRunning, msgs(disc(alice, bob))), msg: result(bob, "t1", completed),
			want: want{state: protocol.StateDiscussion, speaker: bob, turn: 2, tasks: map[string]string{"t1": completed, "t2": running}},
			check: func(t *testing.T, c protocol.Chat) {
				if ts, _ := c.Task("t1"); ts.Result != "result of t1" {
					t.Errorf("t1 result = %q", ts.Result)
				}
			}},
		{name: "async progress in discussion", setup: chatLog(asyncRunning, msgs(disc(alice, bob))), msg: progress(carol, "t2"),
			want: want{state: protocol.StateDiscussion, speaker: bob, turn: 2, tasks: map[string]string{"t2": running}}},
		{name: "async result during a sync assignment", setup: chatLog(asyncRunning, msgs(syncAssign(alice, task("t3", carol)))),
			msg:  result(bob, "t1", completed),
			want: want{state: protocol.StateSyncTasks, turn: 2, waiting: []string{"t3"}, tasks: map[string]string{"t1": completed, "t3": running}}},
		{name: "async result during a later async assignment", setup: chatLog(asyncRunning, msgs(asyncAssign(alice, task("t3", carol)))),
			msg:  result(bob, "t1", failed),
			want: want{state: protocol.StateAsyncTasks, turn: 2, waiting: []string{"t3"}, tasks: map[string]string{"t1": failed}}},
		{name: "async result during the final turn", setup: chatLog(asyncRunning, msgs(sysEvent(protocol.EventTurnLimit))),
			msg:  result(carol, "t2", completed),
			want: want{state: protocol.StateDiscussion, speaker: alice, turn: 1, tasks: map[string]string{"t2": completed}}},
		{name: "sync result after a turn limit", setup: chatLog(inSync, msgs(sysEvent(protocol.EventTurnLimit))),
			msg:  result(bob, "t1", completed),
			want: want{state: protocol.StateDiscussion, speaker: alice, turn: 1, tasks: map[string]string{"t1": completed, "t2": running}}},
		{name: "unknown task", setup: asyncRunning, msg: result(bob, "t9", completed), err: protocol.ErrInvalid},
		{name: "no task id", setup: asyncRunning, msg: result(bob, "", completed), err: protocol.ErrInvalid},
		{name: "progress on an unknown task", setup: asyncRunning, msg: progress(bob, "t9"), err: protocol.ErrInvalid},
		{name: "bad task status", setup: asyncRunning, msg: result(bob, "t1", "done"), err: protocol.ErrInvalid},
		{name: "missing task status", setup: asyncRunning, msg: result(bob, "t1", ""), err: protocol.ErrInvalid},
		{name: "running is not a result", setup: asyncRunning, msg: result(bob, "t1", running), err: protocol.ErrInvalid},
		{name: "result from another member", setup: asyncRunning, msg: result(carol, "t1", completed), err: protocol.ErrForbidden},
		{name: "result from the launcher", setup: asyncRunning, msg: result(alice, "t1", failed), err: protocol.ErrForbidden},
		{name: "result from a non-member", setup: asyncRunning, msg: result(mallory, "t1", completed), err: protocol.ErrNotMember},
		{name: "the referee may only fail a task", setup: asyncRunning, msg: result(sys, "t1", completed), err: protocol.ErrForbidden},
		{name: "a second result", setup: chatLog(asyncRunning, msgs(result(bob, "t1", completed))), msg: result(bob, "t1", failed), err: protocol.ErrIllegalTransition},
		{name: "a result after the referee failed the task", setup: chatLog(asyncRunning, msgs(result(sys, "t1", failed))), msg: result(bob, "t1", completed), err: protocol.ErrIllegalTransition},
	})
}

func TestApplySystem(t *testing.T) {
	finalTurn := msgs(disc(alice, bob), sysEvent(protocol.EventTurnLimit))
	runFSM(t, []fsmCase{
		{name: "note changes nothing", setup: msgs(disc(alice, bob)), msg: sysEvent(protocol.EventNote),
			want: want{state: protocol.StateDiscussion, speaker: bob, turn: 1}},
		{name: "note while waiting", setup: inSync, msg: sysEvent(protocol.EventNote),
			want: want{state: protocol.StateSyncTasks, turn: 1, waiting: []string{"t1", "t2"}}},
		{name: "system message from a member", msg: from(alice, sysEvent(protocol.EventNote)), err: protocol.ErrForbidden},
		{name: "system message from a non-member", msg: from(mallory, sysEvent(protocol.EventTurnLimit)), err: protocol.ErrForbidden},
		{name: "unknown event", msg: sysEvent("reboot"), err: protocol.ErrInvalid},
		{name: "no event", msg: sysEvent(""), err: protocol.ErrInvalid},

		{name: "turn limit gives the launcher the last turn", setup: msgs(disc(alice, bob)), msg: sysEvent(protocol.EventTurnLimit),
			want: want{state: protocol.StateDiscussion, speaker: alice, turn: 1},
			check: func(t *testing.T, c protocol.Chat) {
				if !c.FinalTurn {
					t.Error("FinalTurn not set")
				}
			}},
		{name: "turn limit ends a sync wait", setup: inSync, msg: sysEvent(protocol.EventTurnLimit),
			want: want{state: protocol.StateDiscussion, speaker: alice, turn: 1, tasks: map[string]string{"t1": running, "t2": running}},
			check: func(t *testing.T, c protocol.Chat) {
				if c.Resume != "" || !c.FinalTurn {
					t.Errorf("Resume = %q, FinalTurn = %v", c.Resume, c.FinalTurn)
				}
			}},
		{name: "turn limit ends a pause", setup: inPause, msg: sysEvent(protocol.EventTurnLimit),
			want: want{state: protocol.StateDiscussion, speaker: alice, turn: 2}},
		{name: "final turn: discussion refused", setup: finalTurn, msg: disc(alice, bob), err: protocol.ErrIllegalTransition},
		{name: "final turn: sync assignment refused", setup: finalTurn, msg: syncAssign(alice, task("t1", bob)), err: protocol.ErrIllegalTransition},
		{name: "final turn: async assignment refused", setup: finalTurn, msg: asyncAssign(alice, task("t1", bob)), err: protocol.ErrIllegalTransition},
		{name: "final turn: pause refused", setup: chatLog(asyncRunning, msgs(sysEvent(protocol.EventTurnLimit))), msg: pause(alice, "t1"), err: protocol.ErrIllegalTransition},
		{name: "final turn: only the launcher speaks", setup: finalTurn, msg: conclude(bob, "x"), err: protocol.ErrNotYourTurn},
		{name: "final turn: the launcher concludes", setup: finalTurn, msg: conclude(alice, "best effort"),
			want: want{state: protocol.StateConclusion, turn: 2},
			check: func(t *testing.T, c protocol.Chat) {
				if c.Reason != "turn_limit" || c.Outcome != protocol.GoalConcluded || c.Conclusion != "best effort" {
					t.Errorf("Reason %q Outcome %q Conclusion %q", c.Reason, c.Outcome, c.Conclusion)
				}
			}},

		{name: "speaker timeout gives the turn to the launcher", setup: msgs(disc(alice, bob)), msg: sysEvent(protocol.EventSpeakerTimeout),
			want: want{state: protocol.StateDiscussion, speaker: alice, turn: 1},
			check: func(t *testing.T, c protocol.Chat) {
				if c.FinalTurn {
					t.Error("a speaker timeout is not a final turn")
				}
			}},
		{name: "after a timeout the old speaker is out of turn", setup: msgs(disc(alice, bob), sysEvent(protocol.EventSpeakerTimeout)),
			msg: disc(bob, carol), err: protocol.ErrNotYourTurn},
		{name: "speaker timeout while the launcher holds the turn", msg: sysEvent(protocol.EventSpeakerTimeout), err: protocol.ErrIllegalTransition},
		{name: "speaker timeout in the final turn", setup: finalTurn, msg: sysEvent(protocol.EventSpeakerTimeout), err: protocol.ErrIllegalTransition},
		{name: "speaker timeout while waiting on tasks", setup: inSync, msg: sysEvent(protocol.EventSpeakerTimeout), err: protocol.ErrIllegalTransition},
		{name: "speaker timeout while paused", setup: inPause, msg: sysEvent(protocol.EventSpeakerTimeout), err: protocol.ErrIllegalTransition},

		{name: "end with a status and a reason", setup: asyncRunning, msg: end(protocol.GoalCancelled, "cancel"),
			want: want{state: protocol.StateConclusion, turn: 1, tasks: map[string]string{"t1": cancelled, "t2": cancelled}},
			check: func(t *testing.T, c protocol.Chat) {
				if c.Outcome != protocol.GoalCancelled || c.Reason != "cancel" || c.Conclusion != "ended by the referee" {
					t.Errorf("Outcome %q Reason %q Conclusion %q", c.Outcome, c.Reason, c.Conclusion)
				}
			}},
		{name: "end without a status fails the goal", msg: end("", "member gone"),
			want: want{state: protocol.StateConclusion, turn: 0},
			check: func(t *testing.T, c protocol.Chat) {
				if c.Outcome != protocol.GoalFailed || c.Reason != "member gone" {
					t.Errorf("Outcome %q Reason %q", c.Outcome, c.Reason)
				}
			}},
		{name: "end after the final turn timed out", setup: finalTurn, msg: end(protocol.GoalFailed, "turn_limit"),
			want: want{state: protocol.StateConclusion, turn: 1},
			check: func(t *testing.T, c protocol.Chat) {
				if c.Outcome != protocol.GoalFailed || c.Reason != "turn_limit" {
					t.Errorf("Outcome %q Reason %q", c.Outcome, c.Reason)
				}
			}},
		{name: "end while waiting", setup: inSync, msg: end(protocol.GoalTimedOut, "timeout"),
			want: want{state: protocol.StateConclusion, turn: 1, tasks: map[string]string{"t1": cancelled}}},
		{name: "end with a running status", msg: end(protocol.GoalRunning, "x"), err: protocol.ErrInvalid},
		{name: "end with an unknown status", msg: end("exploded", "x"), err: protocol.ErrInvalid},
	})
}

func TestApplyMaxTurns(t *testing.T) {
	twoTurns := msgs(disc(alice, bob), disc(bob, alice))
	runFSM(t, []fsmCase{
		{name: "the last turn below the limit", maxTurns: 2, setup: msgs(disc(alice, bob)), msg: disc(bob, carol),
			want: want{state: protocol.StateDiscussion, speaker: carol, turn: 2}},
		{name: "discussion at the limit", maxTurns: 2, setup: twoTurns, msg: disc(alice, bob), err: protocol.ErrIllegalTransition},
		{name: "sync assignment at the limit", maxTurns: 2, setup: twoTurns, msg: syncAssign(alice, task("t1", bob)), err: protocol.ErrIllegalTransition},
		{name: "async assignment at the limit", maxTurns: 2, setup: twoTurns, msg: asyncAssign(alice, task("t1", bob)), err: protocol.ErrIllegalTransition},
		{name: "pause at the limit", maxTurns: 1, setup: msgs(asyncAssign(alice, task("t1", bob)), progress(bob, "t1")),
			msg: pause(alice, "t1"), err: protocol.ErrIllegalTransition},
		{name: "out of turn at the limit is still out of turn", maxTurns: 2, setup: twoTurns, msg: disc(bob, alice), err: protocol.ErrNotYourTurn},
		{name: "conclusion at the limit", maxTurns: 2, setup: twoTurns, msg: conclude(alice, "x"),
			want: want{state: protocol.StateConclusion, turn: 3},
			check: func(t *testing.T, c protocol.Chat) {
				if c.Reason != "" || c.Outcome != protocol.GoalConcluded {
					t.Errorf("Reason %q Outcome %q", c.Reason, c.Outcome)
				}
			}},
		{name: "task reports at the limit", maxTurns: 1, setup: msgs(syncAssign(alice, task("t1", bob))), msg: result(bob, "t1", completed),
			want: want{state: protocol.StateDiscussion, speaker: alice, turn: 1}},
	})
}

// One log through every kind of message: only discussion, the assignments,
// pause and conclusion count as turns.
func TestApplyTurnCounting(t *testing.T) {
	steps := []struct {
		msg     protocol.AgentMessage
		state   protocol.State
		speaker string
		turn    int
	}{
		{disc(alice, bob), protocol.StateDiscussion, bob, 1},
		{syncAssign(bob, task("t1", carol)), protocol.StateSyncTasks, "", 2},
		{progress(carol, "t1"), protocol.StateSyncTasks, "", 2},
		{sysEvent(protocol.EventNote), protocol.StateSyncTasks, "", 2},
		{result(carol, "t1", completed), protocol.StateDiscussion, bob, 2},
		{asyncAssign(bob, task("t2", carol), task("t3", alice)), protocol.StateAsyncTasks, "", 3},
		{progress(carol, "t2"), protocol.StateAsyncTasks, "", 3},
		{result(alice, "t3", completed), protocol.StateDiscussion, bob, 3},
		{pause(bob, "t2"), protocol.StatePause, "", 4},
		{result(sys, "t2", failed), protocol.StateDiscussion, bob, 4},
		{sysEvent(protocol.EventSpeakerTimeout), protocol.StateDiscussion, alice, 4},
		{asyncAssign(alice, task("t2", bob)), protocol.StateAsyncTasks, "", 5},
		{sysEvent(protocol.EventTurnLimit), protocol.StateDiscussion, alice, 5},
		{progress(bob, "t2"), protocol.StateDiscussion, alice, 5},
		{conclude(alice, "done"), protocol.StateConclusion, "", 6},
	}
	c := started(t, 10)
	for i, s := range steps {
		var err error
		c, err = apply(t, c, s.msg)
		if err != nil {
			t.Fatalf("step %d (%s from %s): %v", i, s.msg.Type, s.msg.Sender, err)
		}
		if c.State != s.state || c.Speaker != s.speaker || c.Turn != s.turn {
			t.Fatalf("step %d (%s from %s): state %q speaker %q turn %d, want %q %q %d",
				i, s.msg.Type, s.msg.Sender, c.State, c.Speaker, c.Turn, s.state, s.speaker, s.turn)
		}
		if got, want := protocol.IsTurnMessage(s.msg.Type), s.msg.Type != protocol.MsgSystem && !strings.HasPrefix(s.msg.Type, "task_"); got != want {
			t.Errorf("IsTurnMessage(%q) = %v, want %v", s.msg.Type, got, want)
		}
	}
	if c.Reason != "turn_limit" || c.LastSeq != uint64(len(steps)+1) {
		t.Errorf("Reason %q LastSeq %d", c.Reason, c.LastSeq)
	}
	if ts, _ := c.Task("t2"); ts.Attempt != 2 || ts.Status != cancelled || !ts.Progressed {
		t.Errorf("t2 = %+v, want attempt 2, cancelled, progressed", ts)
	}
	for _, typ := range []string{"", "bogus", protocol.MsgTaskProgress, protocol.MsgTaskResult, protocol.MsgSystem} {
		if protocol.IsTurnMessage(typ) {
			t.Errorf("IsTurnMessage(%q) = true", typ)
		}
	}
}

// The chat Apply returns shares no memory with its input chat or message, so
// replicas and the referee can keep old states and reuse messages.
func TestApplyDoesNotAlias(t *testing.T) {
	c := mustApply(t, started(t, 10), asyncRunning...)
	keep := cloneChat(c)

	m := pause(alice, "t1", "t2")
	m.Seq = c.LastSeq + 1
	got, err := protocol.Apply(c, m)
	if err != nil {
		t.Fatal(err)
	}
	m.Triggers[0] = "zz"
	if !slices.Equal(got.Waiting, []string{"t1", "t2"}) {
		t.Errorf("Waiting aliases the message's triggers: %v", got.Waiting)
	}
	got.Tasks[0].Status = "scribbled"
	got.Members[0] = "scribbled"
	if !reflect.DeepEqual(c, keep) {
		t.Errorf("writing to the result changed the input:\n%+v\n%+v", c, keep)
	}

	a := syncAssign(alice, task("t3", bob))
	a.Seq = c.LastSeq + 1
	got, err = protocol.Apply(c, a)
	if err != nil {
		t.Fatal(err)
	}
	a.Tasks[0].Assignee = carol
	if ts, _ := got.Task("t3"); ts.Assignee != bob {
		t.Errorf("task aliases the message: assignee %q", ts.Assignee)
	}
	got.Waiting[0] = "scribbled"
	if !reflect.DeepEqual(c, keep) {
		t.Errorf("writing to the result changed the input")
	}

	s := startMsg(3)
	s.Seq = 1
	fresh, err := protocol.Apply(protocol.Chat{}, s)
	if err != nil {
		t.Fatal(err)
	}
	s.Team[0].Name = "scribbled"
	if fresh.Members[0] != alice {
		t.Errorf("members alias the start message: %v", fresh.Members)
	}
}

// Folding the same log twice gives the same chat: Apply is deterministic.
func TestApplyDeterministic(t *testing.T) {
	history := chatLog(msgs(startMsg(10)), asyncRunning, msgs(disc(alice, bob), pause(bob, "t1"), result(bob, "t1", completed), conclude(bob, "ok")))
	fold := func() protocol.Chat { return mustApply(t, protocol.Chat{}, history...) }
	a, b := fold(), fold()
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("two folds differ:\n%+v\n%+v", a, b)
	}
	if a.State != protocol.StateConclusion || a.Turn != 4 {
		t.Fatalf("fold ended in %q at turn %d", a.State, a.Turn)
	}
}
