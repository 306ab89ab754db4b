package faulttest

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/orchestrator"
	"github.com/nats-io/nats.go"
)

var (
	soakFor    = flag.Duration("soak", 0, "run TestSoak for this long (skipped when 0)")
	soakGoals  = flag.Int("soak-goals", 50, "goals TestSoak keeps running at once")
	soakAgents = flag.Int("soak-agents", 4, "agent processes TestSoak runs")
	soakKill   = flag.Duration("soak-kill", 10*time.Second, "how often TestSoak kills (and restarts) an agent process")
)

// TestSoak keeps -soak-goals goals running for -soak, against the
// registry, orchestrator and coordinator in this process and worker agents
// in child processes (`ioa agent run`), one of which is SIGKILLed and
// started again every -soak-kill. At the end it prints how the goals ended,
// lost and duplicated messages (as TestFaultServeKilledAndRestarted
// counts them), and goroutines and heap at the start and the end.
//
//	go test ./faulttest -run TestSoak -soak=10m -soak-goals=50 -v
func TestSoak(t *testing.T) {
	if *soakFor <= 0 {
		t.Skip("soak not asked for: -soak=10m")
	}
	s := newStack(t, stackOpts{
		orch:        orchestrator.Config{TaskTimeout: 10 * time.Second, SpeakerTimeout: 10 * time.Second, GoalTimeout: 2 * time.Minute, MaxTeamSize: 8},
		coordinator: true,
	})
	dir := t.TempDir()
	script := writeFile(t, dir, "step.sh", "#!/bin/sh\ncat >/dev/null\nsleep 0.$(( $$ % 4 + 1 ))\necho \"done by $$\"\n", 0o755)
	names := make([]string, *soakAgents)
	procs := make([]*proc, *soakAgents)
	cfgs := make([]string, *soakAgents)
	for i := range names {
		names[i] = fmt.Sprintf("w%d", i)
		cfgs[i] = writeFile(t, dir, names[i]+".yaml", agentConfig([]string{names[i]}, script, "log:\n  level: warn\n"), 0o644)
	}
	startAgent := func(i int) *proc {
		return startProc(t, "ioa agent run "+names[i], "agent", "run", "--config", cfgs[i], "--nats-url", s.b.ClientURL())
	}
	for i := range names {
		procs[i] = startAgent(i)
	}
	waitOnline(t, s.nc, s.subj, names...)
	rec := record(t, s.nc, s.subj)
	// One goal and one search first, so that the one-time caches (the
	// lexicon's unit vectors, about 34 MiB, built on the first search) are in
	// the baseline.
	var warm protocol.GoalResult
	wctx, wcancel := context.WithTimeout(t.Context(), time.Minute)
	err := bus.Request(wctx, s.nc, s.subj.Goal(bus.GoalSubmit), protocol.GoalRequest{Goal: "Do step one of the warm-up job.", Team: names[:1], Wait: true}, &warm)
	wcancel()
	if err != nil {
		t.Fatalf("warm-up goal: %v", err)
	}
	var found protocol.SearchReply
	if err := bus.Request(t.Context(), s.nc, s.subj.Registry(bus.RegistrySearch), protocol.SearchRequest{Query: "warm up the search"}, &found); err != nil {
		t.Fatalf("warm-up search: %v", err)
	}
	heap0, g0 := heapMiB(), runtime.NumGoroutine()
	start := time.Now()
	deadline := start.Add(*soakFor)

	var (
		mu      sync.Mutex
		ended   = map[string]protocol.GoalStatus{}
		reasons = map[string]int{}
		started int
		kills   int
	)
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	var bg sync.WaitGroup
	// A sample of heap and goroutines every minute shows whether they level
	// off. The heap includes the test's own record of every message.
	var samples []string
	bg.Go(func() {
		every(ctx, time.Minute, func() {
			line := fmt.Sprintf("%v: heap %.1f MiB (with the test's records), goroutines %d", time.Since(start).Round(time.Second), heapMiB(), runtime.NumGoroutine())
			mu.Lock()
			samples = append(samples, line)
			mu.Unlock()
		})
	})
	// The killer: a random agent process every -soak-kill, started again
	// at once (it rejoins its chats and redoes its unfinished tasks).
	bg.Go(func() {
		every(ctx, *soakKill, func() {
			if time.Now().After(deadline) {
				return
			}
			i := rand.IntN(len(procs))
			procs[i].kill()
			procs[i] = startAgent(i)
			mu.Lock()
			kills++
			mu.Unlock()
		})
	})
	var wg sync.WaitGroup
	dumped := false // IOA_SOAK_DUMP=<reason> logs the first chat that ended so
	for slot := range *soakGoals {
		wg.Go(func() {
			for n := 0; time.Now().Before(deadline); n++ {
				a, b := names[rand.IntN(len(names))], names[rand.IntN(len(names))]
				req := protocol.GoalRequest{
					Goal: fmt.Sprintf("Do step one of job %d-%d, then do step two of job %d-%d.", slot, n, slot, n),
					Team: []string{a, b}, Wait: true,
				}
				mu.Lock()
				started++
				mu.Unlock()
				rctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
				var res protocol.GoalResult
				err := bus.Request(rctx, s.nc, s.subj.Goal(bus.GoalSubmit), req, &res)
				cancel()
				if err != nil {
					mu.Lock()
					reasons["submit error: "+err.Error()]++
					mu.Unlock()
					continue
				}
				st, err := goalGet(s.nc, s.subj, res.GoalID)
				mu.Lock()
				switch {
				case err != nil:
					reasons["goal.get: "+err.Error()]++
				default:
					if dump := os.Getenv("IOA_SOAK_DUMP"); dump != "" && st.Result != nil && st.Result.Reason == dump && !dumped {
						dumped = true
						dumpChat(t, s.nc, s.subj, st)
					}
					ended[res.GoalID] = st
					key := st.Status
					if st.Result != nil && st.Result.Reason != "" {
						key += ": " + st.Result.Reason
					} else if st.Result != nil && strings.Contains(st.Result.Conclusion, "did not complete") {
						key += " (with failed tasks)"
					}
					reasons[key]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	stop()
	bg.Wait()
	a := auditGoals(t, s.nc, s.subj, rec, ended)
	endedCount := len(ended)
	heapWithRecords := heapMiB()
	// The heap at the end is the runtime's: the test's own copies of every
	// message and goal are released first.
	rec.mu.Lock()
	rec.seen, rec.requests, rec.replies, rec.acked, rec.order = map[string][]protocol.AgentMessage{}, map[string]ackKey{}, map[string]uint64{}, map[ackKey]uint64{}, map[string][]ackKey{}
	rec.mu.Unlock()
	clear(ended)
	// Let the caches of an idle runtime expire before the last sample: the
	// file store keeps each stream's last blocks cached for 10 s after use.
	time.Sleep(15 * time.Second)
	heap1, g1 := heapMiB(), runtime.NumGoroutine()
	if path := os.Getenv("IOA_SOAK_HEAPPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil {
			_ = pprof.WriteHeapProfile(f)
			f.Close()
		}
	}
	keys := make([]string, 0, len(reasons))
	for k := range reasons {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "soak %v, %d goals at once, %d agent processes, %d kills\n", time.Since(start).Round(time.Second), *soakGoals, len(names), kills)
	fmt.Fprintf(&b, "goals started %d, ended %d\n", started, endedCount)
	for _, k := range keys {
		fmt.Fprintf(&b, "  %5d  %s\n", reasons[k], k)
	}
	fmt.Fprintf(&b, "messages: %s\n", a)
	for _, line := range samples {
		fmt.Fprintf(&b, "  %s\n", line)
	}
	fmt.Fprintf(&b, "goroutines %d -> %d, heap %.1f -> %.1f MiB (%.1f MiB before releasing the test's own records)\n", g0, g1, heap0, heap1, heapWithRecords)
	t.Log("\n" + b.String())
	for _, p := range a.Problems {
		t.Error(p)
	}
	if a.Lost != 0 || a.Duplicated != 0 || endedCount != started {
		t.Errorf("lost %d, duplicated %d, %d of %d goals seen to end", a.Lost, a.Duplicated, endedCount, started)
	}
}

// every calls fn every d until ctx is done.
func every(ctx context.Context, d time.Duration, fn func()) {
	tick := time.NewTicker(d)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			fn()
		}
	}
}

// dumpChat logs a goal's chat, one line per message, to see why it ended.
func dumpChat(t *testing.T, nc *nats.Conn, subj bus.Subjects, st protocol.GoalStatus) {
	if st.CommID == "" || len(st.Team) == 0 {
		return
	}
	h, _ := subj.History(st.Team[0], st.CommID)
	var out protocol.HistoryReply
	if err := bus.Request(context.Background(), nc, h, protocol.HistoryRequest{}, &out); err != nil {
		t.Logf("dump %s: %v", st.GoalID, err)
		return
	}
	for _, m := range out.Messages {
		t.Logf("dump %s #%d %s %s %s %s task=%s %s %s", st.GoalID, m.Seq, m.TS.Format("15:04:05.000"), m.Sender, m.Type, m.State, m.TaskID, m.Event, m.Content)
	}
}
