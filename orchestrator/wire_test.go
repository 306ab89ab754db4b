package orchestrator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/internal/stacktest"
	"github.com/ioa-nats/ioa/orchestrator"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// wireAgent speaks docs/protocol.md with nothing but a NATS connection: no
// agentkit. It proves that any program can take part.
type wireAgent struct {
	t    testing.TB
	nc   *nats.Conn
	subj bus.Subjects
	card protocol.AgentCard

	// speak returns the message to send when the agent holds the turn, or
	// nil to stay silent.
	speak func(c protocol.Chat) *protocol.AgentMessage
	// work answers a task; an empty answer means no result is ever sent.
	work func(t protocol.Task) string
	// team is who the agent teams up with when it launches a goal.
	team []string
	// launchBusyFor makes launches answer 503 for this long after the
	// first one, as a launcher whose team-up waits on partitions whose
	// leases are moving does.
	launchBusyFor time.Duration
	firstLaunch   time.Time
	// holdAsync keeps async results back until the chat is paused on them,
	// so a test can walk through pause_and_trigger deterministically.
	holdAsync bool
	mu        sync.Mutex
	chats     map[string]protocol.Chat
	logs      map[string][]protocol.AgentMessage
	sent      int
	invites   int    // invitations received
	decline   string // when set, invitations are refused with this reason
}

func newWireAgent(t testing.TB, b *bus.Bus, card protocol.AgentCard) *wireAgent {
	t.Helper()
	nc, err := b.NewConn("wire-" + card.Name)
	if err != nil {
		t.Fatal(err)
	}
	a := &wireAgent{t: t, nc: nc, subj: b.Subjects(), card: card,
		chats: map[string]protocol.Chat{}, logs: map[string][]protocol.AgentMessage{}}
	return a
}

func (a *wireAgent) start(ctx context.Context) {
	t := a.t
	t.Helper()
	if err := bus.Request(ctx, a.nc, a.subj.Registry(bus.RegistryRegister), a.card, nil); err != nil {
		t.Fatalf("register %s: %v", a.card.Name, err)
	}
	a.listen()
}

// listen subscribes the agent's subjects without registering it.
func (a *wireAgent) listen() {
	t := a.t
	t.Helper()
	inbox, _ := a.subj.AgentInboxes(a.card.Name)
	invite, _ := a.subj.AgentInviteSubject(a.card.Name)
	launch, _ := a.subj.AgentLaunchSubject(a.card.Name)
	subs := []struct {
		subject string
		fn      nats.MsgHandler
	}{
		{inbox, a.onInbox},
		{invite, a.onInvite},
		{launch, a.onLaunch},
	}
	for _, s := range subs {
		if _, err := a.nc.Subscribe(s.subject, s.fn); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

func (a *wireAgent) onInvite(m *nats.Msg) {
	a.mu.Lock()
	a.invites++
	reason := a.decline
	a.mu.Unlock()
	_ = m.Respond(bus.Encode(protocol.InviteReply{Accept: reason == "", Reason: reason}))
}

func (a *wireAgent) declineWith(reason string) {
	a.mu.Lock()
	a.decline = reason
	a.mu.Unlock()
}

func (a *wireAgent) invited() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.invites
}

func (a *wireAgent) onLaunch(m *nats.Msg) {
	var req protocol.LaunchRequest
	if err := json.Unmarshal(m.Data, &req); err != nil {
		_ = m.Respond(bus.ErrorBody(err))
		return
	}
	a.mu.Lock()
	if a.firstLaunch.IsZero() {
		a.firstLaunch = time.Now()
	}
	busy := time.Since(a.firstLaunch) < a.launchBusyFor
	a.mu.Unlock()
	if busy {
		_ = m.RespondMsg(bus.ErrorMsg(m.Reply, protocol.Errorf(protocol.ErrUnavailable, "no orchestrator instance owns %s yet; send again", req.GoalID)))
		return
	}
	team := a.team
	if len(req.Team) > 0 {
		team = req.Team
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var reply protocol.TeamupReply
		err := bus.Request(ctx, a.nc, a.subj.Teamup(), protocol.TeamupRequest{GoalID: req.GoalID, Launcher: a.card.Name, Members: team}, &reply)
		if err != nil {
			_ = m.RespondMsg(bus.ErrorMsg(m.Reply, err))
			return
		}
		_ = m.Respond(bus.Encode(protocol.LaunchReply{CommID: reply.CommID}))
	}()
}

func (a *wireAgent) onInbox(m *nats.Msg) {
	var msg protocol.AgentMessage
	if err := json.Unmarshal(m.Data, &msg); err != nil {
		a.t.Errorf("%s: bad inbox message: %v", a.card.Name, err)
		return
	}
	a.mu.Lock()
	prev := a.chats[msg.CommID]
	if msg.Seq <= prev.LastSeq {
		a.mu.Unlock() // delivered again (a referee nudge): already applied
		return
	}
	c, err := protocol.Apply(prev, msg)
	if err != nil {
		a.mu.Unlock()
		a.t.Errorf("%s: replica refused seq %d (%s): %v", a.card.Name, msg.Seq, msg.Type, err)
		return
	}
	a.chats[msg.CommID] = c
	a.logs[msg.CommID] = append(a.logs[msg.CommID], msg)
	a.mu.Unlock()

	var out []protocol.AgentMessage
	for _, task := range msg.Tasks {
		if task.Assignee != a.card.Name || a.work == nil {
			continue
		}
		answer := a.work(task)
		if answer == "" {
			continue
		}
		result := protocol.AgentMessage{Type: protocol.MsgTaskResult, TaskID: task.TaskID, TaskStatus: protocol.TaskCompleted, TaskConclusion: answer}
		if msg.Type != protocol.MsgAsyncAssign {
			out = append(out, result)
			continue
		}
		out = append(out, protocol.AgentMessage{Type: protocol.MsgTaskProgress, TaskID: task.TaskID, Content: "started"})
		if !a.holdAsync {
			out = append(out, result)
			continue
		}
		go func() {
			for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
				a.mu.Lock()
				paused := a.chats[msg.CommID].State == protocol.StatePause
				a.mu.Unlock()
				if paused {
					break
				}
			}
			if _, err := a.send(msg.CommID, result); err != nil {
				a.t.Logf("%s: send held result: %v", a.card.Name, err)
			}
		}()
	}
	gotTurn := c.State == protocol.StateDiscussion && c.Speaker == a.card.Name &&
		!(prev.State == protocol.StateDiscussion && prev.Speaker == a.card.Name)
	if gotTurn && a.speak != nil {
		if next := a.speak(c); next != nil {
			out = append(out, *next)
		}
	}
	if len(out) == 0 {
		return
	}
	go func() {
		for _, o := range out {
			if _, err := a.send(msg.CommID, o); err != nil {
				a.t.Logf("%s: send %s: %v", a.card.Name, o.Type, err)
			}
		}
	}()
}

// send posts to the outbox and returns the reply or error.
func (a *wireAgent) send(comm string, m protocol.AgentMessage) (protocol.SendReply, error) {
	a.mu.Lock()
	a.sent++
	if m.ID == "" {
		m.ID = fmt.Sprintf("%s-%d", a.card.Name, a.sent)
	}
	a.mu.Unlock()
	subject, err := a.subj.Outbox(a.card.Name, comm)
	if err != nil {
		return protocol.SendReply{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var reply protocol.SendReply
	err = bus.Request(ctx, a.nc, subject, m, &reply)
	return reply, err
}

func (a *wireAgent) log(comm string) []protocol.AgentMessage {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.logs[comm])
}

// world is a bus with a registry and an orchestrator.
type world struct {
	*stacktest.Stack
	b  *bus.Bus
	nc *nats.Conn
}

func newWorld(t testing.TB, cfg orchestrator.Config) *world {
	t.Helper()
	if cfg.Logger == nil && testing.Verbose() {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	s := stacktest.Start(t, stacktest.Options{Orchestrator: cfg})
	return &world{Stack: s, b: s.Bus, nc: s.Bus.Conn()}
}

// submitWait submits a goal with wait and returns its result.
func (w *world) submitWait(t testing.TB, req protocol.GoalRequest) protocol.GoalResult {
	t.Helper()
	return w.SubmitWithin(t, req, 30*time.Second)
}

// goalsBucket opens the goal records' bucket, to read or write a record
// as another instance would.
func (w *world) goalsBucket(t testing.TB) jetstream.KeyValue {
	t.Helper()
	js, err := jetstream.New(w.nc)
	if err != nil {
		t.Fatal(err)
	}
	goals, err := js.KeyValue(t.Context(), bus.BucketGoals)
	if err != nil {
		t.Fatal(err)
	}
	return goals
}

// chatLog reads a chat's authoritative log from the stream via history.
func (w *world) chatLog(t testing.TB, member, comm string) []protocol.AgentMessage {
	t.Helper()
	subject, _ := w.b.Subjects().History(member, comm)
	var h protocol.HistoryReply
	if err := bus.Request(t.Context(), w.nc, subject, protocol.HistoryRequest{}, &h); err != nil {
		t.Fatalf("history: %v", err)
	}
	return h.Messages
}

func card(name, desc string) protocol.AgentCard {
	return protocol.AgentCard{Name: name, Description: desc, Type: protocol.TypeTool}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	stacktest.WaitFor(t, what, cond)
}
