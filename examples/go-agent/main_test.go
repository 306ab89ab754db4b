package main

import (
	"context"
	"strings"
	"testing"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus/auth"
	"github.com/ioa-nats/ioa/internal/stacktest"
)

// TestJoinServer runs the agent against a secure server stack over TCP
// with its own credentials, as it would run against `ioa serve`, and submits
// a goal that names no team: the coordinator must find the agent in the
// registry by meaning.
func TestJoinServer(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{Coordinator: true, Secure: true})
	creds := s.Creds(t, Card.Name, auth.Agent)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- run(ctx, s.URL, creds) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	s.WaitOnline(t, Card.Name)

	res := s.Submit(t, protocol.GoalRequest{Goal: "Spell 'stressed' backwards."})
	if res.Status != protocol.GoalConcluded {
		t.Fatalf("status %s (%s), conclusion:\n%s", res.Status, res.Reason, res.Conclusion)
	}
	if want := "'stressed' reversed is 'desserts'"; !strings.Contains(res.Conclusion, want) {
		t.Errorf("conclusion:\n%s\nwant it to contain %q", res.Conclusion, want)
	}
}
