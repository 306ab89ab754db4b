package orchestrator_test

import (
	"errors"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/orchestrator"
)

func pingPong(other string) func(protocol.Chat) *protocol.AgentMessage {
	return func(c protocol.Chat) *protocol.AgentMessage {
		if c.FinalTurn {
			return &protocol.AgentMessage{Type: protocol.MsgConclusion, Content: "stopped by the turn limit"}
		}
		return &protocol.AgentMessage{Type: protocol.MsgDiscussion, Content: "your turn", NextSpeaker: []string{other}}
	}
}

func TestPingPongStopsAtMaxTurns(t *testing.T) {
	w := newWorld(t, orchestrator.Config{})
	ping := newWireAgent(t, w.b, card("ping", "talks"))
	ping.team = []string{"pong"}
	ping.speak = pingPong("pong")
	pong := newWireAgent(t, w.b, card("pong", "talks back"))
	pong.speak = pingPong("ping")
	ping.start(t.Context())
	pong.start(t.Context())
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

func TestTaskTimeoutFailsTheTaskAndTheChatGoesOn(t *testing.T) {
	w := newWorld(t, orchestrator.Config{TaskTimeout: 300 * time.Millisecond})
	lead := newWireAgent(t, w.b, card("lead", "leads"))
	lead.team = []string{"sleeper"}
	lead.speak = func(c protocol.Chat) *protocol.AgentMessage {
		if len(c.Tasks) == 0 {
			return &protocol.AgentMessage{Type: protocol.MsgSyncTaskAssign, Tasks: []protocol.Task{{Assignee: "sleeper", TaskDesc: "never finishes"}}}
		}
		return &protocol.AgentMessage{Type: protocol.MsgConclusion, Content: "task " + c.Tasks[0].Status + ": " + c.Tasks[0].Result}
	}
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

func TestGoalTimeout(t *testing.T) {
	w := newWorld(t, orchestrator.Config{})
	lead, _, _, _, _ := startedChat(t, w) // nobody speaks
	_ = lead
	res := w.submitWait(t, protocol.GoalRequest{Goal: "too slow", Launcher: "lead", Timeout: protocol.Duration(300 * time.Millisecond)})
	if res.Status != protocol.GoalTimedOut || res.Reason != "goal_timeout" {
		t.Fatalf("result = %+v", res)
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
	for body, want := range map[string]*protocol.Error{
		"":                              protocol.ErrInvalid,
		`{"goal":""}`:                   protocol.ErrInvalid,
		`{"goal":"x","goal":"y"}`:       protocol.ErrInvalid,
		`{"goal":"x","team":["A"]}`:     protocol.ErrInvalid,
		`{"goal":"x","timeout":"soon"}`: protocol.ErrInvalid,
		`{"goal":"x"`:                   protocol.ErrInvalid,
		"\xff":                          protocol.ErrInvalid,
	} {
		if err := requestJSON(t, w, "goal.submit", []byte(body), nil); !errors.Is(err, want) {
			t.Errorf("submit %q: %v", body, err)
		}
	}
	if err := requestJSON(t, w, "goal.list", protocol.GoalListRequest{Status: "weird"}, nil); !errors.Is(err, protocol.ErrInvalid) {
		t.Errorf("list weird: %v", err)
	}
	if err := requestJSON(t, w, "goal.get", protocol.GoalIDRequest{GoalID: "nope"}, nil); !errors.Is(err, protocol.ErrNotFound) {
		t.Errorf("get unknown: %v", err)
	}
	var list protocol.GoalListReply
	if err := requestJSON(t, w, "goal.list", []byte(""), &list); err != nil || len(list.Goals) != 1 {
		t.Fatalf("list: %+v %v", list, err)
	}
}
