package orchestrator_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/internal/stacktest"
	"github.com/ioa-nats/ioa/orchestrator"
	"github.com/nats-io/nats.go/jetstream"
)

// An instance that dies between logging a task result and storing its
// trigger (here: IOA_TASKS takes no task subjects while the result comes
// in, so the trigger cannot be stored before the kill) leaves a finished
// task that trigger subscribers never hear of. The instance that takes the
// chat over publishes it from the log, once.
func TestTakeoverPublishesAMissingTrigger(t *testing.T) {
	b := startBusAndRegistry(t)
	cfg := orchestrator.Config{LeaseTTL: time.Second}
	first := startInstance(t, b, cfg, nil)
	st := &stacktest.Stack{Bus: b, URL: b.ClientURL()}
	js := b.JetStream()
	tasks, err := js.Stream(t.Context(), bus.StreamTasks)
	if err != nil {
		t.Fatal(err)
	}
	taskSubjects := tasks.CachedInfo().Config
	setSubjects := func(subjects ...string) {
		c := taskSubjects
		c.Subjects = subjects
		if _, err := js.UpdateStream(t.Context(), c); err != nil {
			t.Fatal(err)
		}
	}
	var (
		mu   sync.Mutex
		runs = map[string]int{}
	)
	st.RunAgents(t, nil, funcAgent("stepper", "Does the numbered steps of jobs.", []string{"steps"},
		func(task agentkit.Task) (string, error) {
			mu.Lock()
			runs[task.TaskDesc]++
			first := runs[task.TaskDesc] == 1
			mu.Unlock()
			if first && strings.HasPrefix(task.TaskDesc, "Do step one") {
				setSubjects("ioa.no-tasks") // the result's trigger finds no stream
			}
			return "done: " + task.TaskDesc, nil
		}))
	st.WaitOnline(t, "coordinator")
	nc := b.Conn()
	var sub protocol.SubmitReply
	if err := bus.Request(t.Context(), nc, b.Subjects().Goal(bus.GoalSubmit),
		protocol.GoalRequest{Goal: "Do step one of job 1, then do step two of job 1.", Team: []string{"stepper"}}, &sub); err != nil {
		t.Fatal(err)
	}
	var comm, taskID string
	waitFor(t, "step one's result in the log", func() bool {
		var g protocol.GoalStatus
		if bus.Request(t.Context(), nc, b.Subjects().Goal(bus.GoalGet), protocol.GoalIDRequest{GoalID: sub.GoalID}, &g) != nil || g.CommID == "" {
			return false
		}
		comm = g.CommID
		msgs, _ := historyOf(t, b, "stepper", comm)
		for _, m := range msgs {
			if m.Type == protocol.MsgTaskResult {
				taskID = m.TaskID
				return true
			}
		}
		return false
	})
	first.orch.Kill() // the whole process: the coordinator replica too
	first.stop()
	<-first.done
	setSubjects(taskSubjects.Subjects...)
	subject, err := b.Subjects().Task(comm, taskID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tasks.GetLastMsgForSubject(t.Context(), subject); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Fatalf("the trigger of %s before the takeover: %v, want none stored", taskID, err)
	}
	startInstance(t, b, cfg, nil)
	waitFor(t, "the trigger to be published by the new owner", func() bool {
		_, err := tasks.GetLastMsgForSubject(t.Context(), subject)
		return err == nil
	})
	var g protocol.GoalStatus
	t.Cleanup(func() {
		if t.Failed() {
			msgs, err := historyOf(t, b, "stepper", comm)
			for _, m := range msgs {
				t.Logf("log: seq=%d %s %s state=%s next=%v task=%s %q", m.Seq, m.Sender, m.Type, m.State, m.NextSpeaker, m.TaskID, m.Content)
			}
			t.Logf("history: %v", err)
			mu.Lock()
			t.Logf("task runs: %v", runs)
			mu.Unlock()
			if info, err := tasks.Info(context.Background()); err == nil {
				t.Logf("IOA_TASKS subjects: %v", info.Config.Subjects)
			}
		}
	})
	waitFor(t, "the goal to end", func() bool {
		return bus.Request(t.Context(), nc, b.Subjects().Goal(bus.GoalGet), protocol.GoalIDRequest{GoalID: sub.GoalID}, &g) == nil && protocol.GoalEnded(g.Status)
	})
	if g.Status != protocol.GoalConcluded {
		t.Errorf("goal ended %s: %+v", g.Status, g.Result)
	}
	info, err := tasks.Info(t.Context(), jetstream.WithSubjectFilter(subject))
	if err != nil {
		t.Fatal(err)
	}
	if n := info.State.Subjects[subject]; n != 1 {
		t.Errorf("the trigger of %s is stored %d times, want once", taskID, n)
	}
}

// historyOf reads a chat's log as one of its members.
func historyOf(t *testing.T, b *bus.Bus, member, comm string) ([]protocol.AgentMessage, error) {
	subject, err := b.Subjects().History(member, comm)
	if err != nil {
		return nil, err
	}
	var reply protocol.HistoryReply
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = bus.Request(ctx, b.Conn(), subject, protocol.HistoryRequest{}, &reply)
	return reply.Messages, err
}
