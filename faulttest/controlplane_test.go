package faulttest

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

var (
	cpPhase    = flag.Duration("cp-phase", 24*time.Second, "how long TestFaultControlPlane submits goals in each phase")
	cpInFlight = flag.Int("cp-inflight", 24, "goals TestFaultControlPlane keeps open at once")
)

// controlPlane is the deployment of TestFaultControlPlane: a cluster of
// three nats-server processes, three `ioa serve` processes running only the
// orchestrator (instance i connected to node i), two running only the
// registry, and the workers in an `ioa agent run` process.
type controlPlane struct {
	t      *testing.T
	nats   *realCluster
	cfg    string
	orchs  [3]*proc
	leases jetstream.KeyValue
}

// startOrchestrator (re)starts orchestrator instance i on its node.
func (cp *controlPlane) startOrchestrator(i int) {
	cp.orchs[i] = startExec(cp.t, fmt.Sprintf("ioa serve (orchestrator %d)", i),
		[]string{"IOA_REGISTRY_ENABLED=false", "IOA_BUS_REPLICAS=3"}, ioaBinary(cp.t),
		"serve", "--config", cp.cfg, "--data-dir", cp.t.TempDir(), "--nats-url", cp.nats.clients[i])
}

// instance is orchestrator i's instance id, from its log.
func (cp *controlPlane) instance(i int) string {
	var id string
	waitFor(cp.t, 60*time.Second, fmt.Sprintf("orchestrator %d to log its instance id", i), func() bool {
		if m := instanceRE.FindStringSubmatch(cp.orchs[i].out.String()); m != nil {
			id = m[1]
		}
		return id != ""
	})
	return id
}

// owners counts the partitions each instance holds a lease on.
func (cp *controlPlane) owners() map[string]int {
	out := map[string]int{}
	keys, err := cp.leases.Keys(cp.t.Context())
	if err != nil {
		return out
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, "p.") { // partition leases, not presence
			continue
		}
		e, err := cp.leases.Get(cp.t.Context(), k)
		if err != nil {
			continue
		}
		var v struct{ Owner string }
		if json.Unmarshal(e.Value(), &v) == nil && v.Owner != "" {
			out[v.Owner]++
		}
	}
	return out
}

// holdsLeases waits until every named instance holds a partition.
func (cp *controlPlane) holdsLeases(ids ...string) {
	waitFor(cp.t, 60*time.Second, fmt.Sprintf("instances %v to hold partitions", ids), func() bool {
		o := cp.owners()
		for _, id := range ids {
			if o[id] == 0 {
				return false
			}
		}
		return true
	})
}

// released measures how long after since no lease names id.
func (cp *controlPlane) released(id string, since time.Time) time.Duration {
	for time.Since(since) < 2*time.Minute {
		if cp.owners()[id] == 0 {
			return time.Since(since)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cp.t.Errorf("instance %s still holds leases 2 minutes after it was stopped", id)
	return time.Since(since)
}

// load keeps cpInFlight goals open until stop is closed, resubmitting a
// submission that got no answer (the instance that took it may have died
// before creating the goal; one it did create is found by goal.list at the
// end). Every third goal names no team: its coordinator finds the workers
// through the registries.
type load struct {
	mu      sync.Mutex
	ids     []string
	retries int
}

func (l *load) run(t *testing.T, nc *nats.Conn, subj bus.Subjects, base int, stop <-chan struct{}) {
	open := map[string]bool{}
	for n := base; ; n++ {
		select {
		case <-stop:
			return
		default:
		}
		for len(open) >= *cpInFlight {
			for id := range open {
				if st, err := goalGet(nc, subj, id); err == nil && protocol.GoalEnded(st.Status) {
					delete(open, id)
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		// Keyed: a submission sent again after a lost answer is the same goal.
		req := protocol.GoalRequest{Goal: fmt.Sprintf("Do step one of job %d, then do step two of job %d.", n, n), IdempotencyKey: fmt.Sprintf("job-%d", n)}
		if n%3 != 0 {
			req.Team = []string{"w0", "w1", "w2"}
		}
		var r protocol.SubmitReply
		for attempt := 0; ; attempt++ {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			err := bus.Request(ctx, nc, subj.Goal(bus.GoalSubmit), req, &r)
			cancel()
			if err == nil {
				break
			}
			l.mu.Lock()
			l.retries++
			l.mu.Unlock()
			if attempt == 20 {
				t.Errorf("submit job %d: %v (20 attempts)", n, err)
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
		open[r.GoalID] = true
		l.mu.Lock()
		l.ids = append(l.ids, r.GoalID)
		l.mu.Unlock()
	}
}

// TestFaultControlPlane is the fault test of "no single point of failure"
// on a real cluster: three nats-server processes, three orchestrator
// instances, two registry instances, goals kept in flight throughout. Its
// phases, each under load: SIGKILL an orchestrator (then start it again);
// SIGKILL the NATS node another orchestrator is connected to (then start it
// again); restart all three orchestrators one after another (SIGTERM). Every
// goal of every phase must conclude, with nothing acknowledged lost and
// nothing stored twice; the takeover time (until no partition lease names
// the stopped instance) is logged and must stay within 2 x the lease TTL
// for the kill.
func TestFaultControlPlane(t *testing.T) {
	if testing.Short() {
		t.Skip("a minute of a real cluster under load")
	}
	const ttl = 5 * time.Second
	c := startRealCluster(t, 3)
	nc, js := c.connect()

	dir := t.TempDir()
	script := writeFile(t, dir, "step.sh", "#!/bin/sh\ncat >/dev/null\nsleep 0.2\necho done\n", 0o755)
	limits := "limits:\n  speaker_timeout: 20s\n  task_timeout: 30s\n"
	cp := &controlPlane{t: t, nats: c, cfg: writeFile(t, dir, "orch.yaml", "log:\n  level: info\n"+limits, 0o644)}
	regCfg := writeFile(t, dir, "registry.yaml", "log:\n  level: warn\n", 0o644)
	for i := range 2 {
		// The registries provision the streams at 3 replicas; node 0 and 2.
		startExec(t, fmt.Sprintf("ioa serve (registry %d)", i), []string{"IOA_ORCHESTRATOR_ENABLED=false", "IOA_BUS_REPLICAS=3"}, ioaBinary(t),
			"serve", "--config", regCfg, "--data-dir", filepath.Join(dir, fmt.Sprintf("reg%d", i)), "--nats-url", c.clients[2*i])
	}
	for i := range 3 {
		cp.startOrchestrator(i)
	}
	workers := []string{"w0", "w1", "w2"}
	agentsCfg := writeFile(t, dir, "agents.yaml", agentConfig(workers, script, "log:\n  level: warn\n"+limits), 0o644)
	startExec(t, "ioa agent run", []string{"IOA_BUS_REPLICAS=3"}, ioaBinary(t), "agent", "run", "--config", agentsCfg, "--nats-url", c.clients[0])
	subj, _ := bus.NewSubjects("ioa")
	waitReady(t, nc, subj)
	waitOnline(t, nc, subj, append([]string{"coordinator"}, workers...)...)
	var err error
	if cp.leases, err = js.KeyValue(t.Context(), bus.BucketLeases); err != nil {
		t.Fatal(err)
	}
	ids := [3]string{cp.instance(0), cp.instance(1), cp.instance(2)}
	cp.holdsLeases(ids[:]...)
	waitHealthy(t, js)
	rec := record(t, nc, subj)
	key := markKey(t, js)

	// under runs fault halfway through a phase of load, then waits until
	// every goal of the phase has ended and audits them.
	total := map[string]int{}
	under := func(t *testing.T, base int, fault func(t *testing.T)) {
		var l load
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() { defer close(done); l.run(t, nc, subj, base, stop) }()
		time.Sleep(*cpPhase / 2)
		fault(t)
		time.Sleep(*cpPhase / 2)
		close(stop)
		<-done
		l.mu.Lock()
		goals := append([]string(nil), l.ids...)
		retries := l.retries
		l.mu.Unlock()
		ended := waitEnded(t, nc, subj, 3*time.Minute, goals...)
		statuses := requireConcluded(t, ended)
		a := auditGoals(t, nc, subj, rec, ended)
		raw := auditRaw(t, js, subj, key, ended)
		for _, p := range append(a.Problems, raw.problems...) {
			t.Error(p)
		}
		if a.Lost+a.Duplicated+raw.lost+raw.duplicated != 0 {
			t.Errorf("lost=%d duplicated=%d (raw logs: lost=%d duplicated=%d), want 0", a.Lost, a.Duplicated, raw.lost, raw.duplicated)
		}
		t.Logf("goals=%d statuses=%v resubmitted=%d; chats: %s; raw logs: %s", len(goals), statuses, retries, a, raw)
		total["goals"] += len(goals)
		total["concluded"] += statuses[protocol.GoalConcluded]
		total["lost"] += a.Lost + raw.lost
		total["duplicated"] += a.Duplicated + raw.duplicated
	}

	t.Run("kill-orchestrator", func(t *testing.T) {
		under(t, 10000, func(t *testing.T) {
			cp.orchs[0].signal(syscall.SIGKILL)
			<-cp.orchs[0].done
			took := cp.released(ids[0], time.Now())
			t.Logf("SIGKILLed orchestrator 0 (%s): survivors took over its partitions in %v (lease TTL %v)", ids[0], took.Round(time.Millisecond), ttl)
			if took > 2*ttl {
				t.Errorf("takeover took %v, more than 2 x the lease TTL", took)
			}
			cp.startOrchestrator(0)
			ids[0] = cp.instance(0)
		})
		cp.holdsLeases(ids[:]...)
	})
	t.Run("kill-its-nats-node", func(t *testing.T) {
		waitHealthy(t, js)
		under(t, 20000, func(t *testing.T) {
			c.kill(1)
			t.Logf("SIGKILLed nats-server %s, orchestrator 1's node", c.names[1])
			// Orchestrator 1 reconnects to another node and keeps its
			// partitions; the node comes back after its streams have new
			// leaders.
			waitFor(t, 60*time.Second, "leaders on the surviving nodes", func() bool {
				for _, name := range replicatedStreams {
					if ci := streamCluster(t.Context(), js, name); ci == nil || ci.Leader == "" || ci.Leader == c.names[1] {
						return false
					}
				}
				return true
			})
			c.start(1)
		})
	})
	t.Run("rolling-restart", func(t *testing.T) {
		waitHealthy(t, js)
		under(t, 30000, func(t *testing.T) {
			for i := range 3 {
				at := time.Now()
				cp.orchs[i].signal(syscall.SIGTERM)
				<-cp.orchs[i].done
				t.Logf("orchestrator %d (%s) stopped in %v; its partitions free after %v", i, ids[i],
					time.Since(at).Round(time.Millisecond), cp.released(ids[i], at).Round(time.Millisecond))
				cp.startOrchestrator(i)
				ids[i] = cp.instance(i)
				cp.holdsLeases(ids[i])
			}
		})
	})
	if n := foreignEntries(t, nc); n != 0 {
		t.Errorf("the referee found %d foreign log entries in logs only it wrote", n)
	}
	var list protocol.GoalListReply
	if err := request(nc, subj.Goal(bus.GoalList), protocol.GoalListRequest{Status: "running", Limit: 1000}, &list); err != nil {
		t.Fatal(err)
	}
	var stuck []string
	for _, g := range list.Goals {
		stuck = append(stuck, g.GoalID)
	}
	sort.Strings(stuck)
	if len(stuck) != 0 {
		t.Errorf("%d goals still running after every submitted one ended (created by a submission whose answer was lost?): %v", len(stuck), stuck)
	}
	t.Logf("all phases: %v", total)
}
