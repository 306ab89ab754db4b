package agentkit

import (
	"context"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/telemetry"
	"github.com/nats-io/nats.go"
)

// maxEnded bounds how many ended chats an agent remembers, so that late
// messages of a concluded chat do not start a new replica.
const maxEnded = 4096

// router owns the map of an agent's chats: it hands each inbox message to
// its chat's goroutine, starting one for a chat it has not seen.
type router struct {
	a       *agentState
	invites chan string // comm ids of chats the agent was invited to
	rejoins chan string
	chats   map[string]*chatLoop
	ended   map[string]struct{}
	order   []string // ended, oldest first
	pruneAt int      // prune when chats reaches this many
}

func newRouter(a *agentState) *router {
	return &router{
		a:       a,
		invites: make(chan string, 64),
		rejoins: make(chan string, 256),
		chats:   map[string]*chatLoop{},
		ended:   map[string]struct{}{},
	}
}

// invited tells the router about a chat before its first message. It never
// blocks: an invitation that does not fit is still served by the start
// message that follows.
func (rt *router) invited(inv protocol.InviteRequest) {
	select {
	case rt.invites <- inv.CommID:
	default:
	}
}

// rejoin tells the router about an open chat the agent is a member of but
// may have missed (it restarted): its loop reads the history at once.
func (rt *router) rejoin(comm string) {
	select {
	case rt.rejoins <- comm:
	default:
	}
}

func (rt *router) run(ctx context.Context, in <-chan *nats.Msg) {
	for {
		select {
		case <-ctx.Done():
			return
		case comm := <-rt.invites:
			rt.loop(ctx, comm)
		case comm := <-rt.rejoins:
			if l := rt.loop(ctx, comm); l != nil {
				l.kick()
			}
		case nm := <-in:
			rt.deliver(ctx, nm)
		}
	}
}

func (rt *router) deliver(ctx context.Context, nm *nats.Msg) {
	log := rt.a.log
	comm, ok := rt.a.commOf(nm.Subject)
	if !ok {
		log.Warn("dropped inbox message on an unexpected subject", "subject", nm.Subject)
		return
	}
	var m protocol.AgentMessage
	if err := rt.a.rt.opts.codec.DecodeLogged(nm.Data, &m); err != nil {
		log.Warn("dropped malformed inbox message", "comm_id", comm, "err", err)
		return
	}
	if m.CommID != comm || m.Seq == 0 {
		log.Warn("dropped inbox message for another chat or without seq", "comm_id", comm, "msg_comm_id", m.CommID, "seq", m.Seq)
		return
	}
	l := rt.loop(ctx, comm)
	if l == nil {
		return
	}
	if len(nm.Header) > 0 && telemetry.Enabled() {
		l.setTraceParent(nm.Header)
	}
	select {
	case l.in <- &m:
	default:
		// The chat's goroutine is busy (a slow policy); it finds the gap
		// and reads the message from history.
		log.Warn("chat queue full; message left to history", "comm_id", comm, "seq", m.Seq)
	}
}

// loop returns the running loop of a chat, starting one if needed; nil if
// the chat has ended.
func (rt *router) loop(ctx context.Context, comm string) *chatLoop {
	if _, ok := rt.ended[comm]; ok {
		return nil
	}
	if l, ok := rt.chats[comm]; ok {
		select {
		case <-l.done:
			rt.forget(comm, l)
			if _, ok := rt.ended[comm]; ok {
				return nil
			}
		default:
			return l
		}
	}
	// Walking every chat on each new one made opening n chats O(n²); walking
	// once the map has doubled keeps it O(1) per chat, amortised. A loop
	// that ended meanwhile stays in the map until then, and is still found
	// done above when its chat hears from it again.
	if len(rt.chats) >= rt.pruneAt {
		rt.prune()
		rt.pruneAt = max(2*len(rt.chats), 64)
	}
	l := newChatLoop(rt.a, comm)
	rt.chats[comm] = l
	rt.a.rt.wg.Go(func() { l.run(ctx) })
	return l
}

// prune moves loops that have ended to the ended set.
func (rt *router) prune() {
	for comm, l := range rt.chats {
		select {
		case <-l.done:
			rt.forget(comm, l)
		default:
		}
	}
}

// forget drops an ended loop. Only a chat that concluded is remembered as
// ended: a loop that gave up on a chat that had not started yet (unknown to
// the referee so far) must not make the agent deaf to it.
func (rt *router) forget(comm string, l *chatLoop) {
	delete(rt.chats, comm)
	if !l.concluded.Load() {
		return
	}
	rt.ended[comm] = struct{}{}
	rt.order = append(rt.order, comm)
	if len(rt.order) > maxEnded {
		delete(rt.ended, rt.order[0])
		rt.order = rt.order[1:]
	}
}
