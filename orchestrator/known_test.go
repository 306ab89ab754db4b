package orchestrator_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/orchestrator"
)

// The referee writes a goal's record from the copy it kept of its last
// write; when someone else wrote the record since (here the test, as another
// instance would), the refused write reads the record and nothing that
// other write did is lost.
func TestGoalWriteAfterAnotherWriterKeepsItsChange(t *testing.T) {
	w := newWorld(t, orchestrator.Config{})
	startPingPong(t, w, pingPong)
	var sub protocol.SubmitReply
	if err := requestJSON(t, w, "goal.submit", protocol.GoalRequest{Goal: "chat a long time", Launcher: "ping", MaxTurns: 1000}, &sub); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "goal running", func() bool {
		var st protocol.GoalStatus
		_ = requestJSON(t, w, "goal.get", protocol.GoalIDRequest{GoalID: sub.GoalID}, &st)
		return st.Status == protocol.GoalRunning
	})
	kv, err := w.b.KV(t.Context(), bus.BucketGoals)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(t.Context(), sub.GoalID)
	if err != nil {
		t.Fatal(err)
	}
	var st protocol.GoalStatus
	if err := json.Unmarshal(e.Value(), &st); err != nil {
		t.Fatal(err)
	}
	st.Children = append(st.Children, "gother")
	if _, err := kv.Update(t.Context(), sub.GoalID, bus.Encode(st), e.Revision()); err != nil {
		t.Fatal(err)
	}
	var cancelled protocol.GoalStatus
	if err := requestJSON(t, w, "goal.cancel", protocol.GoalIDRequest{GoalID: sub.GoalID}, &cancelled); err != nil {
		t.Fatal(err)
	}
	e, err = kv.Get(t.Context(), sub.GoalID)
	if err != nil {
		t.Fatal(err)
	}
	var final protocol.GoalStatus
	if err := json.Unmarshal(e.Value(), &final); err != nil {
		t.Fatal(err)
	}
	if final.Status != protocol.GoalCancelled || !slices.Contains(final.Children, "gother") {
		t.Fatalf("record after cancel: status %s, children %v; want cancelled with gother kept", final.Status, final.Children)
	}
}
