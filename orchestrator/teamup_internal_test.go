package orchestrator

import (
	"errors"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
)

// Why a team-up was refused is kept for the reason of the goal's launch,
// which drops it when it returns; a refusal with no launch left to read it
// (a late retry) is dropped when the goal ends, and one after the end or
// for an unknown goal is not kept at all.
func TestRefusedTeamupIsForgottenWhenTheGoalEnds(t *testing.T) {
	s := startedService(t)
	id := "grefused1"
	for deadline := time.Now().Add(10 * time.Second); !s.mine(id); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the only instance does not own goal %s", id)
		}
	}
	// A goal forming whose launch this instance watches, with no launch in
	// flight, as after its launch returned.
	s.watchLaunch(id)
	st := protocol.GoalStatus{GoalID: id, Status: protocol.GoalForming, Goal: "Multiply 2 x 3.", Launcher: s.cfg.Coordinator,
		CreatedAt: time.Now().UTC(), Deadline: time.Now().Add(time.Minute)}
	if _, err := s.goals.Create(t.Context(), id, bus.Encode(st)); err != nil {
		t.Fatal(err)
	}
	err := bus.Request(t.Context(), s.b.Conn(), s.subj.Teamup(), protocol.TeamupRequest{GoalID: id, Launcher: "intruder"}, nil)
	if !errors.Is(err, protocol.ErrForbidden) {
		t.Fatalf("team-up by another than the launcher: %v, want forbidden", err)
	}
	if _, ok := s.teamupFailed.Load(id); !ok {
		t.Fatal("the refused team-up was not kept for the launch's reason")
	}
	s.cancelGoal(t.Context(), id, protocol.GoalCancelled, "test")
	if st, err := s.readGoal(t.Context(), id); err != nil || st.Status != protocol.GoalCancelled {
		t.Fatalf("goal = %s, %v; want cancelled", st.Status, err)
	}
	if v, ok := s.teamupFailed.Load(id); ok {
		t.Errorf("the ended goal's refused team-up is still kept: %q", v)
	}
	// A team-up refused after the end, or for a goal nobody submitted, is
	// not kept either: no launch is left to read it.
	for _, g := range []string{id, "gunknown1"} {
		if err := bus.Request(t.Context(), s.b.Conn(), s.subj.Teamup(), protocol.TeamupRequest{GoalID: g, Launcher: "intruder"}, nil); err == nil {
			t.Fatalf("team-up of %s by an intruder was accepted", g)
		}
		if v, ok := s.teamupFailed.Load(g); ok {
			t.Errorf("a team-up refused for %s with no launch here is kept: %q", g, v)
		}
	}
}
