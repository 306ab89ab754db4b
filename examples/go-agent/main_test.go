package main

import (
	"context"
	"strings"
	"testing"

	"github.com/ioa-nats/ioa/agentkit"
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

// TestReverse: the worker takes the quoted text however it is quoted, and
// answers the palindrome check its card offers (it used to reverse the
// text and call that done).
func TestReverse(t *testing.T) {
	for desc, want := range map[string]string{
		"Spell 'stressed' backwards.":                        "'stressed' reversed is 'desserts'",
		`Reverse "don't panic"`:                              `'don't panic' reversed is 'cinap t'nod'`,
		"Don't reverse 'abc', reverse nothing":               "'abc' reversed is 'cba'",
		`Is "A man, a plan, a canal: Panama" a palindrome?`:  "'A man, a plan, a canal: Panama' is a palindrome",
		"Check whether 'agents' is a palindrome":             "'agents' is not a palindrome",
		"reverse abc\n\nResults so far:\n- t1: 'xyz' is ...": "'reverse abc' reversed is 'cba esrever'",
	} {
		res, err := reverse(t.Context(), agentkit.Task{Task: protocol.Task{TaskDesc: desc}})
		if err != nil || res.Conclusion != want {
			t.Errorf("reverse(%q) = %q, %v; want %q", desc, res.Conclusion, err, want)
		}
	}
}
