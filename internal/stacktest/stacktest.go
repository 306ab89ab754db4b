// Package stacktest starts, for tests, what `ioa serve` runs: a real
// embedded NATS server (on a random loopback port), the registry, the
// orchestrator and, if asked, the built-in coordinator and agents, all
// stopped when the test ends.
package stacktest

import (
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/agentkit/rules"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/bus/auth"
	"github.com/ioa-nats/ioa/bus/bustest"
	"github.com/ioa-nats/ioa/orchestrator"
	"github.com/ioa-nats/ioa/registry"
)

// Options choose what runs; the zero value runs NATS, the registry and the
// orchestrator with their defaults, and their warnings go to the test's log
// (Logger) unless their Config names a logger.
type Options struct {
	Orchestrator orchestrator.Config
	Registry     registry.Config
	// Coordinator also runs the built-in launcher with the rules policy.
	Coordinator bool
	// Bus adjusts the embedded server's configuration.
	Bus func(*bus.Config)
	// Secure requires credentials on the listener, as `ioa serve` does by
	// default (see Stack.Creds and Stack.Dial).
	Secure bool
}

// Stack is a running runtime.
type Stack struct {
	Bus *bus.Bus
	// URL is where another process or connection reaches the server.
	URL string
	// log is where the services and the agents RunAgents hosts warn.
	log *slog.Logger
}

// Start runs the stack until the test ends.
func Start(t testing.TB, o Options) *Stack {
	t.Helper()
	var adjust []func(*bus.Config)
	if o.Secure {
		adjust = append(adjust, func(c *bus.Config) { c.Secure = true })
	}
	if o.Bus != nil {
		adjust = append(adjust, o.Bus)
	}
	return OnBus(t, bustest.New(t, adjust...), o)
}

// OnBus runs the services (and the coordinator, if asked) on a bus the
// test started itself, such as one node of a cluster.
func OnBus(t testing.TB, b *bus.Bus, o Options) *Stack {
	t.Helper()
	ctx := t.Context()
	log := Logger(t)
	if o.Registry.Logger == nil {
		o.Registry.Logger = log
	}
	if o.Orchestrator.Logger == nil {
		o.Orchestrator.Logger = log
	}
	reg, err := registry.New(b, o.Registry)
	if err != nil {
		t.Fatalf("stacktest: registry: %v", err)
	}
	if err := reg.Start(ctx); err != nil {
		t.Fatalf("stacktest: registry: %v", err)
	}
	t.Cleanup(func() { _ = reg.Shutdown(context.Background()) })
	orch, err := orchestrator.New(b, o.Orchestrator)
	if err != nil {
		t.Fatalf("stacktest: orchestrator: %v", err)
	}
	if err := orch.Start(ctx); err != nil {
		t.Fatalf("stacktest: orchestrator: %v", err)
	}
	t.Cleanup(func() { _ = orch.Shutdown(context.Background()) })
	s := &Stack{Bus: b, URL: b.ClientURL(), log: log}
	if o.Coordinator {
		name := o.Orchestrator.Coordinator
		if name == "" {
			name = "coordinator"
		}
		s.RunAgents(t, nil, orchestrator.Coordinator(name, rules.New(rules.Config{})))
	}
	return s
}

// RunAgents hosts agents in an agentkit runtime on their own connection
// until the test ends, and returns once the registry lists them online.
func (s *Stack) RunAgents(t testing.TB, opts []agentkit.Option, agents ...agentkit.Agent) {
	t.Helper()
	nc, err := s.Bus.NewConn("agents")
	if err != nil {
		t.Fatalf("stacktest: %v", err)
	}
	s.RunAgentsOn(t, nc, opts, agents...)
}

// RunAgentsOn is RunAgents on a connection of the test's own, such as one
// with an agent's credentials (Dial).
func (s *Stack) RunAgentsOn(t testing.TB, nc *nats.Conn, opts []agentkit.Option, agents ...agentkit.Agent) {
	t.Helper()
	// The test's own options come after the default logger, so they win.
	opts = append([]agentkit.Option{agentkit.WithLogger(s.log)}, opts...)
	rt, err := agentkit.NewRuntime(nc, s.Bus.Subjects(), agents, opts...)
	if err != nil {
		t.Fatalf("stacktest: runtime: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rt.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("stacktest: runtime: %v", err)
		}
	})
	names := make([]string, len(agents))
	for i, a := range agents {
		names[i] = a.Card.Name
	}
	s.WaitOnline(t, names...)
}

// WaitOnline returns once the registry lists every name as online, and
// fails the test after 20 seconds. It asks registry.list, which answers from
// the registry's view, and a card is in the view only once it is in the
// search index: registry.get also reads a card the view has not applied yet
// straight from KV, so a goal submitted on its word could search before the
// card was searchable (a CI run found one team formed without its agent).
func (s *Stack) WaitOnline(t testing.TB, names ...string) {
	t.Helper()
	for _, n := range names {
		WaitFor(t, "agent "+n+" online", func() bool { return s.listedOnline(t, n) })
	}
}

// listedOnline reports whether registry.list, page by page, has name online.
func (s *Stack) listedOnline(t testing.TB, name string) bool {
	const page = registry.MaxListLimit
	for offset := 0; ; offset += page {
		var list protocol.ListReply
		if err := s.Request(t, s.Bus.Subjects().Registry(bus.RegistryList), protocol.ListRequest{OnlineOnly: true, Offset: offset, Limit: page}, &list); err != nil {
			return false
		}
		if slices.ContainsFunc(list.Agents, func(a protocol.AgentInfo) bool { return a.Name == name }) {
			return true
		}
		if len(list.Agents) < page {
			return false
		}
	}
}

// Request sends a request on the stack's main connection.
func (s *Stack) Request(t testing.TB, subject string, in, out any) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	return bus.Request(ctx, s.Bus.Conn(), subject, in, out)
}

// Submit submits a goal with wait, and returns its result; the test fails
// if no result comes within 40 seconds.
func (s *Stack) Submit(t testing.TB, req protocol.GoalRequest) protocol.GoalResult {
	t.Helper()
	return s.SubmitWithin(t, req, 40*time.Second)
}

// SubmitWithin is Submit with a deadline of its own.
func (s *Stack) SubmitWithin(t testing.TB, req protocol.GoalRequest, within time.Duration) protocol.GoalResult {
	t.Helper()
	req.Wait = true
	ctx, cancel := context.WithTimeout(t.Context(), within)
	defer cancel()
	var res protocol.GoalResult
	if err := bus.Request(ctx, s.Bus.Conn(), s.Bus.Subjects().Goal(bus.GoalSubmit), req, &res); err != nil {
		t.Fatalf("stacktest: submit %q: %v", req.Goal, err)
	}
	return res
}

// WaitFor polls cond until it holds, and fails the test after 20 seconds.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Creds issues credentials for an identity of a secure stack (Options.Bus
// setting Secure) and returns the .creds file.
func (s *Stack) Creds(t testing.TB, name string, role auth.Role) string {
	t.Helper()
	a, err := auth.Load(bus.AuthDir(s.Bus.Config().DataDir))
	if err != nil {
		t.Fatalf("stacktest: %v (is the stack secure?)", err)
	}
	file := filepath.Join(t.TempDir(), name+".creds")
	if err := a.WriteCreds(file, auth.Identity{Name: name, Role: role}, s.Bus.Subjects().Prefix()); err != nil {
		t.Fatalf("stacktest: creds: %v", err)
	}
	return file
}

// Dial connects to the stack's listener over TCP as the identity of creds
// (with its own reply inboxes), closed when the test ends. The server's
// asynchronous errors, such as permission violations, arrive on errs.
func (s *Stack) Dial(t testing.TB, creds string) (nc *nats.Conn, errs <-chan error) {
	t.Helper()
	ch := make(chan error, 64)
	opts := []nats.Option{nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		select {
		case ch <- err:
		default:
		}
	})}
	copts, err := agentkit.CredsOptions(creds)
	if err != nil {
		t.Fatalf("stacktest: %v", err)
	}
	opts = append(opts, copts...)
	nc, err = nats.Connect(s.URL, opts...)
	if err != nil {
		t.Fatalf("stacktest: connect: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc, ch
}
