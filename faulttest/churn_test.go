package faulttest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/internal/stacktest"
	"github.com/ioa-nats/ioa/orchestrator"
)

// TestFaultChurnStatelessAgents runs goals while members that keep no state
// are killed and started again in turn, each restart a new incarnation that
// knows nothing of the chats (as a rescheduled container or a nats-CLI
// script): every goal concludes and no task result is stored twice (each
// process does a task once, however often its assignment arrives). The goal latencies are logged; with the referee
// handing work back on a new incarnation, a restart costs about the restart,
// not the task timeout.
func TestFaultChurnStatelessAgents(t *testing.T) {
	const (
		members  = 3
		taskTime = 500 * time.Millisecond
		churnFor = 30 * time.Second
		restart  = 5 * time.Second // one member restarted this often, in turn
		inFlight = 6
	)
	// Default speaker and task timeouts: without hand-backs, a task lost in a
	// restart would wait for a nudge (10 s) or the task timeout (2 min).
	s := newStack(t, stackOpts{coordinator: true, orch: orchestrator.Config{GoalTimeout: 3 * time.Minute}})

	var (
		mu        sync.Mutex
		delivered = map[string]int{} // incarnation/comm/task -> deliveries of its assignment
		again     int                // deliveries to a process that already had the task
	)
	work := func(inc string) stacktest.OnTask {
		return func(_ int, m protocol.AgentMessage, task protocol.Task) []protocol.AgentMessage {
			key := inc + "/" + m.CommID + "/" + task.TaskID
			mu.Lock()
			delivered[key]++
			first := delivered[key] == 1
			if !first {
				again++
			}
			mu.Unlock()
			// An assignment can arrive again (a nudge, or a hand-back that
			// crossed the original delivery): as docs/protocol.md asks of a
			// member, a process does each task once.
			if !first {
				return nil
			}
			time.Sleep(taskTime)
			r := stacktest.Result(task, "done "+task.TaskID)
			r.ID = m.CommID + "-" + task.TaskID + "-result" // the same from any process: a repeat is deduplicated
			var out []protocol.AgentMessage
			if m.Type == protocol.MsgAsyncAssign {
				out = append(out, protocol.AgentMessage{ID: m.CommID + "-" + task.TaskID + "-progress", Type: protocol.MsgTaskProgress, TaskID: task.TaskID, Content: "working"})
			}
			return append(out, r)
		}
	}
	names := make([]string, members)
	live := make([]*stacktest.Stateless, members)
	incarnations := 0
	startMember := func(i int) {
		incarnations++
		inc := fmt.Sprintf("inc%d", incarnations)
		live[i] = s.StartStateless(t, names[i], inc, work(inc))
	}
	for i := range members {
		names[i] = fmt.Sprintf("w%d", i)
		startMember(i)
	}
	s.WaitOnline(t, names...)

	ctx, cancel := context.WithTimeout(t.Context(), churnFor)
	defer cancel()
	var churn sync.WaitGroup
	restarts := 0
	churn.Go(func() {
		tick := time.NewTicker(restart)
		defer tick.Stop()
		for i := 0; ; i = (i + 1) % members {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			live[i].Close() // killed, with whatever it was doing
			startMember(i)
			restarts++
		}
	})
	var ids []string
	slots := make(chan struct{}, inFlight)
	var done sync.WaitGroup
	for n := 0; ctx.Err() == nil; n++ {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			continue
		}
		id := submit(t, s.nc, s.subj, protocol.GoalRequest{
			Goal: fmt.Sprintf("Do step one of job %d, then do step two of job %d.", n, n), Team: []string{names[n%members]},
		})
		ids = append(ids, id)
		done.Go(func() {
			defer func() { <-slots }()
			waitEnded(t, s.nc, s.subj, 2*time.Minute, id)
		})
	}
	churn.Wait()
	done.Wait()

	ended := waitEnded(t, s.nc, s.subj, time.Minute, ids...)
	var lat []time.Duration
	for id, st := range ended {
		if st.Status != protocol.GoalConcluded {
			t.Errorf("goal %s ended %s: %+v", id, st.Status, st.Result)
			continue
		}
		lat = append(lat, st.Result.Elapsed.D())
	}
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	mu.Lock()
	t.Logf("assignments delivered again to a process that had them: %d (each done once)", again)
	mu.Unlock()
	if len(lat) > 0 {
		t.Logf("%d goals, %d restarts (one every %s, %d members, %s per task): latency p50 %s, p90 %s, p99 %s, max %s",
			len(ids), restarts, restart, members, taskTime, pct(0.5), pct(0.9), pct(0.99), lat[len(lat)-1])
	}

	// No task result stored twice (one per task and attempt).
	stream, err := s.b.JetStream().Stream(t.Context(), bus.StreamTasks)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := stream.OrderedConsumer(t.Context(), jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	total := stream.CachedInfo().State.Msgs
	seen := map[string]int{}
	for range total {
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatalf("read task results: %v", err)
		}
		var r protocol.AgentMessage
		if err := json.Unmarshal(m.Data(), &r); err != nil {
			t.Fatal(err)
		}
		k := fmt.Sprintf("%s/%s/%d", r.CommID, r.TaskID, r.Attempt)
		if seen[k]++; seen[k] == 2 {
			t.Errorf("task result %s stored twice", k)
		}
	}
	t.Logf("%d task results stored, none twice", total)
}
