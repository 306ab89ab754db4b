package registry

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit/protocol"
)

// Outcomes written to KV reach every instance's index: the agent that
// concluded a task comes first for the same need in other words, and a
// failure alone changes nothing.
func TestOutcomesShared(t *testing.T) {
	b, s1 := newRegistry(t, Config{})
	s2 := start(t, b, Config{})
	nc := b.Conn()
	ctx := t.Context()
	for _, n := range []string{"planner-a", "planner-b"} {
		register(t, nc, b, protocol.AgentCard{Name: n, Description: "Plans trips: itineraries, transport and places to stay.",
			Type: protocol.TypeAssistant, Capabilities: []string{"trip planning"}})
	}
	req := protocol.SearchRequest{Query: "find a traditional ryokan in Kyoto for the cherry blossom week", IncludeOffline: true}
	// Read-your-writes holds for the instance that took a registration;
	// the other learns it from its KV watch a moment later.
	eventually(t, 5*time.Second, "both instances index both cards", func() bool {
		return len(searchVia(t, s1, req)) == 2 && len(searchVia(t, s2, req)) == 2
	})
	before := searchNames(t, nc, b, req)
	if len(before) != 2 {
		t.Fatalf("results %v", before)
	}
	top, other := before[0], before[1]
	kv, err := b.KV(ctx, BucketOutcomes)
	if err != nil {
		t.Fatal(err)
	}

	// A failure of the agent ranked second changes nothing...
	if err := RecordOutcomes(ctx, kv, other, OutcomeEntry{TaskID: "c1.t1", Task: "Book a ryokan in Kyoto during the cherry blossom season", Status: protocol.TaskFailed}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // let the watch apply it
	for _, s := range []*Service{s1, s2} {
		if got := searchVia(t, s, req); !slices.Equal(got, before) {
			t.Errorf("after a failure: %v, want %v", got, before)
		}
	}
	// ... a concluded task (the same task id, tried again) puts it first.
	if err := RecordOutcomes(ctx, kv, other, OutcomeEntry{TaskID: "c1.t1", Task: "Book a ryokan in Kyoto during the cherry blossom season", Status: protocol.TaskCompleted}); err != nil {
		t.Fatal(err)
	}
	for i, s := range []*Service{s1, s2} {
		eventually(t, 5*time.Second, fmt.Sprintf("instance %d ranks %s first", i+1, other), func() bool {
			return searchVia(t, s, req)[0] == other
		})
	}
	e, err := kv.Get(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	var rec OutcomeRecord
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		t.Fatal(err)
	}
	if len(rec.Outcomes) != 1 || rec.Outcomes[0].Status != protocol.TaskCompleted {
		t.Errorf("record %+v: want the one task, concluded (the retry replaces the failure)", rec)
	}
	if got := searchNames(t, nc, b, req); got[1] != top {
		t.Errorf("after: %v, want %s second", got, top)
	}
}

// Concurrent writers lose nothing, and an agent keeps its latest outcomes.
func TestRecordOutcome(t *testing.T) {
	b, _ := newRegistry(t, Config{})
	ctx := t.Context()
	kv, err := b.KV(ctx, BucketOutcomes)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 20 {
		wg.Go(func() {
			errs <- RecordOutcomes(ctx, kv, "busy", OutcomeEntry{TaskID: fmt.Sprint("t", i), Task: fmt.Sprint("task ", i), Status: protocol.TaskCompleted})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	count := func() []OutcomeEntry {
		e, err := kv.Get(ctx, "busy")
		if err != nil {
			t.Fatal(err)
		}
		var rec OutcomeRecord
		if err := json.Unmarshal(e.Value(), &rec); err != nil {
			t.Fatal(err)
		}
		return rec.Outcomes
	}
	if n := len(count()); n != 20 {
		t.Fatalf("%d outcomes after 20 concurrent writes", n)
	}
	for i := 20; i < 50; i++ {
		if err := RecordOutcomes(ctx, kv, "busy", OutcomeEntry{TaskID: fmt.Sprint("t", i), Task: fmt.Sprint("task ", i), Status: protocol.TaskFailed}); err != nil {
			t.Fatal(err)
		}
	}
	// The latest 32: two of the concurrent ones, then t20..t49 in order.
	outs := count()
	if len(outs) != 32 {
		t.Fatalf("%d outcomes, want 32", len(outs))
	}
	for i, o := range outs[2:] {
		if want := fmt.Sprint("t", 20+i); o.TaskID != want {
			t.Errorf("outcome %d is %s, want %s", i+2, o.TaskID, want)
		}
	}

	for _, c := range []struct {
		agent string
		e     OutcomeEntry
	}{
		{"Not A Name", OutcomeEntry{Task: "x", Status: protocol.TaskCompleted}},
		{"busy", OutcomeEntry{Task: "x", Status: "done"}},
		{"busy", OutcomeEntry{Task: "  ", Status: protocol.TaskFailed}},
	} {
		if err := RecordOutcomes(ctx, kv, c.agent, c.e); err == nil {
			t.Errorf("RecordOutcomes(%q, %+v): no error", c.agent, c.e)
		}
	}
}
