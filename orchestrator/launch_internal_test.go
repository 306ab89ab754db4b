package orchestrator

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/bus/bustest"
)

// A goal recorded as forming is launched by the instance that recorded it,
// even when its partition was given away in between: neither the forward
// nor the new owner launches a goal that is no longer accepted, so without
// this it stayed forming for good.
func TestGoalRecordedFormingIsLaunchedAfterItsPartitionMoved(t *testing.T) {
	b := bustest.New(t)
	s, err := New(b, Config{LeaseTTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	for deadline := time.Now().Add(10 * time.Second); len(s.Partitions()) < s.cfg.Partitions; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the only instance holds %d of %d partitions", len(s.Partitions()), s.cfg.Partitions)
		}
	}
	launches := make(chan protocol.LaunchRequest, 4)
	subject, err := b.Subjects().AgentLaunchSubject(s.cfg.Coordinator)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := b.Conn().Subscribe(subject, func(m *nats.Msg) {
		var req protocol.LaunchRequest
		if err := json.Unmarshal(m.Data, &req); err != nil {
			t.Errorf("launch request %s: %v", m.Data, err)
			return
		}
		launches <- req
		_ = m.Respond(bus.Encode(protocol.LaunchReply{}))
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
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
	case req := <-launches:
		if req.GoalID != id {
			t.Errorf("launched %s, want %s", req.GoalID, id)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the goal recorded as forming was never launched")
	}
}
