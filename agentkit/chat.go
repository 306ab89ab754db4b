package agentkit

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/telemetry"
	"github.com/nats-io/nats.go"
)

// chatQueue is the inbox messages a chat's loop may be behind by before
// the rest are left to its history: a chat gets one message a turn and one
// per task result, and the buffer is allocated for every chat of every agent
// (2 KiB at 256).
const (
	chatQueue    = 64
	historyPage  = 100
	historyPages = 1000 // bounds one catch-up at 100k messages
	gapRetry     = time.Second
)

// chatLoop is the goroutine that owns one chat's replica for one agent. It
// applies the log strictly in seq order, starts the agent's tasks, and speaks
// when the replica gives the agent the turn. Nothing else touches its fields,
// except concluded and done, which the router reads after the loop ends.
type chatLoop struct {
	a         *agentState
	comm      string
	log       *slog.Logger
	in        chan *protocol.AgentMessage // pointers: a queue of values would cost ~100 KiB per chat
	done      chan struct{}
	concluded atomic.Bool

	chat     protocol.Chat
	pending  map[uint64]*protocol.AgentMessage // arrived ahead of a gap; nil until one does
	team     []protocol.AgentCard
	recent   []*protocol.AgentMessage // the last recentMessages applied, never changed once applied
	started  map[string]int           // task id -> attempt this process has started
	spoken   bool                     // a move was sent (or settled) for spokeSeq
	spokeSeq uint64
	gone     bool // the referee does not know the chat, or we are not in it
	kicks    chan struct{}

	// traceParent is the goal's W3C traceparent, from the header of the
	// inbox messages (set by the router, read by the loop).
	traceParent atomic.Pointer[string]
}

// setTraceParent keeps the traceparent header of an inbox message.
func (l *chatLoop) setTraceParent(h nats.Header) {
	v := telemetry.HeaderCarrier(h).Get(telemetry.HeaderTraceParent)
	if v == "" {
		return
	}
	if old := l.traceParent.Load(); old == nil || *old != v {
		l.traceParent.Store(&v)
	}
}

// traced returns ctx in the goal's trace, when tracing is on and the chat's
// messages came with a traceparent.
func (l *chatLoop) traced(ctx context.Context) context.Context {
	if !telemetry.Enabled() {
		return ctx
	}
	if tp := l.traceParent.Load(); tp != nil {
		return telemetry.WithTraceParent(ctx, *tp)
	}
	return ctx
}

// kick makes the loop read the chat's history now rather than at the next
// resync.
func (l *chatLoop) kick() {
	select {
	case l.kicks <- struct{}{}:
	default:
	}
}

func newChatLoop(a *agentState, comm string) *chatLoop {
	return &chatLoop{
		a:       a,
		comm:    comm,
		log:     a.log.With("comm_id", comm),
		in:      make(chan *protocol.AgentMessage, chatQueue),
		done:    make(chan struct{}),
		started: map[string]int{},
		kicks:   make(chan struct{}, 1),
	}
}

func (l *chatLoop) run(ctx context.Context) {
	defer close(l.done)
	// Tasks live as long as the chat: a conclusion cancels them.
	tctx, cancelTasks := context.WithCancel(ctx)
	defer cancelTasks()
	timer := time.NewTimer(l.a.rt.opts.resync)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-l.in:
			l.receive(ctx, m)
			for more := true; more; {
				select {
				case m := <-l.in:
					l.receive(ctx, m)
				default:
					more = false
				}
			}
			if len(l.pending) > 0 {
				l.catchUp(ctx)
			}
		case <-timer.C:
			l.catchUp(ctx)
		case <-l.kicks:
			l.catchUp(ctx)
		}
		if !l.act(ctx, tctx) {
			return
		}
		wait := l.a.rt.opts.resync
		if len(l.pending) > 0 {
			wait = min(wait, gapRetry)
		}
		timer.Reset(wait)
	}
}

// maxActs bounds how often one wake-up may re-decide because the chat moved
// on while the agent was deciding.
const maxActs = 8

// act starts new tasks and speaks if it is the agent's turn. When speaking
// brought the replica up to date (a refused move makes the loop catch up),
// it acts again on the new state. It reports whether the loop goes on.
func (l *chatLoop) act(ctx, tctx context.Context) bool {
	for range maxActs {
		if l.chat.Ended() {
			l.log.Info("chat ended", "outcome", l.chat.Outcome, "reason", l.chat.Reason, "seq", l.chat.LastSeq)
			l.concluded.Store(true)
			return false
		}
		if l.gone {
			l.log.Info("leaving a chat the referee does not know")
			return false
		}
		if l.a.Person() {
			break // a person's turns and tasks wait for the person
		}
		l.startTasks(tctx)
		before := l.chat.LastSeq
		l.maybeSpeak(ctx)
		if l.chat.LastSeq == before {
			break
		}
	}
	return true
}

// refresh applies what has arrived meanwhile and what history holds, so a
// decision refused by the referee can be made again on the current state.
// When the messages already delivered moved the chat on, with no gap, they
// are what the referee decided on and the history is not read: a move
// refused because a task ended meanwhile (a pause on a trigger whose result
// is in the inbox) costs no extra round trip.
func (l *chatLoop) refresh(ctx context.Context) {
	before := l.chat.LastSeq
	for {
		select {
		case m := <-l.in:
			l.receive(ctx, m)
			continue
		default:
		}
		break
	}
	if l.chat.LastSeq > before && len(l.pending) == 0 {
		return
	}
	l.catchUp(ctx)
}

// receive applies m when it is next, as it almost always is, and otherwise
// buffers it until the gap before it is filled.
func (l *chatLoop) receive(_ context.Context, m *protocol.AgentMessage) {
	if m.Seq <= l.chat.LastSeq || l.chat.Ended() {
		return
	}
	if m.Seq == l.chat.LastSeq+1 && len(l.pending) == 0 {
		l.apply(m)
		return
	}
	l.hold(m)
	l.drain()
}

// hold buffers m, which arrived ahead of a gap.
func (l *chatLoop) hold(m *protocol.AgentMessage) {
	if l.pending == nil {
		l.pending = map[uint64]*protocol.AgentMessage{}
	}
	l.pending[m.Seq] = m
}

func (l *chatLoop) drain() {
	for !l.chat.Ended() {
		m, ok := l.pending[l.chat.LastSeq+1]
		if !ok {
			break
		}
		delete(l.pending, m.Seq)
		l.apply(m)
	}
	for seq := range l.pending {
		if seq <= l.chat.LastSeq || l.chat.Ended() {
			delete(l.pending, seq)
		}
	}
}

// apply moves the replica on by m and keeps m among the recent messages;
// m must not change afterwards.
func (l *chatLoop) apply(m *protocol.AgentMessage) {
	n, err := protocol.Apply(l.chat, *m)
	if err != nil {
		// The referee applied the same function before logging, so this
		// means a different protocol version. Skipping keeps the agent
		// alive; the referee stays the authority on whose turn it is.
		l.log.Error("replica refused a logged message; skipping it", "seq", m.Seq, "type", m.Type, "sender", m.Sender, "err", err)
		l.chat.LastSeq = m.Seq
		if m.State == protocol.StateConclusion {
			l.chat.State, l.chat.Speaker = protocol.StateConclusion, ""
		}
		return
	}
	l.chat = n
	if m.Type == protocol.MsgSystem && m.Event == protocol.EventStart {
		l.team = slices.Clone(m.Team)
	}
	// Pointers, trimmed in place: copying the last k messages by value on
	// every message once a chat was long was a tenth of what agents
	// allocated.
	l.recent = append(l.recent, m)
	if k := l.a.rt.opts.recentMessages; len(l.recent) > k {
		n := copy(l.recent, l.recent[len(l.recent)-k:])
		clear(l.recent[n:])
		l.recent = l.recent[:n]
	}
}

// catchUp reads the chat's history after the last applied message: on a
// gap, for a chat first seen in the middle (a restart), and as a safety net
// when the chat has been silent.
func (l *chatLoop) catchUp(ctx context.Context) {
	subj, err := l.a.rt.subj.History(l.a.Card.Name, l.comm)
	if err != nil {
		l.gone = true
		return
	}
	for range historyPages {
		before := l.chat.LastSeq
		rctx, cancel := context.WithTimeout(ctx, l.a.rt.opts.requestTimeout)
		var out protocol.HistoryReply
		err := bus.Request(rctx, l.a.rt.nc, subj, protocol.HistoryRequest{AfterSeq: before, Limit: historyPage}, &out)
		cancel()
		if err != nil {
			if l.chat.State == "" && (errors.Is(err, protocol.ErrNotFound) || errors.Is(err, protocol.ErrNotMember)) {
				l.gone = true
			}
			if ctx.Err() == nil {
				l.log.Warn("history request failed", "after_seq", before, "err", err)
			}
			return
		}
		for _, m := range out.Messages {
			if m.CommID == l.comm && m.Seq > l.chat.LastSeq {
				l.hold(&m)
			}
		}
		l.drain()
		if l.chat.Ended() || l.chat.LastSeq >= out.LastSeq || l.chat.LastSeq == before {
			return
		}
	}
}

func (l *chatLoop) maybeSpeak(ctx context.Context) {
	c := &l.chat
	if c.State != protocol.StateDiscussion || c.Speaker != l.a.Card.Name {
		return
	}
	if l.spoken && l.spokeSeq == c.LastSeq {
		return
	}
	l.speak(ctx)
}

// startTasks runs the agent's tasks that the replica says are running and
// this process has not started: new assignments, and after a restart the
// ones the previous process left unfinished.
func (l *chatLoop) startTasks(ctx context.Context) {
	self := l.a.Card.Name
	for _, ts := range l.chat.Tasks {
		if ts.Assignee != self || ts.Status != protocol.TaskRunning || l.started[ts.TaskID] == ts.Attempt {
			continue
		}
		l.started[ts.TaskID] = ts.Attempt
		t := Task{
			Task:        ts.Task,
			CommID:      l.comm,
			GoalID:      l.chat.GoalID,
			Goal:        l.chat.Goal,
			Async:       ts.Async,
			Attempt:     ts.Attempt,
			TeamUpDepth: l.chat.TeamUpDepth,
		}
		for _, o := range l.chat.Tasks {
			if o.TaskID != ts.TaskID && (o.Status == protocol.TaskCompleted || o.Status == protocol.TaskFailed) {
				t.Earlier = append(t.Earlier, TaskOutcome{
					TaskID: o.TaskID, Assignee: o.Assignee, TaskAbstract: o.TaskAbstract, Status: o.Status, Result: o.Result,
				})
			}
		}
		progress := ts.Async && !ts.Progressed
		l.log.Info("task assigned", "task_id", ts.TaskID, "attempt", ts.Attempt, "async", ts.Async)
		tctx := l.traced(ctx)
		l.a.rt.wg.Go(func() { l.a.runTask(tctx, t, progress) })
	}
}

// snapshot copies the replica so that a policy cannot change it.
func (l *chatLoop) snapshot() protocol.Chat {
	c := l.chat
	c.Members = slices.Clone(c.Members)
	c.Waiting = slices.Clone(c.Waiting)
	c.Tasks = slices.Clone(c.Tasks)
	return c
}
