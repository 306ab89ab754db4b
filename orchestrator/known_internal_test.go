package orchestrator

import (
	"reflect"
	"testing"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
)

func runningGoal() protocol.GoalStatus {
	return protocol.GoalStatus{
		GoalID: "g0123456789abc", Goal: "Count the apples. Paint the fence. Then write a summary of the results.",
		Status: protocol.GoalRunning, Launcher: "coordinator", CommID: "c0123456789abc",
		Team:     []string{"coordinator", "bench-counter", "bench-painter", "bench-writer"},
		Children: []string{"g1", "g2"}, MaxTurns: 20, MaxDepth: 3,
	}
}

// Each get decodes a copy of its own: what a caller changes in one copy is
// not in the next, and a copy equals what was put.
func TestKnownGoalsGetReturnsIndependentCopies(t *testing.T) {
	var k knownGoals
	st := runningGoal()
	k.put(st.GoalID, st, bus.Encode(st), 7)
	a, rev, ok := k.get(st.GoalID)
	if !ok || rev != 7 {
		t.Fatalf("get = rev %d, ok %v; want 7, true", rev, ok)
	}
	if !reflect.DeepEqual(a, st) {
		t.Fatalf("get = %+v\nwant %+v", a, st)
	}
	a.Team[0], a.Children = "someone-else", append(a.Children, "g3")
	b, _, _ := k.get(st.GoalID)
	if !reflect.DeepEqual(b, st) {
		t.Fatalf("a change to one copy reached the next: %+v", b)
	}
	if _, _, ok := k.get("gunknown"); ok {
		t.Fatal("get of a goal never put reported it known")
	}
	k.put("gbad", st, []byte(`{"goal_id":`), 1)
	if _, _, ok := k.get("gbad"); ok {
		t.Fatal("a record that does not decode was reported known")
	}
}

// The referee reads the copy it kept several times a goal (team-up, every
// record write): go test -bench KnownGoals ./orchestrator.
func BenchmarkKnownGoalsGet(b *testing.B) {
	var k knownGoals
	st := runningGoal()
	k.put(st.GoalID, st, bus.Encode(st), 1)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, ok := k.get(st.GoalID); !ok {
			b.Fatal("not known")
		}
	}
}
