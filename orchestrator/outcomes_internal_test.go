package orchestrator

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/bus/bustest"
	"github.com/ioa-nats/ioa/registry"
)

// A stop that cuts a write of task outcomes short loses nothing and warns
// of nothing: the entries go back in the queue and the writer's last flush,
// on a context of its own, writes them (ioa demo stopped while the outcome
// of its last task was being written, and said so as a warning).
func TestOutcomesCutShortByAStopAreWrittenLast(t *testing.T) {
	b := bustest.New(t)
	kv, err := b.JetStream().KeyValue(t.Context(), bus.BucketOutcomes)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	s := &Service{outcomes: kv, outcomeQ: newOutcomeWriter(), log: slog.New(slog.NewTextHandler(&logs, nil))}
	s.recordOutcome("c1", protocol.Task{TaskID: "t1", Assignee: "calculator", TaskDesc: "Compute 2 + 2"}, protocol.TaskCompleted)
	s.recordOutcome("c1", protocol.Task{TaskID: "t2", Assignee: "calculator", TaskDesc: "Compute 3 * 3"}, protocol.TaskFailed)

	stopped, cancel := context.WithCancel(t.Context())
	cancel()
	s.flushOutcomes(stopped) // the stop came during the write
	if strings.Contains(logs.String(), "record task outcomes") {
		t.Errorf("a write cut short by a stop warned:\n%s", logs.String())
	}
	s.writeOutcomes(stopped) // returns after its last flush
	if logs.Len() != 0 {
		t.Errorf("logged:\n%s", logs.String())
	}
	e, err := kv.Get(t.Context(), "calculator")
	if err != nil {
		t.Fatalf("the outcomes were not written: %v", err)
	}
	var rec registry.OutcomeRecord
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range rec.Outcomes {
		got = append(got, o.TaskID+" "+o.Status)
	}
	if want := "c1.t1 completed, c1.t2 failed"; strings.Join(got, ", ") != want {
		t.Errorf("outcomes %q, want %s, in order", got, want)
	}
}
