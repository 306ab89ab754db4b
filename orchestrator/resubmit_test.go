package orchestrator_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/orchestrator"
)

// A submission with an idempotency key may be sent again (its answer was
// lost): every copy names the same goal, a waiting copy gets that goal's
// result, and a key reused for another goal is refused.
func TestSubmitWithIdempotencyKeyIsOneGoal(t *testing.T) {
	w := newWorld(t, orchestrator.Config{})
	ctx := t.Context()
	release := make(chan struct{})
	lead := newWireAgent(t, w.b, card("lead", "leads the team"))
	lead.team = []string{"alpha"}
	lead.speak = func(c protocol.Chat) *protocol.AgentMessage {
		select { // the goal stays open until the test releases it
		case <-release:
		case <-time.After(20 * time.Second):
		}
		return &protocol.AgentMessage{Type: protocol.MsgConclusion, Content: "done: " + c.Goal}
	}
	alpha := newWireAgent(t, w.b, card("alpha", "helps"))
	for _, a := range []*wireAgent{lead, alpha} {
		a.start(ctx)
	}
	subject := w.b.Subjects().Goal(bus.GoalSubmit)
	submit := func(req protocol.GoalRequest) (protocol.SubmitReply, error) {
		var r protocol.SubmitReply
		err := bus.Request(ctx, w.nc, subject, req, &r)
		return r, err
	}
	req := protocol.GoalRequest{Goal: "keyed goal", Launcher: "lead", IdempotencyKey: "order-17"}

	first, err := submit(req)
	if err != nil {
		t.Fatal(err)
	}
	again, err := submit(req)
	if err != nil {
		t.Fatal(err)
	}
	if again.GoalID != first.GoalID {
		t.Fatalf("sent again with its key: goal %s, want the first one's %s", again.GoalID, first.GoalID)
	}
	other := req
	other.Goal = "another goal"
	if _, err := submit(other); !errors.Is(err, protocol.ErrConflict) {
		t.Fatalf("key reused for another goal: err = %v, want 409 conflict", err)
	}
	if r, err := submit(protocol.GoalRequest{Goal: "keyed goal", Launcher: "lead"}); err != nil || r.GoalID == first.GoalID {
		t.Fatalf("without a key: %+v, %v; want a goal of its own", r, err)
	}

	// A waiting copy sent while the goal runs is answered by its end.
	waited := make(chan protocol.GoalResult, 1)
	go func() {
		var res protocol.GoalResult
		wreq := req
		wreq.Wait = true
		if err := bus.Request(ctx, w.nc, subject, wreq, &res); err != nil {
			t.Errorf("waiting copy: %v", err)
		}
		waited <- res
	}()
	goals := w.goalsBucket(t)
	waitFor(t, "the waiting copy's reply subject in the goal's record", func() bool {
		e, err := goals.Get(ctx, first.GoalID)
		var st protocol.GoalStatus
		return err == nil && json.Unmarshal(e.Value(), &st) == nil && st.ReplyTo != ""
	})
	close(release)
	var res protocol.GoalResult
	select {
	case res = <-waited:
	case <-time.After(30 * time.Second):
		t.Fatal("the waiting copy was never answered")
	}
	if res.GoalID != first.GoalID || res.Status != protocol.GoalConcluded || res.Conclusion != "done: keyed goal" {
		t.Fatalf("waiting copy's result = %+v", res)
	}
	// One sent after the end is answered at once with the same result.
	wreq := req
	wreq.Wait = true
	var late protocol.GoalResult
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := bus.Request(rctx, w.nc, subject, wreq, &late); err != nil {
		t.Fatal(err)
	}
	if late.GoalID != first.GoalID || late.Conclusion != res.Conclusion {
		t.Fatalf("copy sent after the end = %+v, want %+v", late, res)
	}

	// Copies sent at the same time still make one goal.
	var mu sync.Mutex
	ids := map[string]int{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			r, err := submit(protocol.GoalRequest{Goal: "keyed goal", Launcher: "lead", IdempotencyKey: "order-18"})
			if err != nil {
				t.Errorf("concurrent copy: %v", err)
				return
			}
			mu.Lock()
			ids[r.GoalID]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(ids) != 1 {
		t.Fatalf("8 copies sent at once made goals %v, want one", ids)
	}
	var list protocol.GoalListReply
	if err := bus.Request(ctx, w.nc, w.b.Subjects().Goal(bus.GoalList), protocol.GoalListRequest{Status: "all"}, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Goals) != 3 {
		t.Errorf("goal.list has %d goals, want 3 (order-17, the unkeyed one, order-18)", len(list.Goals))
	}
}

func TestIdempotencyKeyIsChecked(t *testing.T) {
	long := make([]byte, protocol.MaxIdempotencyKey+1)
	for i := range long {
		long[i] = 'k'
	}
	for _, key := range []string{string(long), "bad\xffkey"} {
		req := protocol.GoalRequest{Goal: "g", IdempotencyKey: key}
		if err := req.Validate(); !errors.Is(err, protocol.ErrInvalid) {
			t.Errorf("key of %d bytes: err = %v, want 400 invalid", len(key), err)
		}
	}
}
