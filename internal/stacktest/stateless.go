package stacktest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
)

// Stateless is a member that keeps nothing between messages, like a script
// with the nats CLI: it registers with an incarnation, accepts invitations,
// hands a discussion turn back to whoever gave it, and acts on each
// assignment it receives. Close ends it abruptly, as a killed process.
type Stateless struct {
	Name, Incarnation string
	// Deliveries gets every assignment addressed to it, as delivered.
	Deliveries chan protocol.AgentMessage

	nc *nats.Conn
}

// OnTask decides what to send for a task at its n-th delivery to this
// process: nothing, progress, a result. It runs on its own goroutine.
type OnTask func(n int, m protocol.AgentMessage, task protocol.Task) []protocol.AgentMessage

// StartStateless starts a stateless member on its own connection; it is
// closed when the test ends.
func (s *Stack) StartStateless(t testing.TB, name, incarnation string, onTask OnTask) *Stateless {
	t.Helper()
	nc, err := s.Bus.NewConn("stateless-" + name + "-" + incarnation)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	a := &Stateless{Name: name, Incarnation: incarnation, Deliveries: make(chan protocol.AgentMessage, 256), nc: nc}
	subj := s.Bus.Subjects()
	send := func(out string, m protocol.AgentMessage) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = bus.Request(ctx, nc, out, m, nil)
	}
	var mu sync.Mutex
	count := map[string]int{}
	inbox, _ := subj.AgentInboxes(name)
	invite, _ := subj.AgentInviteSubject(name)
	if _, err := nc.Subscribe(invite, func(m *nats.Msg) { _ = m.Respond(bus.Encode(protocol.InviteReply{Accept: true})) }); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Subscribe(inbox, func(m *nats.Msg) {
		var msg protocol.AgentMessage
		if json.Unmarshal(m.Data, &msg) != nil {
			return
		}
		out, err := subj.Outbox(name, msg.CommID)
		if err != nil {
			return
		}
		if msg.State == protocol.StateDiscussion && len(msg.NextSpeaker) > 0 && msg.NextSpeaker[0] == name {
			go send(out, protocol.AgentMessage{ID: fmt.Sprintf("%s-%s-turn-%d", name, incarnation, msg.Seq),
				Type: protocol.MsgDiscussion, Content: name + ": ready", NextSpeaker: []string{msg.Sender}})
		}
		for _, task := range msg.Tasks {
			if task.Assignee != name {
				continue
			}
			select {
			case a.Deliveries <- msg:
			default:
			}
			mu.Lock()
			count[msg.CommID+"/"+task.TaskID]++
			n := count[msg.CommID+"/"+task.TaskID]
			mu.Unlock()
			go func() {
				for i, reply := range onTask(n, msg, task) {
					if reply.ID == "" {
						reply.ID = fmt.Sprintf("%s-%s-%s-%d-%d", name, incarnation, task.TaskID, n, i)
					}
					send(out, reply)
				}
			}()
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	register, _ := subj.As(subj.Registry(bus.RegistryRegister), name)
	card := protocol.AgentCard{Name: name, Description: "Does the numbered steps of jobs.", Type: protocol.TypeTool, Incarnation: incarnation}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := bus.Request(ctx, nc, register, card, nil); err != nil {
		t.Fatalf("stacktest: register %s (%s): %v", name, incarnation, err)
	}
	return a
}

// Close ends the member at once, with whatever it was doing.
func (a *Stateless) Close() { a.nc.Close() }

// Result is a completed task_result for task.
func Result(task protocol.Task, text string) protocol.AgentMessage {
	return protocol.AgentMessage{Type: protocol.MsgTaskResult, TaskID: task.TaskID, TaskStatus: protocol.TaskCompleted, TaskConclusion: text}
}
