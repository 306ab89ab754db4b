package agentkit_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/bus/bustest"
	"github.com/nats-io/nats.go"
)

// fakeNet stands in for the registry and the orchestrator: a minimal
// registry (register, heartbeat, deregister, search by shared words), team-up
// that invites and starts the chat, a referee that sequences outboxes with
// protocol.Apply, history, and goal.submit for nested teams. It holds the
// authoritative log that the tests assert on.
type fakeNet struct {
	t    *testing.T
	b    *bus.Bus
	nc   *nats.Conn
	subj bus.Subjects

	mu         sync.Mutex
	cards      map[string]protocol.AgentCard
	registered map[string]int // name -> register calls
	goals      map[string]protocol.LaunchRequest
	chats      map[string]*fakeChat
	submitted  []protocol.GoalRequest
	subResult  func(protocol.GoalRequest) protocol.GoalResult
	// drop, when set, loses a logged message on its way to one member's
	// inbox, as core NATS may.
	drop func(member string, seq uint64) bool
}

type fakeChat struct {
	chat protocol.Chat
	log  []protocol.AgentMessage
	ids  map[string]protocol.SendReply // sender/id -> first reply
}

func newFakeNet(t *testing.T) *fakeNet {
	t.Helper()
	b := bustest.New(t)
	nc, err := b.NewConn("fake")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeNet{
		t: t, b: b, nc: nc, subj: b.Subjects(),
		cards: map[string]protocol.AgentCard{}, registered: map[string]int{},
		goals: map[string]protocol.LaunchRequest{}, chats: map[string]*fakeChat{},
	}
	s := f.subj
	f.serve(s.Registry(bus.RegistryRegister)+".*", f.register)
	f.serve(s.Registry(bus.RegistryHeartbeat)+".*", f.heartbeat)
	f.serve(s.Registry(bus.RegistryDeregister)+".*", f.deregister)
	f.serve(s.Registry(bus.RegistrySearch), f.search)
	f.serve(s.Teamup()+".*", f.teamup)
	f.serve(s.AllOutboxes(), f.referee)
	f.serve(s.AllHistory(), f.history)
	f.serve(s.Goal(bus.GoalSubmit)+".*", f.submit)
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fakeNet) serve(subject string, h func(m *nats.Msg) (any, error)) {
	_, err := f.nc.Subscribe(subject, func(m *nats.Msg) {
		resp, err := h(m)
		if err != nil {
			_ = f.nc.PublishMsg(bus.ErrorMsg(m.Reply, err))
			return
		}
		_ = m.Respond(bus.Encode(resp))
	})
	if err != nil {
		f.t.Fatal(err)
	}
}

func decode[T any](m *nats.Msg) (T, error) {
	var v T
	err := bus.Codec{}.Decode(m.Data, &v)
	return v, err
}

func (f *fakeNet) register(m *nats.Msg) (any, error) {
	card, err := decode[protocol.AgentCard](m)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cards[card.Name] = card
	f.registered[card.Name]++
	return protocol.RegisterReply{Name: card.Name, Revision: uint64(f.registered[card.Name])}, nil
}

func (f *fakeNet) heartbeat(m *nats.Msg) (any, error) {
	req, err := decode[protocol.NameRequest](m)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.cards[req.Name]; !ok {
		return nil, protocol.ErrNotFound
	}
	return protocol.HeartbeatReply{TTL: protocol.Duration(30 * time.Second)}, nil
}

func (f *fakeNet) deregister(m *nats.Msg) (any, error) {
	req, err := decode[protocol.NameRequest](m)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.cards, req.Name)
	return struct{}{}, nil
}

var stop = map[string]bool{"the": true, "for": true, "and": true, "any": true, "with": true}

func terms(s string) []string {
	var out []string
	for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9') }) {
		if len(w) > 2 && !stop[w] {
			out = append(out, strings.TrimSuffix(w, "s"))
		}
	}
	return out
}

// search scores a card by the query words found in its description and
// capabilities; a card sharing any word counts as a full match (Match 1).
func (f *fakeNet) search(m *nats.Msg) (any, error) {
	req, err := decode[protocol.SearchRequest](m)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	q := terms(req.Query + " " + strings.Join(req.Queries, " "))
	var res []protocol.SearchResult
	for _, c := range f.cards {
		if slices.Contains(req.Exclude, c.Name) {
			continue
		}
		have := terms(c.Description + " " + strings.Join(c.Capabilities, " "))
		hits := 0
		for _, w := range q {
			if slices.Contains(have, w) {
				hits++
			}
		}
		if hits > 0 {
			res = append(res, protocol.SearchResult{Name: c.Name, Description: c.Description, Score: float64(hits) / float64(len(q)), Match: 1, Online: true})
		}
	}
	slices.SortFunc(res, func(a, b protocol.SearchResult) int {
		return cmp.Or(cmp.Compare(b.Score, a.Score), cmp.Compare(a.Name, b.Name))
	})
	if limit := cmp.Or(req.Limit, 10); len(res) > limit {
		res = res[:limit]
	}
	return protocol.SearchReply{Results: res}, nil
}

func (f *fakeNet) teamup(m *nats.Msg) (any, error) {
	req, err := decode[protocol.TeamupRequest](m)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	goal, ok := f.goals[req.GoalID]
	var team []protocol.AgentCard
	for _, n := range req.Members {
		card, ok := f.cards[n]
		if !ok {
			f.mu.Unlock()
			return nil, protocol.Errorf(protocol.ErrNotFound, "agent %s is not registered", n)
		}
		team = append(team, card)
	}
	comm := fmt.Sprintf("c%d", len(f.chats)+1)
	f.chats[comm] = &fakeChat{ids: map[string]protocol.SendReply{}}
	f.mu.Unlock()
	if !ok {
		return nil, protocol.Errorf(protocol.ErrNotFound, "unknown goal %s", req.GoalID)
	}
	for _, n := range req.Members {
		if n == req.Launcher {
			continue
		}
		subj, _ := f.subj.AgentInviteSubject(n)
		var out protocol.InviteReply
		err := bus.Request(context.Background(), f.nc, subj, protocol.InviteRequest{
			CommID: comm, GoalID: req.GoalID, Goal: goal.Goal, Launcher: req.Launcher, Team: team,
			MaxTurns: goal.MaxTurns, TeamUpDepth: goal.Depth,
		}, &out)
		if err != nil || !out.Accept {
			return nil, protocol.Errorf(protocol.ErrConflict, "%s declined: %v %s", n, err, out.Reason)
		}
	}
	start := protocol.AgentMessage{
		V: 1, ID: "start", CommID: comm, GoalID: req.GoalID, Sender: protocol.SystemSender,
		Type: protocol.MsgSystem, Event: protocol.EventStart, Goal: goal.Goal, Launcher: req.Launcher,
		Team: team, MaxTurns: goal.MaxTurns, TeamUpDepth: goal.Depth, NextSpeaker: []string{req.Launcher},
	}
	if _, err := f.append(comm, start); err != nil {
		return nil, err
	}
	return protocol.TeamupReply{CommID: comm}, nil
}

// append sequences one message: stamp, apply, log, fan out.
func (f *fakeNet) append(comm string, m protocol.AgentMessage) (protocol.SendReply, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.chats[comm]
	if !ok {
		return protocol.SendReply{}, protocol.Errorf(protocol.ErrNotFound, "no chat %s", comm)
	}
	key := m.Sender + "/" + m.ID
	if r, ok := c.ids[key]; ok {
		return r, nil
	}
	m.Seq, m.TS = c.chat.LastSeq+1, time.Now().UTC()
	n, err := protocol.Apply(c.chat, m)
	if err != nil {
		return protocol.SendReply{}, err
	}
	c.chat = n
	m.State = n.State
	c.log = append(c.log, m)
	r := protocol.SendReply{Seq: m.Seq, State: m.State}
	c.ids[key] = r
	for _, member := range n.Members {
		if f.drop != nil && f.drop(member, m.Seq) {
			continue
		}
		subj, _ := f.subj.Inbox(member, comm)
		_ = f.nc.Publish(subj, bus.Encode(m))
	}
	return r, nil
}

func (f *fakeNet) referee(m *nats.Msg) (any, error) {
	as, err := f.subj.ParseAgent(m.Subject)
	if err != nil {
		return nil, err
	}
	msg, err := decode[protocol.AgentMessage](m)
	if err != nil {
		return nil, err
	}
	if msg.Type == protocol.MsgSystem {
		return nil, protocol.Errorf(protocol.ErrForbidden, "agents do not send system messages")
	}
	msg.Sender, msg.CommID = as.Name, as.CommID
	return f.append(as.CommID, msg)
}

func (f *fakeNet) history(m *nats.Msg) (any, error) {
	as, err := f.subj.ParseAgent(m.Subject)
	if err != nil {
		return nil, err
	}
	req, err := decode[protocol.HistoryRequest](m)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.chats[as.CommID]
	if !ok {
		return nil, protocol.Errorf(protocol.ErrNotFound, "no chat %s", as.CommID)
	}
	if !c.chat.IsMember(as.Name) {
		return nil, protocol.ErrNotMember
	}
	out := protocol.HistoryReply{Messages: []protocol.AgentMessage{}, LastSeq: c.chat.LastSeq}
	for _, lm := range c.log {
		if lm.Seq > req.AfterSeq && (req.Limit <= 0 || len(out.Messages) < req.Limit) {
			out.Messages = append(out.Messages, lm)
		}
	}
	return out, nil
}

func (f *fakeNet) submit(m *nats.Msg) (any, error) {
	req, err := decode[protocol.GoalRequest](m)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.submitted = append(f.submitted, req)
	fn := f.subResult
	f.mu.Unlock()
	if fn == nil {
		return nil, protocol.Errorf(protocol.ErrUnavailable, "no nested goals here")
	}
	return fn(req), nil
}

// launch asks the launcher to form a team for a goal, as the orchestrator
// would, and returns the chat id.
func (f *fakeNet) launch(launcher string, req protocol.LaunchRequest) string {
	f.t.Helper()
	f.mu.Lock()
	f.goals[req.GoalID] = req
	f.mu.Unlock()
	subj, _ := f.subj.AgentLaunchSubject(launcher)
	ctx, cancel := context.WithTimeout(f.t.Context(), 10*time.Second)
	defer cancel()
	var out protocol.LaunchReply
	if err := bus.Request(ctx, f.nc, subj, req, &out); err != nil {
		f.t.Fatalf("launch: %v", err)
	}
	return out.CommID
}

func (f *fakeNet) log(comm string) []protocol.AgentMessage {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.chats[comm]; ok {
		return slices.Clone(c.log)
	}
	return nil
}

func (f *fakeNet) registrations(name string) (calls int, online bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, online = f.cards[name]
	return f.registered[name], online
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (f *fakeNet) waitLog(comm, what string, cond func([]protocol.AgentMessage) bool) []protocol.AgentMessage {
	f.t.Helper()
	var log []protocol.AgentMessage
	waitFor(f.t, what, func() bool { log = f.log(comm); return cond(log) })
	return log
}

func hasType(typ string) func([]protocol.AgentMessage) bool {
	return func(log []protocol.AgentMessage) bool {
		return slices.ContainsFunc(log, func(m protocol.AgentMessage) bool { return m.Type == typ })
	}
}

// start runs a runtime for agents on its own connection until the test
// ends or the returned stop is called; stop waits for Run to return.
func (f *fakeNet) start(agents []agentkit.Agent, opts ...agentkit.Option) (stop func()) {
	f.t.Helper()
	nc, err := f.b.NewConn("agents")
	if err != nil {
		f.t.Fatal(err)
	}
	opts = append([]agentkit.Option{agentkit.WithRequestTimeout(2 * time.Second), agentkit.WithResyncInterval(500 * time.Millisecond)}, opts...)
	rt, err := agentkit.NewRuntime(nc, f.subj, agents, opts...)
	if err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rt.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					f.t.Errorf("Run: %v", err)
				}
			case <-time.After(10 * time.Second):
				f.t.Error("Run did not return after cancel")
			}
			nc.Close()
		})
	}
	f.t.Cleanup(stop)
	for _, a := range agents {
		waitFor(f.t, a.Card.Name+" registered", func() bool { _, on := f.registrations(a.Card.Name); return on })
	}
	return stop
}

var errNoMove = errors.New("no move")
