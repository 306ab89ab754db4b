package agentkit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
)

// ErrStarted is returned by a second call to Run.
var ErrStarted = errors.New("agentkit: runtime already started")

// defaultConcurrency bounds an agent's tasks when neither its card nor an
// option says otherwise.
const defaultConcurrency = 4

// Runtime hosts agents on one NATS connection. Create it with NewRuntime and
// call Run once.
type Runtime struct {
	nc      *nats.Conn
	subj    bus.Subjects
	opts    options
	agents  []*agentState
	started atomic.Bool
	wg      sync.WaitGroup // every goroutine the runtime starts

	unregistered atomic.Int32  // agents not yet registered once
	ready        chan struct{} // closed when every agent has registered
}

// Ready is closed once every hosted agent has been registered with the
// registry, so that goals can find them; a program embedding the runtime
// waits on it before submitting work. A registration is answered once the
// registry instance that took it shows the card online and in its search
// index (for up to 2 s), so with one registry instance a goal submitted
// after Ready finds every hosted agent. (An orchestrator given the names in
// orchestrator.Config.Expect opens its goal service only then, by itself.)
func (r *Runtime) Ready() <-chan struct{} { return r.ready }

// registered notes an agent's first registration.
func (r *Runtime) registered() {
	if r.unregistered.Add(-1) == 0 {
		close(r.ready)
	}
}

// agentState is what the runtime keeps per hosted agent. It is immutable
// after NewRuntime except for what the goroutines own.
type agentState struct {
	rt *Runtime
	Agent
	log      *slog.Logger
	sem      chan struct{} // task concurrency
	launches chan struct{} // concurrent launch requests
	searcher Searcher
}

// NewRuntime checks the agents and options and returns a Runtime that is not
// yet running. The caller keeps ownership of nc.
func NewRuntime(nc *nats.Conn, subjects bus.Subjects, agents []Agent, opts ...Option) (*Runtime, error) {
	if nc == nil {
		return nil, errors.New("agentkit: nil NATS connection")
	}
	if subjects.Prefix() == "" {
		return nil, errors.New("agentkit: subjects have no prefix (use bus.NewSubjects or Bus.Subjects)")
	}
	if len(agents) == 0 {
		return nil, errors.New("agentkit: no agents")
	}
	o := defaultOptions()
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	r := &Runtime{nc: nc, subj: subjects, opts: o}
	// This process's incarnation: a new one on every start tells the
	// referee that work held by an earlier process is to be handed back.
	incarnation := nuid.Next()
	seen := map[string]bool{}
	for i, a := range agents {
		if a.Card.Incarnation == "" {
			a.Card.Incarnation = incarnation
		}
		// agentkit accepts every invitation, so its cards say so and
		// team-ups skip the round trip (invitations are still answered,
		// for an orchestrator that sends them anyway).
		a.Card.AutoJoin = true
		if err := a.Card.Validate(); err != nil {
			return nil, fmt.Errorf("agentkit: agent %d: %w", i, err)
		}
		if (a.Worker == nil || a.Policy == nil) && !a.Person() {
			return nil, fmt.Errorf("agentkit: agent %s: worker and policy are required (only a card of type human may have neither)", a.Card.Name)
		}
		if seen[a.Card.Name] {
			return nil, fmt.Errorf("agentkit: agent %s appears twice", a.Card.Name)
		}
		seen[a.Card.Name] = true
		n := o.maxConcurrency
		if n == 0 {
			n = a.Card.MaxConcurrency
		}
		if n <= 0 {
			n = defaultConcurrency
		}
		r.agents = append(r.agents, &agentState{
			rt:       r,
			Agent:    a,
			log:      o.log.With("agent", a.Card.Name),
			sem:      make(chan struct{}, n),
			launches: make(chan struct{}, 256),
			searcher: &natsSearcher{rt: r},
		})
	}
	r.ready = make(chan struct{})
	r.unregistered.Store(int32(len(r.agents)))
	return r, nil
}

// Run serves the agents until ctx is cancelled, then deregisters them and
// returns nil once every goroutine it started has ended. It returns an error
// at once if it cannot subscribe.
func (r *Runtime) Run(ctx context.Context) error {
	if !r.started.CompareAndSwap(false, true) {
		return ErrStarted
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var subs []*nats.Subscription
	defer func() {
		for _, s := range subs {
			_ = s.Unsubscribe()
		}
		cancel()
		r.wg.Wait()
	}()
	for _, a := range r.agents {
		s, err := a.start(ctx)
		subs = append(subs, s...)
		if err != nil {
			return err
		}
	}
	<-ctx.Done()
	return nil
}

// start subscribes an agent's subjects and starts its goroutines: the
// inbox router, the request server and the registrar.
func (a *agentState) start(ctx context.Context) ([]*nats.Subscription, error) {
	r := a.rt
	name := a.Card.Name
	inboxes, err := r.subj.AgentInboxes(name)
	if err != nil {
		return nil, err
	}
	invite, err := r.subj.AgentInviteSubject(name)
	if err != nil {
		return nil, err
	}
	launch, err := r.subj.AgentLaunchSubject(name)
	if err != nil {
		return nil, err
	}
	inCh := make(chan *nats.Msg, 1024) // a busy launcher is in many chats
	reqCh := make(chan *nats.Msg, 64)
	var subs []*nats.Subscription
	for _, s := range []struct {
		subject, queue string
		ch             chan *nats.Msg
	}{
		{inboxes, "", inCh},
		{invite, "", reqCh},
		// Replicas of one agent share launches: one chat per goal.
		{launch, "ioa-agent-" + name, reqCh},
	} {
		sub, err := r.nc.ChanQueueSubscribe(s.subject, s.queue, s.ch)
		if err != nil {
			return subs, fmt.Errorf("agentkit: %s: subscribe %s: %w", name, s.subject, err)
		}
		subs = append(subs, sub)
	}
	// The subscriptions must be in place before the registry can hand our
	// name to anyone.
	if err := r.nc.FlushTimeout(r.opts.requestTimeout); err != nil {
		return subs, fmt.Errorf("agentkit: %s: flush: %w", name, err)
	}
	rt := newRouter(a)
	r.wg.Go(func() { rt.run(ctx, inCh) })
	r.wg.Go(func() { a.serveRequests(ctx, reqCh, rt) })
	r.wg.Go(func() { a.registrar(ctx, rt) })
	return subs, nil
}

// The chat a message belongs to, as far as the inbox subject says.
func (a *agentState) commOf(subject string) (string, bool) {
	as, err := a.rt.subj.ParseAgent(subject)
	if err != nil || as.Name != a.Card.Name || as.Kind != bus.AgentIn {
		return "", false
	}
	return as.CommID, true
}

// isProtocolError reports whether err is a reply from a service rather than
// a transport failure.
func isProtocolError(err error) bool {
	var pe *protocol.Error
	return errors.As(err, &pe)
}
