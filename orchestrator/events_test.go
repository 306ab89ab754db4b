package orchestrator_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/agentkit/rules"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/orchestrator"
	"github.com/nats-io/nats.go/jetstream"
)

// storedEvent is a goal event as IOA_GOALS holds it, with its message id.
type storedEvent struct {
	protocol.GoalEvent
	msgID string
}

// goalEvents reads every event of goal from IOA_GOALS, in stream order,
// until its end event is there.
func goalEvents(t *testing.T, w *world, goal string) []storedEvent {
	t.Helper()
	subject, err := w.b.Subjects().GoalEvents(goal)
	if err != nil {
		t.Fatal(err)
	}
	st, err := w.b.JetStream().Stream(t.Context(), bus.StreamGoals)
	if err != nil {
		t.Fatal(err)
	}
	var evs []storedEvent
	waitFor(t, "the end event of "+goal, func() bool {
		evs = evs[:0]
		for seq := uint64(1); ; {
			raw, err := st.GetMsg(t.Context(), seq, jetstream.WithGetMsgSubject(subject))
			if err != nil {
				break
			}
			var ev protocol.GoalEvent
			if err := json.Unmarshal(raw.Data, &ev); err != nil {
				t.Fatalf("event %d: %v", raw.Sequence, err)
			}
			evs = append(evs, storedEvent{ev, raw.Header.Get(jetstream.MsgIDHeader)})
			seq = raw.Sequence + 1
		}
		return len(evs) > 0 && evs[len(evs)-1].Result != nil
	})
	return evs
}

// The events that restate a chat's entries (message, task_assigned,
// task_done) are published without an acknowledgement, the goal's own steps
// with one: all of them must still be stored, one per entry, in the log's
// order, and only the acknowledged ones carry the message id that makes
// sending them again safe.
func TestGoalEventsRestateEveryLoggedEntryInOrder(t *testing.T) {
	w := newWorld(t, orchestrator.Config{})
	runAgents(t, w,
		orchestrator.Coordinator("coordinator", rules.New(rules.Config{})),
		funcAgent("apple-counter", "Counts apples in a basket.", []string{"counting apples"},
			func(agentkit.Task) (string, error) { return "12 apples", nil }),
		funcAgent("fence-painter", "Paints fences.", []string{"painting fences"},
			func(agentkit.Task) (string, error) { return "fence painted", nil }),
	)
	res := w.submitWait(t, protocol.GoalRequest{Goal: "Count the apples. Paint the fence."})
	if res.Status != protocol.GoalConcluded {
		t.Fatalf("result = %+v", res)
	}
	log := w.chatLog(t, "coordinator", res.CommID)
	evs := goalEvents(t, w, res.GoalID)

	var msgSeqs, logSeqs []uint64
	var assigned, done, tasks, results int
	kinds := map[string]bool{}
	for _, ev := range evs {
		kinds[ev.Kind] = true
		restated := ev.Kind == protocol.EventMessage || ev.Kind == protocol.EventTaskAssigned || ev.Kind == protocol.EventTaskDone
		if restated != (ev.msgID == "") {
			t.Errorf("%s event: message id %q; want one only on the goal's own steps", ev.Kind, ev.msgID)
		}
		switch ev.Kind {
		case protocol.EventMessage:
			if ev.Message == nil || ev.CommID != res.CommID {
				t.Fatalf("message event without its message or chat: %+v", ev.GoalEvent)
			}
			msgSeqs = append(msgSeqs, ev.Message.Seq)
		case protocol.EventTaskAssigned:
			assigned++
		case protocol.EventTaskDone:
			done++
		}
	}
	for _, m := range log {
		logSeqs = append(logSeqs, m.Seq)
		tasks += len(m.Tasks)
		if m.Type == protocol.MsgTaskResult {
			results++
		}
	}
	if !slices.Equal(msgSeqs, logSeqs) {
		t.Errorf("message events carry seqs %v; the chat's log has %v", msgSeqs, logSeqs)
	}
	if assigned != tasks || done != results || tasks == 0 {
		t.Errorf("task_assigned %d, task_done %d; the log assigns %d tasks and reports %d results", assigned, done, tasks, results)
	}
	for _, k := range []string{protocol.EventAccepted, protocol.EventTeamFormed, protocol.EventConcluded} {
		if !kinds[k] {
			t.Errorf("no %s event among %v", k, kinds)
		}
	}
}
