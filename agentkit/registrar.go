package agentkit

import (
	"context"
	"errors"
	"time"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/internal/backoff"
)

const (
	registerBackoffLo  = 100 * time.Millisecond
	defaultHeartbeat   = 10 * time.Second
	minHeartbeat       = 50 * time.Millisecond
	deregisterDeadline = 2 * time.Second
)

// registrar keeps the agent's card in the registry: it registers (retrying
// until the registry answers, since it may start after the agent),
// heartbeats at a third of the announced ttl, registers again when the
// registry has forgotten the agent, and deregisters on a clean stop.
func (a *agentState) registrar(ctx context.Context, rt *router) {
	if !a.register(ctx) {
		return
	}
	a.rt.registered()
	a.rejoinOpenChats(ctx, rt)
	defer a.deregister(context.WithoutCancel(ctx))
	interval := a.rt.opts.heartbeat
	if interval == 0 {
		interval = defaultHeartbeat
	}
	// A heartbeat at once tells us the ttl.
	t := time.NewTimer(0)
	defer t.Stop()
	warned := "" // the other process's incarnation we last warned of
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ttl, holder, err := a.heartbeat(ctx)
		if err == nil && holder != "" && holder != a.Card.Incarnation && holder != warned {
			// A rolling restart's new process, or a second process by mistake.
			a.log.Warn("another process registered this agent's name since: both get its messages until one stops",
				"incarnation", a.Card.Incarnation, "registered", holder)
			warned = holder
		}
		switch {
		case errors.Is(err, protocol.ErrNotFound):
			a.log.Warn("registry forgot the agent; registering again")
			if !a.register(ctx) {
				return
			}
		case err != nil:
			a.log.Warn("heartbeat failed", "err", err)
		case a.rt.opts.heartbeat == 0 && ttl > 0:
			interval = max(ttl/3, minHeartbeat)
		}
		t.Reset(interval)
	}
}

// register retries with backoff until the registry accepts the card or ctx
// ends; it reports whether the card is registered.
func (a *agentState) register(ctx context.Context) bool {
	pace := backoff.New(registerBackoffLo, a.rt.opts.registerBackoffHi)
	for {
		rctx, cancel := context.WithTimeout(ctx, a.rt.opts.requestTimeout)
		var out protocol.RegisterReply
		err := bus.Request(rctx, a.rt.nc, a.bound(a.rt.subj.Registry(bus.RegistryRegister)), a.Card, &out)
		cancel()
		if err == nil {
			a.log.Info("registered", "revision", out.Revision)
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		// A 4xx means the card itself is wrong; retrying changes nothing
		// quickly, but the registry's rules may change, so keep trying slowly.
		a.log.Warn("register failed; retrying", "err", err, "in", pace.Pause())
		if !pace.Wait(ctx) {
			return false
		}
	}
}

// rejoinOpenChats asks the referee which open chats the agent is in and
// rejoins them: after a restart nothing else would tell the agent about a
// chat that waits on it. No answer (an older or absent orchestrator) is fine.
func (a *agentState) rejoinOpenChats(ctx context.Context, rt *router) {
	subject, err := a.rt.subj.OpenChats(a.Card.Name)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, a.rt.opts.requestTimeout)
	defer cancel()
	var out protocol.OpenChatsReply
	if err := bus.Request(ctx, a.rt.nc, subject, nil, &out); err != nil {
		a.log.Debug("open chats unknown", "err", err)
		return
	}
	for _, comm := range out.Chats {
		if protocol.ValidID(comm) {
			a.log.Info("rejoining an open chat", "comm_id", comm)
			rt.rejoin(comm)
		}
	}
}

// heartbeat tells the registry the agent is alive; it returns the ttl and
// the incarnation the name's card is registered with.
func (a *agentState) heartbeat(ctx context.Context) (time.Duration, string, error) {
	ctx, cancel := context.WithTimeout(ctx, a.rt.opts.requestTimeout)
	defer cancel()
	var out protocol.HeartbeatReply
	err := bus.Request(ctx, a.rt.nc, a.bound(a.rt.subj.Registry(bus.RegistryHeartbeat)), protocol.NameRequest{Name: a.Card.Name}, &out)
	return out.TTL.D(), out.Incarnation, err
}

func (a *agentState) deregister(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, min(deregisterDeadline, a.rt.opts.requestTimeout))
	defer cancel()
	// Our incarnation: a replacement that registered the name meanwhile (a
	// rolling restart) keeps it.
	req := protocol.NameRequest{Name: a.Card.Name, Incarnation: a.Card.Incarnation}
	err := bus.Request(ctx, a.rt.nc, a.bound(a.rt.subj.Registry(bus.RegistryDeregister)), req, nil)
	switch {
	case errors.Is(err, protocol.ErrConflict):
		a.log.Info("not deregistered: another process registered the name since", "err", err)
	case err != nil && !errors.Is(err, protocol.ErrNotFound):
		a.log.Warn("deregister failed", "err", err)
	default:
		a.log.Info("deregistered")
	}
}

// bound is the identity-bound form of an endpoint's subject for this agent
// (<subject>.<name>): the only form a secure server lets the agent's
// credentials use, and the one that tells the service who asks. The card's
// name was validated when the runtime started.
func (a *agentState) bound(subject string) string {
	s, err := a.rt.subj.As(subject, a.Card.Name)
	if err != nil {
		panic(err) // unreachable: NewRuntime refuses invalid names
	}
	return s
}
