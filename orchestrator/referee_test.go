package orchestrator_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/orchestrator"
)

// startedChat forms a team of lead, alpha and an outsider that is not in it,
// all driven by hand, and returns the chat's id.
func startedChat(t *testing.T, w *world) (lead, alpha, outsider *wireAgent, goalID, comm string) {
	t.Helper()
	lead = newWireAgent(t, w.b, card("lead", "leads"))
	lead.team = []string{"alpha"}
	alpha = newWireAgent(t, w.b, card("alpha", "works"))
	outsider = newWireAgent(t, w.b, card("outsider", "not invited"))
	for _, a := range []*wireAgent{lead, alpha, outsider} {
		a.start(t.Context())
	}
	st := submitUntil(t, w, protocol.GoalRequest{Goal: "referee test", Launcher: "lead"},
		"chat to start", func(log []protocol.AgentMessage) bool { return len(log) == 1 }, lead)
	return lead, alpha, outsider, st.GoalID, st.CommID
}

func TestRefereeRefusesBadMessages(t *testing.T) {
	w := newWorld(t, orchestrator.Config{})
	lead, alpha, outsider, goalID, comm := startedChat(t, w)

	expect := func(what string, a *wireAgent, m protocol.AgentMessage, want *protocol.Error) {
		t.Helper()
		_, err := a.send(comm, m)
		if !errors.Is(err, want) {
			t.Fatalf("%s: err = %v, want %s", what, err, want.Code)
		}
	}
	disc := func(next string) protocol.AgentMessage {
		return protocol.AgentMessage{Type: protocol.MsgDiscussion, Content: "hi", NextSpeaker: []string{next}}
	}
	expect("non-member", outsider, disc("lead"), protocol.ErrNotMember)
	expect("out of turn", alpha, disc("lead"), protocol.ErrNotYourTurn)
	expect("next speaker outside the team", lead, disc("outsider"), protocol.ErrInvalid)
	expect("pause on unknown task", lead, protocol.AgentMessage{Type: protocol.MsgPause, Triggers: []string{"nope"}}, protocol.ErrInvalid)
	expect("system message from an agent", lead, protocol.AgentMessage{Type: protocol.MsgSystem, Event: "end"}, protocol.ErrForbidden)
	expect("unknown type", lead, protocol.AgentMessage{Type: "shout"}, protocol.ErrInvalid)
	expect("bad id", lead, protocol.AgentMessage{ID: "a.b", Type: protocol.MsgDiscussion, NextSpeaker: []string{"alpha"}}, protocol.ErrInvalid)

	// A spoofed sender in the body is ignored: the subject names the sender.
	spoof := disc("alpha")
	spoof.Sender = "alpha"
	spoof.ID = "once"
	r1, err := lead.send(comm, spoof)
	if err != nil {
		t.Fatal(err)
	}
	// The same id again gets the same reply and is not logged twice.
	r2, err := lead.send(comm, spoof)
	if err != nil || r2 != r1 {
		t.Fatalf("duplicate: %+v %v, want %+v", r2, err, r1)
	}
	log := w.chatLog(t, "lead", comm)
	if len(log) != 2 || log[1].Sender != "lead" || log[1].ID != "once" {
		t.Fatalf("log = %+v", log)
	}

	// A sync task, then a pause on it (not async) and on a finished task.
	if _, err := alpha.send(comm, protocol.AgentMessage{Type: protocol.MsgSyncTaskAssign, Tasks: []protocol.Task{{TaskID: "t1", Assignee: "lead", TaskDesc: "x"}}}); err != nil {
		t.Fatal(err)
	}
	expect("result for someone else's task", alpha, protocol.AgentMessage{Type: protocol.MsgTaskResult, TaskID: "t1", TaskStatus: "completed"}, protocol.ErrForbidden)
	if _, err := lead.send(comm, protocol.AgentMessage{Type: protocol.MsgTaskResult, TaskID: "t1", TaskStatus: "completed", TaskConclusion: "done"}); err != nil {
		t.Fatal(err)
	}
	expect("pause on a finished sync task", alpha, protocol.AgentMessage{Type: protocol.MsgPause, Triggers: []string{"t1"}}, protocol.ErrInvalid)
	if _, err := alpha.send(comm, protocol.AgentMessage{Type: protocol.MsgConclusion, Content: "over"}); err != nil {
		t.Fatal(err)
	}
	expect("after conclusion", lead, disc("alpha"), protocol.ErrIllegalTransition)

	// The goal ended with alpha's conclusion, and nothing refused was logged.
	var st protocol.GoalStatus
	waitFor(t, "goal to end", func() bool {
		_ = requestJSON(t, w, "goal.get", protocol.GoalIDRequest{GoalID: goalID}, &st)
		return protocol.GoalEnded(st.Status)
	})
	if st.Status != protocol.GoalConcluded || st.Result.Conclusion != "over" {
		t.Fatalf("goal = %+v", st.Result)
	}
	if n := len(w.chatLog(t, "alpha", comm)); n != 5 {
		t.Fatalf("log has %d messages, want 5", n)
	}
	// History is for members only.
	subject, _ := w.b.Subjects().History("outsider", comm)
	err = bus.Request(t.Context(), w.nc, subject, protocol.HistoryRequest{}, nil)
	if !errors.Is(err, protocol.ErrNotMember) {
		t.Fatalf("outsider history: %v", err)
	}
}

func TestRefereeBadBodies(t *testing.T) {
	w := newWorld(t, orchestrator.Config{})
	lead, _, _, _, comm := startedChat(t, w)
	subject, _ := w.b.Subjects().Outbox(lead.card.Name, comm)
	for _, body := range []string{"", "null", "[]", `{"id":"x","type":"discussion","id":"y"}`, "\xff\xfe", `{"id":5}`, `{"id":"x"`} {
		err := bus.Request(t.Context(), w.nc, subject, []byte(body), nil)
		if !errors.Is(err, protocol.ErrInvalid) {
			t.Errorf("body %q: err = %v, want invalid", body, err)
		}
	}
	big := make([]byte, 70<<10)
	for i := range big {
		big[i] = ' '
	}
	copy(big, `{"id":"x"}`)
	if err := bus.Request(t.Context(), w.nc, subject, big, nil); !errors.Is(err, protocol.ErrTooLarge) {
		t.Errorf("oversize: %v", err)
	}
	unknown, _ := w.b.Subjects().Outbox(lead.card.Name, "nochat")
	err := bus.Request(t.Context(), w.nc, unknown, protocol.AgentMessage{ID: "a", Type: protocol.MsgDiscussion}, nil)
	if !errors.Is(err, protocol.ErrNotFound) {
		t.Errorf("unknown chat: %v", err)
	}
	if n := len(w.chatLog(t, "lead", comm)); n != 1 {
		t.Fatalf("bad bodies changed the log: %d messages", n)
	}
}

func TestSilentSpeakerLosesTurnThenLauncherTimeoutFails(t *testing.T) {
	w := newWorld(t, orchestrator.Config{SpeakerTimeout: 300 * time.Millisecond})
	lead, _, _, goalID, comm := startedChat(t, w)
	if _, err := lead.send(comm, protocol.AgentMessage{Type: protocol.MsgDiscussion, NextSpeaker: []string{"alpha"}}); err != nil {
		t.Fatal(err)
	}
	var st protocol.GoalStatus
	waitFor(t, "goal to fail", func() bool {
		_ = requestJSON(t, w, "goal.get", protocol.GoalIDRequest{GoalID: goalID}, &st)
		return protocol.GoalEnded(st.Status)
	})
	if st.Status != protocol.GoalFailed || st.Result.Reason != "launcher_timeout" {
		t.Fatalf("result = %+v", st.Result)
	}
	log := w.chatLog(t, "lead", comm)
	var events []string
	for _, m := range log {
		if m.Type == protocol.MsgSystem {
			events = append(events, m.Event)
		}
	}
	if len(events) != 3 || events[1] != protocol.EventSpeakerTimeout || events[2] != protocol.EventEnd {
		t.Fatalf("system events = %v", events)
	}
}

// The referee's own name on an outbox subject speaks for no one: a task
// result "from system" is refused, not taken from a non-member.
func TestNobodySpeaksAsTheReferee(t *testing.T) {
	w := newWorld(t, orchestrator.Config{})
	lead, _, _, _, comm := startedChat(t, w)
	if _, err := lead.send(comm, protocol.AgentMessage{Type: protocol.MsgSyncTaskAssign, Tasks: []protocol.Task{{TaskID: "ts", Assignee: "alpha", TaskDesc: "wait"}}}); err != nil {
		t.Fatal(err)
	}
	// No builder makes this subject; an admin connection can still publish it.
	sysOut := w.b.Subjects().Prefix() + ".agent." + protocol.SystemSender + ".out." + comm
	err := bus.Request(t.Context(), w.nc, sysOut, protocol.AgentMessage{ID: "forged", Type: protocol.MsgTaskResult, TaskID: "ts", TaskStatus: protocol.TaskCompleted, TaskConclusion: "forged"}, nil)
	if !errors.Is(err, protocol.ErrForbidden) || !strings.Contains(err.Error(), "reserved for the referee") {
		t.Fatalf("a task result on the system outbox: %v, want forbidden: reserved for the referee", err)
	}
}
