package faulttest

import (
	"sync"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/orchestrator"
)

// TestFaultDuplicateDeliveries re-sends the same outbox message (a turn
// message and a task_result), concurrently and then one by one, as an
// agent does when replies are lost: each is logged once, every sender gets
// the same reply, the task's trigger is written once, and a second result
// for the task under a new id is refused.
func TestFaultDuplicateDeliveries(t *testing.T) {
	const copies = 16
	s := newStack(t, stackOpts{orch: orchestrator.Config{}})
	lead := newWire(t, s, "lead", "helper")
	helper := newWire(t, s, "helper")
	rec := record(t, s.nc, s.subj)
	goal, comm := lead.startChat(t, s, "dedupe")

	resend := func(w *wire, m protocol.AgentMessage) protocol.SendReply {
		t.Helper()
		replies := make([]protocol.SendReply, copies)
		errs := make([]error, copies)
		var wg sync.WaitGroup
		for i := range copies {
			wg.Go(func() { replies[i], errs[i] = w.send(comm, m) })
		}
		wg.Wait()
		for range copies { // and again, one by one, after the fact
			r, err := w.send(comm, m)
			replies, errs = append(replies, r), append(errs, err)
		}
		for i := range replies {
			if errs[i] != nil {
				t.Fatalf("%s copy %d: %v", m.ID, i, errs[i])
			}
			if replies[i] != replies[0] {
				t.Fatalf("%s copy %d got %+v, copy 0 got %+v", m.ID, i, replies[i], replies[0])
			}
		}
		return replies[0]
	}
	assign := resend(lead, protocol.AgentMessage{ID: "assign-1", Type: protocol.MsgSyncTaskAssign,
		Tasks: []protocol.Task{{TaskID: "t1", Assignee: "helper", TaskDesc: "answer"}}})
	result := resend(helper, protocol.AgentMessage{ID: "result-1", Type: protocol.MsgTaskResult, TaskID: "t1",
		TaskStatus: protocol.TaskCompleted, TaskConclusion: "42"})
	if result.Seq != assign.Seq+1 {
		t.Fatalf("result logged at seq %d, assignment at %d", result.Seq, assign.Seq)
	}
	// The same result under another id is a second result: refused.
	_, err := helper.send(comm, protocol.AgentMessage{ID: "result-2", Type: protocol.MsgTaskResult, TaskID: "t1",
		TaskStatus: protocol.TaskCompleted, TaskConclusion: "42"})
	if err == nil {
		t.Fatal("a second result for t1 under a new id was accepted")
	}
	resend(lead, protocol.AgentMessage{ID: "end", Type: protocol.MsgConclusion, Content: "42"})
	st := waitEnded(t, s.nc, s.subj, 20*time.Second, goal)[goal]
	if st.Status != protocol.GoalConcluded {
		t.Fatalf("goal %+v", st)
	}
	log, err := history(s.nc, s.subj, "lead", comm)
	if err != nil {
		t.Fatal(err)
	}
	var a audit
	a.check(comm, rec.chat(comm), rec.acks(comm), log, true)
	// start, assignment, result, conclusion.
	if len(log) != 4 || a.Lost+a.Duplicated != 0 {
		for _, m := range log {
			t.Logf("%d %s %s %s", m.Seq, m.Sender, m.Type, m.ID)
		}
		t.Fatalf("log of %d messages; %s %v", len(log), a, a.Problems)
	}
	// The trigger subject holds the task's result once.
	subject, _ := s.subj.Task(comm, "t1")
	info, err := s.b.JetStream().Stream(t.Context(), bus.StreamTasks)
	if err != nil {
		t.Fatal(err)
	}
	si, err := info.Info(t.Context(), jsSubjectFilter(subject))
	if err != nil {
		t.Fatal(err)
	}
	if n := si.State.Subjects[subject]; n != 1 {
		t.Fatalf("%s holds %d results, want 1", subject, n)
	}
	t.Logf("%d copies each of 3 messages: %s; trigger %s written once", 2*copies, a, subject)
}
