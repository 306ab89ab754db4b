package orchestrator

import (
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
)

// A goal that waited for a team longer than a launch may take, with nothing
// left to launch it, is launched again while it has time, and timed out
// when it has none; one with a chat is only forgotten, and one whose end is
// being recorded is left alone.
func TestGoalLeftWithoutATeamIsLaunchedAgainOrTimedOut(t *testing.T) {
	s := startedService(t)
	launches := launchRequests(t, s)
	record := func(st protocol.GoalStatus) {
		st.Launcher, st.Goal, st.CreatedAt = s.cfg.Coordinator, "Multiply 2 x 3.", time.Now().UTC()
		if _, err := s.goals.Create(t.Context(), st.GoalID, bus.Encode(st)); err != nil {
			t.Fatal(err)
		}
		s.mu.Lock()
		s.launching[st.GoalID] = time.Now().Add(-time.Second) // due now
		s.mu.Unlock()
	}
	record(protocol.GoalStatus{GoalID: "gstuck1", Status: protocol.GoalForming, Deadline: time.Now().Add(time.Minute)})
	record(protocol.GoalStatus{GoalID: "glate1", Status: protocol.GoalForming, Deadline: time.Now().Add(-time.Second)})
	record(protocol.GoalStatus{GoalID: "gteamed1", Status: protocol.GoalRunning, CommID: "cteamed1", Deadline: time.Now().Add(time.Minute)})
	// A goal whose end is decided but not recorded yet is left to retryEnds.
	record(protocol.GoalStatus{GoalID: "gending1", Status: protocol.GoalForming, Deadline: time.Now().Add(time.Minute)})
	s.mu.Lock()
	s.pending["gending1"] = &pendingEnd{status: protocol.GoalFailed, reason: "test", next: time.Now().Add(time.Hour)}
	s.mu.Unlock()
	s.recheckLaunches(t.Context())
	select {
	case id := <-launches:
		if id != "gstuck1" {
			t.Errorf("launched %s again, want gstuck1", id)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the goal left forming was not launched again")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := s.readGoal(t.Context(), "glate1")
		if err == nil && st.Status == protocol.GoalTimedOut {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the goal past its deadline is %s (%v), want timed_out", st.Status, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		s.mu.Lock()
		_, teamed := s.launching["gteamed1"]
		_, late := s.launching["glate1"]
		s.mu.Unlock()
		if !teamed && !late {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still watched: the goal with a chat %v, the ended one %v", teamed, late)
		}
	}
	select {
	case id := <-launches:
		t.Errorf("launched %s too", id)
	case <-time.After(200 * time.Millisecond):
	}
}
