package faulttest

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

var instanceRE = regexp.MustCompile(`instance=(o[a-z0-9]{12})`)

// TestFaultOrchestratorKilled runs the outside check of "no single point of
// failure": one `ioa serve` with NATS, the registry and an exec worker agent
// (its orchestrator off), and two more `ioa serve --nats-url` processes
// running the orchestrator and the coordinator (their registry off), with
// the first one's admin credentials. Goals that name no launcher are
// submitted continuously, some with wait; 10 s in, one orchestrator process
// is SIGKILLed. Every goal must end concluded, every waiting submitter get
// its result, nothing acknowledged be lost and nothing logged twice; the
// takeover time (from the kill until no partition lease names the dead
// instance) is measured and must stay within 2 x the lease TTL (5 s).
func TestFaultOrchestratorKilled(t *testing.T) {
	const (
		ttl     = 5 * time.Second
		runFor  = 20 * time.Second
		killAt  = 10 * time.Second
		every   = 250 * time.Millisecond
		waitOne = 4 // every waitOne-th goal is submitted with wait
	)
	dir := t.TempDir()
	script := writeFile(t, dir, "step.sh", "#!/bin/sh\ncat >/dev/null\nsleep 0.3\necho done\n", 0o755)
	cfg := writeFile(t, dir, "ioa.yaml", agentConfig([]string{"worker"}, script,
		"limits:\n  speaker_timeout: 20s\n  task_timeout: 30s\n"), 0o644)
	orchCfg := writeFile(t, dir, "orch.yaml", "log:\n  level: info\nlimits:\n  speaker_timeout: 20s\n  task_timeout: 30s\n", 0o644)
	data := filepath.Join(dir, "data")
	addr := freeAddr(t)
	first := startExec(t, "ioa serve (NATS, registry, worker)", []string{"IOA_ORCHESTRATOR_ENABLED=false"}, ioaBinary(t),
		"serve", "--config", cfg, "--data-dir", data, "--listen", addr)
	creds := filepath.Join(data, "creds", "admin.creds")
	var nc *nats.Conn
	waitFor(t, 60*time.Second, "the first ioa serve to listen", func() bool {
		var err error
		nc, err = nats.Connect("nats://"+addr, nats.UserCredentials(creds), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
		return err == nil
	})
	defer nc.Close()
	_ = first
	orchs := make([]*proc, 2)
	for i := range orchs {
		orchs[i] = startExec(t, fmt.Sprintf("ioa serve (orchestrator %d)", i), []string{"IOA_REGISTRY_ENABLED=false"}, ioaBinary(t),
			"serve", "--config", orchCfg, "--data-dir", filepath.Join(dir, fmt.Sprintf("orch%d", i)),
			"--nats-url", "nats://"+addr, "--creds", creds)
	}
	subj, _ := bus.NewSubjects("ioa")
	waitReady(t, nc, subj)
	// Ready means the coordinator is online; the worker registers on its
	// own time (a loaded CI machine once ran the first goal before it had,
	// and the team-up refused "member worker is not registered").
	waitOnline(t, nc, subj, "coordinator", "worker")
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	leases, err := js.KeyValue(t.Context(), bus.BucketLeases)
	if err != nil {
		t.Fatal(err)
	}
	// Both instances hold partitions before the run starts.
	owners := func() map[string]int {
		out := map[string]int{}
		for p := range 32 {
			e, err := leases.Get(t.Context(), fmt.Sprintf("p.%d", p))
			if err != nil {
				continue
			}
			var v struct{ Owner string }
			if json.Unmarshal(e.Value(), &v) == nil {
				out[v.Owner] += 1
			}
		}
		return out
	}
	waitFor(t, 60*time.Second, "both orchestrators to hold partitions", func() bool {
		return len(owners()) == 2
	})
	rec := record(t, nc, subj)

	var (
		mu       sync.Mutex
		ids      []string
		waited   = map[string]protocol.GoalResult{}
		waitErrs []error
		wg       sync.WaitGroup
	)
	// The victim's id is in its log; the takeover is done when no lease
	// names it.
	m := instanceRE.FindStringSubmatch(orchs[0].out.String())
	if m == nil {
		t.Fatalf("no instance id in the orchestrator's log")
	}
	dead := m[1]
	start := time.Now()
	tookOver := make(chan time.Duration, 1)
	go func() {
		time.Sleep(killAt)
		victim := orchs[0]
		victim.signal(syscall.SIGKILL)
		<-victim.done
		killedAt := time.Now()
		for time.Since(killedAt) < time.Minute {
			if o := owners(); o[dead] == 0 && len(o) == 1 {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		tookOver <- time.Since(killedAt)
	}()
	for i := 0; time.Since(start) < runFor; i++ {
		req := protocol.GoalRequest{Goal: fmt.Sprintf("Do step one of job %d, then do step two of job %d.", i, i), Team: []string{"worker"}}
		if i%waitOne == 0 {
			// A waiting submitter keys its goal and sends it again, as
			// ioa goal does: a submission the dead instance took before
			// recording it is lost with it, and the copy sent again
			// creates the goal once.
			req.Wait, req.IdempotencyKey = true, fmt.Sprintf("failover-%d", i)
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
				defer cancel()
				var res protocol.GoalResult
				err := bus.RequestAgain(ctx, nc, subj.Goal(bus.GoalSubmit), 10*time.Second, req, &res)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					waitErrs = append(waitErrs, fmt.Errorf("goal %d: %w", i, err))
					return
				}
				waited[res.GoalID] = res
				ids = append(ids, res.GoalID)
			})
		} else {
			var r protocol.SubmitReply
			// A submission the dead instance took is not acknowledged:
			// the client sends it again (a new goal; the lost one was
			// never created or is counted by goal.list below).
			for {
				if err := request(nc, subj.Goal(bus.GoalSubmit), req, &r); err == nil {
					break
				} else if time.Since(start) > runFor+30*time.Second {
					t.Fatalf("submit: %v", err)
				}
			}
			mu.Lock()
			ids = append(ids, r.GoalID)
			mu.Unlock()
		}
		time.Sleep(every)
	}
	takeover := <-tookOver
	wg.Wait()
	mu.Lock()
	all := append([]string(nil), ids...)
	errs := waitErrs
	mu.Unlock()
	for _, err := range errs {
		t.Errorf("waiting submitter: %v", err)
	}
	ended := waitEnded(t, nc, subj, 120*time.Second, all...)
	statuses := requireConcluded(t, ended)
	for id, res := range waited {
		if res.Status != protocol.GoalConcluded {
			t.Errorf("waiting submitter of %s got %s", id, res.Status)
		}
	}
	// Every goal ever created is accounted for: none stuck in the record.
	var list protocol.GoalListReply
	if err := request(nc, subj.Goal(bus.GoalList), protocol.GoalListRequest{Status: "running", Limit: 1000}, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Goals) != 0 {
		t.Errorf("%d goals still running after all submitted ones ended", len(list.Goals))
	}
	a := auditGoals(t, nc, subj, rec, ended)
	t.Logf("goals=%d (waited %d) statuses=%v takeover=%v (lease TTL %v) %s",
		len(all), len(waited), statuses, takeover.Round(time.Millisecond), ttl, a)
	for _, p := range a.Problems {
		t.Error(p)
	}
	if a.Lost != 0 || a.Duplicated != 0 {
		t.Errorf("lost=%d duplicated=%d, want 0", a.Lost, a.Duplicated)
	}
	if takeover > 2*ttl {
		t.Errorf("takeover took %v, more than 2 x the lease TTL", takeover)
	}
}
