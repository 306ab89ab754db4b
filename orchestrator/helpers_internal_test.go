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

// startedService starts one orchestrator instance on a bus of its own.
func startedService(t *testing.T) *Service {
	t.Helper()
	b := bustest.New(t)
	s, err := New(b, Config{LeaseTTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	return s
}

// launchRequests stands in for the coordinator: it answers every launch
// request (without forming a team) and sends on the goal ids asked for.
func launchRequests(t *testing.T, s *Service) <-chan string {
	t.Helper()
	subject, err := s.subj.AgentLaunchSubject(s.cfg.Coordinator)
	if err != nil {
		t.Fatal(err)
	}
	launches := make(chan string, 8)
	sub, err := s.b.Conn().Subscribe(subject, func(m *nats.Msg) {
		var req protocol.LaunchRequest
		if err := json.Unmarshal(m.Data, &req); err != nil {
			t.Errorf("launch request %s: %v", m.Data, err)
			return
		}
		launches <- req.GoalID
		_ = m.Respond(bus.Encode(protocol.LaunchReply{}))
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return launches
}
