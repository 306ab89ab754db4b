package main

// A wire agent: one NATS connection with the agent's own credentials, its
// card registered and kept online by heartbeats, invitations accepted, and
// (for a launcher) launch requests answered by a team-up. It follows many
// chats at once: one goroutine per subscription reads what arrives, the
// chats' state lives in maps under a mutex, and every send runs on a
// goroutine of its own.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// sendBudget bounds how long a message is sent again (503, 429, no reply)
// before the agent gives up on it and counts an error.
const sendBudget = 30 * time.Second

// agent is one wire agent.
type agent struct {
	name    string
	lead    bool     // a launcher: answers launch requests, assigns, concludes
	workers []string // a launcher's team
	prefix  string
	nc      *nats.Conn
	errs    *errorLog
	ctx     context.Context
	card    agentCard
	// drop, when set (tests only), loses the inbox messages it returns
	// true for, as core NATS may.
	drop func(agent string, m message) bool
	// filled, when set (tests only), hears of each history read that
	// filled a gap.
	filled func(agent, comm string)

	mu       sync.Mutex
	chats    map[string]*chatState
	ended    map[string]struct{} // chats seen to end, two generations
	ended0   map[string]struct{}
	stopping bool           // set by stop: start nothing new
	sends    sync.WaitGroup // goroutines under way: sends, team-ups, history reads
}

// chatState is what the agent keeps per chat: the last seq applied in
// order, messages that came early, and (for a launcher) the task results.
type chatState struct {
	last    uint64
	held    map[uint64]message
	filling bool
	results map[string]string // task id -> conclusion
}

func (a *agent) subject(parts ...string) string {
	return a.prefix + "." + strings.Join(parts, ".")
}

// start subscribes, then registers the card (registering also counts as a
// heartbeat, so the agent is online when start returns).
func (a *agent) start(ctx context.Context) error {
	a.ctx = ctx
	a.chats = map[string]*chatState{}
	a.ended, a.ended0 = map[string]struct{}{}, map[string]struct{}{}
	inbox, err := a.nc.Subscribe(a.subject("agent", a.name, "in", "*"), a.onInbox)
	if err != nil {
		return err
	}
	// Inbox delivery is plain core NATS: never let the client drop a burst.
	_ = inbox.SetPendingLimits(-1, -1)
	// Invitations come only with --invite (cards without auto_join).
	if _, err := a.nc.Subscribe(a.subject("agent", a.name, "invite"), func(m *nats.Msg) {
		b, _ := json.Marshal(inviteReply{Accept: true})
		_ = m.Respond(b)
	}); err != nil {
		return err
	}
	if a.lead {
		if _, err := a.nc.Subscribe(a.subject("agent", a.name, "launch"), a.onLaunch); err != nil {
			return err
		}
	}
	if err := a.nc.FlushTimeout(perRequest); err != nil {
		return err
	}
	return a.register(ctx)
}

func (a *agent) register(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, sendBudget)
	defer cancel()
	if err := requestRetry(rctx, a.nc, a.subject("registry", "register", a.name), a.card, nil); err != nil {
		return fmt.Errorf("%s: register: %w", a.name, err)
	}
	return nil
}

// heartbeats keeps the card online: every ttl/3, registering again when
// the registry has forgotten it (404).
func (a *agent) heartbeats(ctx context.Context) {
	every := 10 * time.Second
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
		var r heartbeatReply
		hctx, cancel := context.WithTimeout(ctx, every)
		err := requestRetry(hctx, a.nc, a.subject("registry", "heartbeat", a.name), nameRequest{Name: a.name}, &r)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case status(err) == 404:
			if err := a.register(ctx); err != nil && ctx.Err() == nil {
				a.errs.add(err)
			}
		case err != nil:
			a.errs.add(fmt.Errorf("%s: heartbeat: %w", a.name, err))
		default:
			if ttl, err := time.ParseDuration(r.TTL); err == nil && ttl >= 3*time.Second {
				every = ttl / 3
			}
		}
	}
}

// spawn runs f on a goroutine of its own unless the agent is stopping;
// a.mu must be held.
func (a *agent) spawnLocked(f func()) {
	if a.stopping {
		return
	}
	a.sends.Go(f)
}

func (a *agent) spawn(f func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.spawnLocked(f)
}

// stop waits for the goroutines under way (their context is already
// cancelled) and takes the card out of the registry.
func (a *agent) stop() {
	a.mu.Lock()
	a.stopping = true
	a.mu.Unlock()
	a.sends.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = request(ctx, a.nc, a.subject("registry", "deregister", a.name), nameRequest{Name: a.name}, nil)
	a.nc.Close()
}

// onLaunch answers a launch request: team-up for the goal with the
// launcher's workers, then {"comm_id"}. The orchestrator waits 30 s for it.
func (a *agent) onLaunch(m *nats.Msg) {
	var req launchRequest
	if err := json.Unmarshal(m.Data, &req); err != nil || req.GoalID == "" {
		respondError(a.nc, m.Reply, 400, "invalid", "launch request without a goal_id")
		return
	}
	a.spawn(func() {
		ctx, cancel := context.WithTimeout(a.ctx, 25*time.Second)
		defer cancel()
		var r commReply
		err := requestRetry(ctx, a.nc, a.subject("teamup", a.name),
			teamupRequest{GoalID: req.GoalID, Launcher: a.name, Members: a.workers}, &r)
		if err != nil {
			a.errs.add(fmt.Errorf("%s: team-up for goal %s: %w", a.name, req.GoalID, err))
			st, code := 500, "internal"
			var we *wireError
			if errors.As(err, &we) {
				st, code = we.Status, we.Code
			}
			respondError(a.nc, m.Reply, st, code, err.Error())
			return
		}
		b, _ := json.Marshal(commReply{CommID: r.CommID})
		_ = m.Respond(b)
	})
}

// onInbox takes a logged chat message. Messages are applied strictly in seq
// order: an early one is held back and the gap filled from history; a seq
// already applied is a repeat (the referee nudges a member it waits on with
// the message that gave it the turn or the task) and is acted on again:
// every send carries an id fixed by the chat, so the referee logs it once.
func (a *agent) onInbox(m *nats.Msg) {
	var msg message
	if err := json.Unmarshal(m.Data, &msg); err != nil || msg.CommID == "" || msg.Seq == 0 {
		a.errs.add(fmt.Errorf("%s: unreadable inbox message on %s: %.200s", a.name, m.Subject, m.Data))
		return
	}
	if a.drop != nil && a.drop(a.name, msg) {
		return
	}
	a.deliver([]message{msg})
}

// deliver applies messages of one chat that came on the inbox, and reads
// the history when they leave a gap.
func (a *agent) deliver(msgs []message) {
	comm := msgs[0].CommID
	if gap, after := a.apply(comm, msgs, false); gap {
		a.spawn(func() { a.fill(comm, after) })
	}
}

// apply applies messages of one chat in seq order and acts on each message
// applied, and on each repeat. It reports a gap (messages held back for
// want of an earlier one) when no history read is under way to fill it, or
// when the caller is that read (byFill), and the last seq applied.
func (a *agent) apply(comm string, msgs []message, byFill bool) (gap bool, last uint64) {
	var act []message
	a.mu.Lock()
	if a.isEnded(comm) {
		a.mu.Unlock()
		return false, 0
	}
	c := a.chats[comm]
	if c == nil {
		c = &chatState{held: map[uint64]message{}, results: map[string]string{}}
		a.chats[comm] = c
	}
	for _, m := range msgs {
		if m.Seq <= c.last {
			if !byFill {
				act = append(act, m) // a repeat: the referee's nudge
			}
		} else {
			c.held[m.Seq] = m // applied below once every seq before it is
		}
	}
	for {
		m, ok := c.held[c.last+1]
		if !ok {
			break
		}
		delete(c.held, c.last+1)
		c.last++
		if m.Type == typeTaskResult && m.TaskID != "" {
			c.results[m.TaskID] = m.TaskConclusion
		}
		act = append(act, m)
	}
	ended := slices.ContainsFunc(act, func(m message) bool { return m.State == stateConclusion })
	switch {
	case ended:
		delete(a.chats, comm)
		a.markEnded(comm)
	case len(c.held) == 0:
		c.filling = false
	case byFill || !c.filling:
		c.filling, gap = true, true
	}
	last = c.last
	var results map[string]string
	if a.lead {
		results = maps.Clone(c.results)
	}
	a.mu.Unlock()
	for _, m := range act {
		a.act(m, results)
	}
	return gap, last
}

// fill reads the history of a chat after seq until the gap is closed (the
// referee logs a message before it sends it to the inboxes, so the history
// has what the inbox showed), with a pause when a read brings nothing new.
func (a *agent) fill(comm string, after uint64) {
	ctx, cancel := context.WithTimeout(a.ctx, sendBudget)
	defer cancel()
	pause := 10 * time.Millisecond
	for {
		var h historyReply
		err := requestRetry(ctx, a.nc, a.subject("agent", a.name, "history", comm), historyRequest{AfterSeq: after, Limit: 1000}, &h)
		if err == nil && len(h.Messages) == 0 {
			err = fmt.Errorf("history of %s after %d is empty, but a later message came (last_seq %d)", comm, after, h.LastSeq)
		}
		if err != nil {
			a.mu.Lock()
			if c := a.chats[comm]; c != nil {
				c.filling = false // the next message that shows the gap tries again
			}
			a.mu.Unlock()
			if a.ctx.Err() == nil {
				a.errs.add(fmt.Errorf("%s: history of %s after %d: %w", a.name, comm, after, err))
			}
			return
		}
		for i := range h.Messages {
			h.Messages[i].CommID = comm
		}
		if a.filled != nil {
			a.filled(a.name, comm)
		}
		gap, last := a.apply(comm, h.Messages, true)
		if !gap {
			return
		}
		if last == after {
			select {
			case <-ctx.Done():
			case <-time.After(pause):
			}
			pause = min(2*pause, time.Second)
		}
		after = last
	}
}

func (a *agent) isEnded(comm string) bool {
	_, e1 := a.ended[comm]
	_, e0 := a.ended0[comm]
	return e1 || e0
}

// markEnded remembers a chat that ended, in two generations of at most
// 10000 each, so that memory stays bounded on long runs.
func (a *agent) markEnded(comm string) {
	if len(a.ended) >= 10000 {
		a.ended0, a.ended = a.ended, map[string]struct{}{}
	}
	a.ended[comm] = struct{}{}
}

// act does what one logged message asks of this agent.
func (a *agent) act(m message, results map[string]string) {
	if m.State == stateConclusion {
		return
	}
	// A worker: the tasks of an assignment addressed to it.
	if m.Type == typeSyncAssign || m.Type == "async_task_assign" {
		for _, t := range m.Tasks {
			if t.Assignee == a.name {
				a.send(m.CommID, message{
					ID: a.name + "-" + m.CommID + "-" + t.TaskID + "-1-r", Type: typeTaskResult, TaskID: t.TaskID,
					TaskStatus: "completed", TaskConclusion: a.name + " did: " + t.TaskAbstract,
					Content: a.name + ": " + t.TaskAbstract + " done",
				})
			}
		}
	}
	if !a.lead || m.State != stateDiscussion {
		return
	}
	// The launcher holds the turn when a message names it the next speaker
	// (start, turn_limit, speaker_timeout), or when a task result ends the
	// wait for tasks it assigned (the chat is back in discussion and the
	// assigner speaks).
	mine := slices.Equal(m.NextSpeaker, []string{a.name}) || m.Type == typeTaskResult
	if !mine {
		return
	}
	id := a.name + "-" + m.CommID + "-s" + strconv.FormatUint(m.Seq, 10)
	if m.Type == typeSystem && m.Event == "start" {
		var tasks []task
		for _, mb := range m.Team {
			if mb.Name == a.name {
				continue
			}
			n := len(tasks) + 1
			tasks = append(tasks, task{
				TaskID: "t" + strconv.Itoa(n), Assignee: mb.Name,
				TaskAbstract: "step " + strconv.Itoa(n), TaskDesc: "Do step " + strconv.Itoa(n) + " of: " + m.Content,
			})
		}
		if len(tasks) == 0 {
			a.send(m.CommID, message{ID: id, Type: typeConclusion, Content: "no team: nothing to do"})
			return
		}
		a.send(m.CommID, message{ID: id, Type: typeSyncAssign, Content: "one step each", Tasks: tasks})
		return
	}
	var b strings.Builder
	keys := make([]string, 0, len(results))
	for k := range results {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s: %s\n", k, results[k])
	}
	a.send(m.CommID, message{ID: id, Type: typeConclusion, Content: "All steps done.\n" + b.String()})
}

// send puts a message on the agent's outbox for the chat, on a goroutine of
// its own, sending it again (same id) on 503, 429 or no reply.
func (a *agent) send(comm string, m message) {
	m.V = 1
	a.spawn(func() {
		ctx, cancel := context.WithTimeout(a.ctx, sendBudget)
		defer cancel()
		var r sendReply
		if err := requestRetry(ctx, a.nc, a.subject("agent", a.name, "out", comm), m, &r); err != nil && a.ctx.Err() == nil {
			a.errs.add(fmt.Errorf("%s: %s %s to chat %s: %w", a.name, m.Type, m.ID, comm, err))
		}
	})
}
