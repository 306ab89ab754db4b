// Package stack starts, for the examples' tests, what `ioa serve` runs: an
// embedded NATS server on a random loopback port, the registry, the
// orchestrator and the built-in coordinator with the rules policy.
package stack

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/agentkit/rules"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/orchestrator"
	"github.com/ioa-nats/ioa/registry"
)

// Stack is a running server stack.
type Stack struct {
	Bus *bus.Bus
	// URL is where a separate client (another process, or an example's
	// own connection) reaches the server.
	URL string
}

// Start runs the stack until the test ends.
func Start(t testing.TB) *Stack {
	t.Helper()
	ctx := t.Context()
	b, err := bus.Start(ctx, bus.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatalf("stack: bus: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	reg, err := registry.New(b, registry.Config{})
	if err != nil {
		t.Fatalf("stack: registry: %v", err)
	}
	if err := reg.Start(ctx); err != nil {
		t.Fatalf("stack: registry: %v", err)
	}
	t.Cleanup(func() { _ = reg.Shutdown(context.Background()) })
	orch, err := orchestrator.New(b, orchestrator.Config{SpeakerTimeout: 10 * time.Second, TaskTimeout: 20 * time.Second})
	if err != nil {
		t.Fatalf("stack: orchestrator: %v", err)
	}
	if err := orch.Start(ctx); err != nil {
		t.Fatalf("stack: orchestrator: %v", err)
	}
	t.Cleanup(func() { _ = orch.Shutdown(context.Background()) })

	nc, err := b.NewConn("coordinator")
	if err != nil {
		t.Fatalf("stack: %v", err)
	}
	rt, err := agentkit.NewRuntime(nc, b.Subjects(), []agentkit.Agent{orchestrator.Coordinator("coordinator", rules.New(rules.Config{}))})
	if err != nil {
		t.Fatalf("stack: coordinator: %v", err)
	}
	rctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- rt.Run(rctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("stack: coordinator: %v", err)
		}
	})
	s := &Stack{Bus: b, URL: b.ClientURL()}
	s.WaitOnline(t, "coordinator")
	return s
}

// WaitOnline returns once the registry lists every name as online, and
// fails the test after 20 seconds.
func (s *Stack) WaitOnline(t testing.TB, names ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for _, n := range names {
		var err error
		for {
			var info protocol.AgentInfo
			err = bus.Request(ctx, s.Bus.Conn(), s.Bus.Subjects().Registry(bus.RegistryGet), protocol.NameRequest{Name: n}, &info)
			if err == nil && info.Online {
				break
			}
			if err == nil {
				err = errors.New("listed offline")
			}
			select {
			case <-ctx.Done():
				t.Fatalf("stack: agent %s did not come online: %v", n, err)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
}

// Submit submits a goal, waits for it to end and returns its result.
func (s *Stack) Submit(t testing.TB, req protocol.GoalRequest) protocol.GoalResult {
	t.Helper()
	req.Wait = true
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Second)
	defer cancel()
	var res protocol.GoalResult
	if err := bus.Request(ctx, s.Bus.Conn(), s.Bus.Subjects().Goal(bus.GoalSubmit), req, &res); err != nil {
		t.Fatalf("stack: submit %q: %v", req.Goal, err)
	}
	return res
}
