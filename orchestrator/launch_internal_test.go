package orchestrator

import (
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit/protocol"
)

// A goal recorded as forming is launched by the instance that recorded it,
// even when its partition was given away in between: neither the forward
// nor the new owner launches a goal that is no longer accepted, so without
// this it stayed forming for good.
func TestGoalRecordedFormingIsLaunchedAfterItsPartitionMoved(t *testing.T) {
	s := startedService(t)
	for deadline := time.Now().Add(10 * time.Second); len(s.Partitions()) < s.cfg.Partitions; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the only instance holds %d of %d partitions", len(s.Partitions()), s.cfg.Partitions)
		}
	}
	launches := launchRequests(t, s)
	// The partition is being given away, as a rebalance does, between the
	// goal's record (forming) and its launch.
	id := "gmoved1"
	s.lease.mu.Lock()
	s.lease.releasing[partitionOf(id, s.cfg.Partitions)] = true
	s.lease.mu.Unlock()
	if s.mine(id) {
		t.Fatal("the partition being released is still this instance's")
	}
	s.startLaunch(t.Context(), protocol.GoalStatus{GoalID: id, Status: protocol.GoalForming, Goal: "Multiply 2 x 3.",
		Launcher: s.cfg.Coordinator, Deadline: time.Now().Add(time.Minute)})
	select {
	case got := <-launches:
		if got != id {
			t.Errorf("launched %s, want %s", got, id)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the goal recorded as forming was never launched")
	}
}
