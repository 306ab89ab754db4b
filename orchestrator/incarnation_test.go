package orchestrator_test

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
	"github.com/ioa-nats/ioa/internal/stacktest"
	"github.com/ioa-nats/ioa/orchestrator"
)

// statelessAgent is a member that keeps nothing between messages, like a
// script with the nats CLI: it registers, accepts invitations and acts on
// each inbox message alone. onTask decides, for each delivery of an
// assignment, what to send for the task (nothing, progress, a result).
type statelessAgent struct {
	nc         *nats.Conn
	deliveries chan protocol.AgentMessage // every assignment that reached it
}

func startStateless(t *testing.T, s *stacktest.Stack, name, incarnation string, onTask func(delivery int, m protocol.AgentMessage, task protocol.Task) []protocol.AgentMessage) *statelessAgent {
	t.Helper()
	nc, err := s.Bus.NewConn("stateless-" + name + "-" + incarnation)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	a := &statelessAgent{nc: nc, deliveries: make(chan protocol.AgentMessage, 64)}
	subj := s.Bus.Subjects()
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
		out, _ := subj.Outbox(name, msg.CommID)
		if msg.State == protocol.StateDiscussion && len(msg.NextSpeaker) > 0 && msg.NextSpeaker[0] == name {
			// Its turn in a discussion: nothing to add, back to the sender.
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_ = bus.Request(ctx, nc, out, protocol.AgentMessage{ID: fmt.Sprintf("%s-%s-turn-%d", name, incarnation, msg.Seq),
					Type: protocol.MsgDiscussion, Content: name + ": ready", NextSpeaker: []string{msg.Sender}}, nil)
			}()
		}
		for _, task := range msg.Tasks {
			if task.Assignee != name {
				continue
			}
			a.deliveries <- msg
			mu.Lock()
			count[msg.CommID+"/"+task.TaskID]++
			n := count[msg.CommID+"/"+task.TaskID]
			mu.Unlock()
			go func() {
				for i, reply := range onTask(n, msg, task) {
					reply.ID = fmt.Sprintf("%s-%s-%s-%d-%d", name, incarnation, task.TaskID, n, i)
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					_ = bus.Request(ctx, nc, out, reply, nil)
					cancel()
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
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := bus.Request(ctx, nc, register, card, nil); err != nil {
		t.Fatalf("register %s (%s): %v", name, incarnation, err)
	}
	return a
}

func result(task protocol.Task, text string) protocol.AgentMessage {
	return protocol.AgentMessage{Type: protocol.MsgTaskResult, TaskID: task.TaskID, TaskStatus: protocol.TaskCompleted, TaskConclusion: text}
}

// A member that dies holding a task and comes back as a new process, with
// no memory of the chat, gets its task back at once: long before the
// referee's nudges (a third of a 10-minute speaker timeout), the heartbeat
// TTL or the task timeout would have moved it.
func TestRestartedMemberGetsItsTaskBack(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{Coordinator: true, Orchestrator: orchestrator.Config{
		SpeakerTimeout: 10 * time.Minute, TaskTimeout: 10 * time.Minute, GoalTimeout: 20 * time.Minute}})
	first := startStateless(t, s, "worker", "first", func(int, protocol.AgentMessage, protocol.Task) []protocol.AgentMessage {
		return nil // dies before it answers
	})
	s.WaitOnline(t, "worker")
	var sub protocol.SubmitReply
	if err := s.Request(t, s.Bus.Subjects().Goal(bus.GoalSubmit), protocol.GoalRequest{Goal: "Do step one of job 7.", Team: []string{"worker"}}, &sub); err != nil {
		t.Fatal(err)
	}
	var assigned protocol.AgentMessage
	select {
	case assigned = <-first.deliveries:
	case <-time.After(30 * time.Second):
		t.Fatal("the first process never got its task")
	}
	first.nc.Close()

	second := startStateless(t, s, "worker", "second", func(_ int, _ protocol.AgentMessage, task protocol.Task) []protocol.AgentMessage {
		return []protocol.AgentMessage{result(task, "done by the second process")}
	})
	var again protocol.AgentMessage
	select {
	case again = <-second.deliveries:
	case <-time.After(20 * time.Second):
		t.Fatal("the restarted member was not handed its task")
	}
	if again.Seq != assigned.Seq || again.Tasks[0].TaskID != assigned.Tasks[0].TaskID {
		t.Errorf("handed back seq %d %+v, want the assignment seq %d", again.Seq, again.Tasks, assigned.Seq)
	}
	var st protocol.GoalStatus
	stacktest.WaitFor(t, "the goal to end", func() bool {
		return s.Request(t, s.Bus.Subjects().Goal(bus.GoalGet), protocol.GoalIDRequest{GoalID: sub.GoalID}, &st) == nil && protocol.GoalEnded(st.Status)
	})
	if st.Status != protocol.GoalConcluded || st.Result == nil || st.Result.Outcome != protocol.OutcomeSucceeded {
		t.Fatalf("goal ended %s: %+v", st.Status, st.Result)
	}
}

// The nudge of a running assignee is the assignment that carries its task,
// not the chat's last message (for an async task, usually the pause): a
// member that lost its task can act on the nudge alone.
func TestNudgeResendsTheAssignment(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{Coordinator: true, Orchestrator: orchestrator.Config{
		SpeakerTimeout: 3 * time.Second, TaskTimeout: 10 * time.Minute, GoalTimeout: 20 * time.Minute}})
	a := startStateless(t, s, "worker", "only", func(delivery int, m protocol.AgentMessage, task protocol.Task) []protocol.AgentMessage {
		if delivery == 1 { // takes the task, then loses it
			if m.Type == protocol.MsgAsyncAssign {
				return []protocol.AgentMessage{{Type: protocol.MsgTaskProgress, TaskID: task.TaskID, Content: "started"}}
			}
			return nil
		}
		return []protocol.AgentMessage{result(task, "done on the nudge")}
	})
	s.WaitOnline(t, "worker")
	res := s.SubmitWithin(t, protocol.GoalRequest{Goal: "Do step one of job 1. Do step two of job 2.", Team: []string{"worker"}}, 60*time.Second)
	if res.Status != protocol.GoalConcluded || res.Outcome != protocol.OutcomeSucceeded {
		t.Fatalf("goal: %+v", res)
	}
	async := false
	for len(a.deliveries) > 0 {
		m := <-a.deliveries
		async = async || m.Type == protocol.MsgAsyncAssign
	}
	if !async {
		t.Log("the coordinator assigned the steps as sync tasks; the nudge still carried them")
	}
}
