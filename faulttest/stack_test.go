package faulttest

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/agentkit/rules"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/bus/bustest"
	"github.com/ioa-nats/ioa/internal/stacktest"
	"github.com/ioa-nats/ioa/orchestrator"
	"github.com/ioa-nats/ioa/registry"
	"github.com/nats-io/nats.go"
)

// stack is a bus with a listener, the registry, the orchestrator and the
// built-in coordinator, all in the test process.
type stack struct {
	*stacktest.Stack
	b    *bus.Bus
	nc   *nats.Conn
	subj bus.Subjects
}

type stackOpts struct {
	orch        orchestrator.Config
	reg         registry.Config
	bus         func(*bus.Config)
	coordinator bool
	agents      []agentkit.Agent
}

func newStack(t testing.TB, o stackOpts) *stack {
	t.Helper()
	return startServices(t, bustest.New(t, func(c *bus.Config) {
		if o.bus != nil {
			o.bus(c)
		}
	}), o)
}

// startServices runs the registry, the orchestrator and the agents on b.
func startServices(t testing.TB, b *bus.Bus, o stackOpts) *stack {
	t.Helper()
	st := stacktest.OnBus(t, b, stacktest.Options{Orchestrator: o.orch, Registry: o.reg})
	s := &stack{Stack: st, b: b, nc: b.Conn(), subj: b.Subjects()}
	agents := o.agents
	if o.coordinator {
		agents = append([]agentkit.Agent{orchestrator.Coordinator("coordinator", rules.New(rules.Config{}))}, agents...)
	}
	if len(agents) > 0 {
		s.runAgents(t, agents...)
	}
	return s
}

// runAgents runs agentkit agents in this process until the test ends; they
// resync every 2 s, so that a lost inbox message costs little.
func (s *stack) runAgents(t testing.TB, agents ...agentkit.Agent) {
	t.Helper()
	opts := []agentkit.Option{agentkit.WithResyncInterval(2 * time.Second)}
	if os.Getenv("IOA_SOAK_AGENT_LOG") != "" {
		opts = append(opts, agentkit.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))))
	}
	s.RunAgents(t, opts, agents...)
}

// waitOnline waits until the registry lists every name as online.
func waitOnline(t testing.TB, nc *nats.Conn, subj bus.Subjects, names ...string) {
	t.Helper()
	for _, n := range names {
		waitFor(t, 30*time.Second, n+" online", func() bool {
			var info protocol.AgentInfo
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			return bus.Request(ctx, nc, subj.Registry(bus.RegistryGet), protocol.NameRequest{Name: n}, &info) == nil && info.Online
		})
	}
}

// waitFor polls cond until it holds or d passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// request is bus.Request with a timeout.
func request(nc *nats.Conn, subject string, in, out any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return bus.Request(ctx, nc, subject, in, out)
}

func submit(t testing.TB, nc *nats.Conn, subj bus.Subjects, req protocol.GoalRequest) string {
	t.Helper()
	var r protocol.SubmitReply
	if err := request(nc, subj.Goal(bus.GoalSubmit), req, &r); err != nil {
		t.Fatalf("submit: %v", err)
	}
	return r.GoalID
}

func goalGet(nc *nats.Conn, subj bus.Subjects, id string) (protocol.GoalStatus, error) {
	var st protocol.GoalStatus
	err := request(nc, subj.Goal(bus.GoalGet), protocol.GoalIDRequest{GoalID: id}, &st)
	return st, err
}

// waitEnded waits until every goal has ended and returns their statuses.
func waitEnded(t testing.TB, nc *nats.Conn, subj bus.Subjects, d time.Duration, ids ...string) map[string]protocol.GoalStatus {
	t.Helper()
	out := map[string]protocol.GoalStatus{}
	deadline := time.Now().Add(d)
	for len(out) < len(ids) {
		for _, id := range ids {
			if _, ok := out[id]; ok {
				continue
			}
			if st, err := goalGet(nc, subj, id); err == nil && protocol.GoalEnded(st.Status) {
				out[id] = st
			}
		}
		if len(out) == len(ids) {
			break
		}
		if time.Now().After(deadline) {
			var open []string
			for _, id := range ids {
				if _, ok := out[id]; !ok {
					st, err := goalGet(nc, subj, id)
					open = append(open, fmt.Sprintf("%s=%s(%v)", id, st.Status, err))
				}
			}
			t.Fatalf("after %v, %d of %d goals have not ended: %v", d, len(open), len(ids), open)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return out
}

// requireConcluded fails the test for every goal that did not conclude,
// with its reason, and counts the goals by status.
func requireConcluded(t testing.TB, ended map[string]protocol.GoalStatus) map[string]int {
	t.Helper()
	statuses := map[string]int{}
	for id, st := range ended {
		statuses[st.Status]++
		if st.Status != protocol.GoalConcluded {
			reason := ""
			if st.Result != nil {
				reason = st.Result.Reason
			}
			t.Errorf("goal %s ended %s: %s", id, st.Status, reason)
		}
	}
	return statuses
}

// history reads a chat's whole authoritative log through a member's
// history subject.
func history(nc *nats.Conn, subj bus.Subjects, member, comm string) ([]protocol.AgentMessage, error) {
	subject, err := subj.History(member, comm)
	if err != nil {
		return nil, err
	}
	var h protocol.HistoryReply
	if err := request(nc, subject, protocol.HistoryRequest{}, &h); err != nil {
		return nil, err
	}
	return h.Messages, nil
}

// recorder keeps every chat message observed on <p>.chat.>, and every
// outbox message the referee acknowledged (a reply with its seq) as seen on
// the wire.
//
// A message seen on the chat subject was published to the log, but is not
// always in it: NATS delivers a publish to core subscribers and to the
// stream at the same time, and if the stream does not store it (its leader
// is lost in a cluster) the referee gets no ack, answers the sender with an
// error and may put another message at that seq. Such a "phantom" was never
// acknowledged to anyone, so it is counted apart; lost counts acknowledged
// messages that are not in the log.
type recorder struct {
	mu       sync.Mutex
	seen     map[string][]protocol.AgentMessage
	requests map[string]ackKey   // reply subject -> the outbox message
	replies  map[string]uint64   // reply subject -> seq, for replies seen first
	acked    map[ackKey]uint64   // acknowledged outbox messages -> seq
	order    map[string][]ackKey // comm -> acknowledged, in order
}

type ackKey struct{ comm, sender, id string }

func record(t testing.TB, nc *nats.Conn, subj bus.Subjects) *recorder {
	t.Helper()
	r := &recorder{seen: map[string][]protocol.AgentMessage{}, requests: map[string]ackKey{},
		replies: map[string]uint64{}, acked: map[ackKey]uint64{}, order: map[string][]ackKey{}}
	subs := []struct {
		subject string
		fn      nats.MsgHandler
	}{
		{subj.AllChats(), func(m *nats.Msg) {
			var am protocol.AgentMessage
			if json.Unmarshal(m.Data, &am) != nil {
				return
			}
			r.mu.Lock()
			r.seen[am.CommID] = append(r.seen[am.CommID], am)
			r.mu.Unlock()
		}},
		{subj.AllOutboxes(), func(m *nats.Msg) {
			as, err := subj.ParseAgent(m.Subject)
			var am protocol.AgentMessage
			if err != nil || m.Reply == "" || json.Unmarshal(m.Data, &am) != nil {
				return
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			k := ackKey{as.CommID, as.Name, am.ID}
			if seq, ok := r.replies[m.Reply]; ok {
				delete(r.replies, m.Reply)
				r.ack(k, seq)
				return
			}
			r.requests[m.Reply] = k
		}},
		// Each subscription has its own goroutine, so a reply may be
		// handled before its request: either side waits for the other.
		{"_INBOX.>", func(m *nats.Msg) {
			var reply protocol.SendReply
			if bus.ReplyError(m) != nil || json.Unmarshal(m.Data, &reply) != nil || reply.Seq == 0 {
				return
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			k, ok := r.requests[m.Subject]
			if !ok {
				r.replies[m.Subject] = reply.Seq
				return
			}
			delete(r.requests, m.Subject)
			r.ack(k, reply.Seq)
		}},
	}
	for _, s := range subs {
		sub, err := nc.Subscribe(s.subject, s.fn)
		if err != nil {
			t.Fatal(err)
		}
		_ = sub.SetPendingLimits(-1, -1)
		t.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return r
}

// ack records an acknowledgement; r.mu is held.
func (r *recorder) ack(k ackKey, seq uint64) {
	if _, dup := r.acked[k]; !dup {
		r.order[k.comm] = append(r.order[k.comm], k)
	}
	r.acked[k] = seq
}

// acks returns the acknowledged outbox messages of a chat with their seq.
func (r *recorder) acks(comm string) map[ackKey]uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[ackKey]uint64{}
	for _, k := range r.order[comm] {
		out[k] = r.acked[k]
	}
	return out
}

// snapshot copies what has been recorded so far.
func (r *recorder) snapshot() *recorder {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := &recorder{seen: map[string][]protocol.AgentMessage{}, acked: map[ackKey]uint64{}, order: map[string][]ackKey{}}
	for k, v := range r.seen {
		c.seen[k] = slices.Clone(v)
	}
	for k, v := range r.order {
		c.order[k] = slices.Clone(v)
	}
	for k, v := range r.acked {
		c.acked[k] = v
	}
	return c
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, ms := range r.seen {
		n += len(ms)
	}
	return n
}

func (r *recorder) chat(comm string) []protocol.AgentMessage {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seen[comm])
}

// find returns the first observed message that matches.
func (r *recorder) find(match func(protocol.AgentMessage) bool) (protocol.AgentMessage, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ms := range r.seen {
		for _, m := range ms {
			if match(m) {
				return m, true
			}
		}
	}
	return protocol.AgentMessage{}, false
}

// audit is what checking chat logs found.
type audit struct {
	Chats, Observed, Logged, Acked int
	// Lost: acknowledged to its sender (a reply with its seq) but not in the
	// log at that seq.
	Lost int
	// Duplicated: a seq, a (sender,id), a task result (per attempt) or a
	// conclusion logged twice.
	Duplicated int
	// Phantoms: seen on the chat subject, never acknowledged, not in the log
	// (an append whose stream write failed; see recorder). Resent: phantoms
	// whose message is in the log at another seq (its sender sent it again).
	Phantoms, Resent int
	Problems         []string
}

func (a *audit) problem(format string, args ...any) {
	if len(a.Problems) < 20 {
		a.Problems = append(a.Problems, fmt.Sprintf(format, args...))
	}
}

func (a audit) String() string {
	return fmt.Sprintf("chats=%d observed=%d acked=%d logged=%d lost=%d duplicated=%d phantoms=%d (resent %d)",
		a.Chats, a.Observed, a.Acked, a.Logged, a.Lost, a.Duplicated, a.Phantoms, a.Resent)
}

// check audits one chat: observed are the messages seen on the chat
// subject, acked the acknowledged outbox messages, log the chat's history;
// ended says the chat must have concluded.
func (a *audit) check(comm string, observed []protocol.AgentMessage, acked map[ackKey]uint64, log []protocol.AgentMessage, ended bool) {
	a.Chats++
	a.Observed += len(observed)
	a.Acked += len(acked)
	a.Logged += len(log)
	bySeq := map[uint64]protocol.AgentMessage{}
	ids := map[string]bool{}
	results := map[string]int{}
	conclusions := 0
	for i, m := range log {
		if m.Seq != uint64(i+1) {
			a.problem("%s: log entry %d has seq %d", comm, i+1, m.Seq)
			if _, dup := bySeq[m.Seq]; dup {
				a.Duplicated++
			}
		}
		bySeq[m.Seq] = m
		key := m.Sender + "/" + m.ID
		if ids[key] {
			a.Duplicated++
			a.problem("%s: (sender,id) %s logged twice", comm, key)
		}
		ids[key] = true
		if m.Type == protocol.MsgTaskResult {
			k := fmt.Sprintf("%s#%d", m.TaskID, m.Attempt)
			results[k]++
			if results[k] > 1 {
				a.Duplicated++
				a.problem("%s: task %s has %d results", comm, k, results[k])
			}
		}
		if m.State == protocol.StateConclusion {
			conclusions++
		}
	}
	switch {
	case conclusions > 1:
		a.Duplicated += conclusions - 1
		a.problem("%s: %d conclusions", comm, conclusions)
	case conclusions == 0 && ended:
		a.problem("%s: chat has no conclusion", comm)
	}
	for k, seq := range acked {
		l, ok := bySeq[seq]
		if !ok || l.ID != k.id || l.Sender != k.sender {
			a.Lost++
			a.problem("%s: %s/%s was acknowledged at seq %d but is not there in the log", comm, k.sender, k.id, seq)
		}
	}
	for _, o := range observed {
		if l, ok := bySeq[o.Seq]; ok && l.ID == o.ID && l.Sender == o.Sender {
			continue
		}
		if seq, ok := acked[ackKey{comm, o.Sender, o.ID}]; ok && seq == o.Seq {
			continue // counted as lost above
		}
		a.Phantoms++
		if ids[o.Sender+"/"+o.ID] {
			a.Resent++
		}
	}
}

// auditGoals checks the chats of the given goals against what rec saw.
func auditGoals(t testing.TB, nc *nats.Conn, subj bus.Subjects, rec *recorder, goals map[string]protocol.GoalStatus) audit {
	t.Helper()
	var a audit
	ids := make([]string, 0, len(goals))
	for id := range goals {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		st := goals[id]
		if st.CommID == "" {
			continue
		}
		log, err := history(nc, subj, st.Launcher, st.CommID)
		if err != nil {
			a.problem("goal %s: history: %v", id, err)
			continue
		}
		a.check(st.CommID, rec.chat(st.CommID), rec.acks(st.CommID), log, true)
	}
	return a
}
