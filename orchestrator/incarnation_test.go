package orchestrator_test

import (
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/internal/stacktest"
	"github.com/ioa-nats/ioa/orchestrator"
)

// A member that dies holding a task and comes back as a new process, with
// no memory of the chat, gets its task back at once: long before the
// referee's nudges (a third of a 10-minute speaker timeout), the heartbeat
// TTL or the task timeout would have moved it.
func TestRestartedMemberGetsItsTaskBack(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{Coordinator: true, Orchestrator: orchestrator.Config{
		SpeakerTimeout: 10 * time.Minute, TaskTimeout: 10 * time.Minute, GoalTimeout: 20 * time.Minute}})
	first := s.StartStateless(t, "worker", "first", func(int, protocol.AgentMessage, protocol.Task) []protocol.AgentMessage {
		return nil // dies before it answers
	})
	s.WaitOnline(t, "worker")
	var sub protocol.SubmitReply
	if err := s.Request(t, s.Bus.Subjects().Goal(bus.GoalSubmit), protocol.GoalRequest{Goal: "Do step one of job 7.", Team: []string{"worker"}}, &sub); err != nil {
		t.Fatal(err)
	}
	var assigned protocol.AgentMessage
	select {
	case assigned = <-first.Deliveries:
	case <-time.After(30 * time.Second):
		t.Fatal("the first process never got its task")
	}
	first.Close()

	second := s.StartStateless(t, "worker", "second", func(_ int, _ protocol.AgentMessage, task protocol.Task) []protocol.AgentMessage {
		return []protocol.AgentMessage{stacktest.Result(task, "done by the second process")}
	})
	var again protocol.AgentMessage
	select {
	case again = <-second.Deliveries:
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
	a := s.StartStateless(t, "worker", "only", func(delivery int, m protocol.AgentMessage, task protocol.Task) []protocol.AgentMessage {
		if delivery == 1 { // takes the task, then loses it
			if m.Type == protocol.MsgAsyncAssign {
				return []protocol.AgentMessage{{Type: protocol.MsgTaskProgress, TaskID: task.TaskID, Content: "started"}}
			}
			return nil
		}
		return []protocol.AgentMessage{stacktest.Result(task, "done on the nudge")}
	})
	s.WaitOnline(t, "worker")
	res := s.SubmitWithin(t, protocol.GoalRequest{Goal: "Do step one of job 1. Do step two of job 2.", Team: []string{"worker"}}, 60*time.Second)
	if res.Status != protocol.GoalConcluded || res.Outcome != protocol.OutcomeSucceeded {
		t.Fatalf("goal: %+v", res)
	}
	if len(a.Deliveries) < 2 {
		t.Errorf("the worker got %d deliveries of its assignments, want the first and the nudge's", len(a.Deliveries))
	}
}
