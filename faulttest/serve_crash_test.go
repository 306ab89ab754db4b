package faulttest

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/nats-io/nats.go"
)

// TestFaultServeKilledAndRestarted SIGKILLs a whole `ioa serve` (NATS,
// registry, orchestrator, agents) while goals run, starts it again on the
// same data dir and port, and checks that every goal ends, that nothing
// logged before the kill is lost and that nothing is logged twice.
func TestFaultServeKilledAndRestarted(t *testing.T) {
	const goals = 10
	dir := t.TempDir()
	script := writeFile(t, dir, "step.sh", "#!/bin/sh\ncat >/dev/null\nsleep 0.3\necho done\n", 0o755)
	cfg := writeFile(t, dir, "ioa.yaml", agentConfig([]string{"worker"}, script,
		"limits:\n  speaker_timeout: 20s\n  task_timeout: 30s\n"), 0o644)
	data := dir + "/data"
	addr := freeAddr(t)
	args := []string{"serve", "--config", cfg, "--data-dir", data, "--listen", addr, "--insecure"}
	serve := startProc(t, "ioa serve", args...)

	subj, _ := bus.NewSubjects("ioa")
	var nc *nats.Conn
	waitFor(t, 60*time.Second, "ioa serve to listen", func() bool {
		var err error
		nc, err = nats.Connect("nats://"+addr, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
		return err == nil
	})
	defer nc.Close()
	waitReady(t, nc, subj)
	rec := record(t, nc, subj)

	var ids []string
	for i := range goals {
		ids = append(ids, submit(t, nc, subj, protocol.GoalRequest{
			Goal: fmt.Sprintf("Do step one of job %d, then do step two of job %d.", i, i),
			Team: []string{"worker"},
		}))
	}
	// Kill in the middle of the work: some goals have tasks running.
	waitFor(t, 60*time.Second, "tasks to run", func() bool {
		_, ok := rec.find(func(m protocol.AgentMessage) bool { return m.Type == protocol.MsgSyncTaskAssign })
		return ok && rec.count() >= goals*4
	})
	before := rec.count()
	serve.signal(syscall.SIGKILL)
	<-serve.done
	killedAt := time.Now()
	pre := rec.snapshot()
	t.Logf("killed ioa serve after %d chat messages", before)

	serve2 := startProc(t, "ioa serve (restarted)", args...)
	_ = serve2
	ended := waitEnded(t, nc, subj, 90*time.Second, ids...)
	t.Logf("all %d goals ended %v after the restart", goals, time.Since(killedAt).Round(time.Millisecond))

	statuses := map[string]int{}
	for id, st := range ended {
		statuses[st.Status]++
		if st.Status != protocol.GoalConcluded {
			reason := ""
			if st.Result != nil {
				reason = st.Result.Reason
			}
			if reason == "" {
				t.Errorf("goal %s ended %s with no reason", id, st.Status)
			}
			t.Logf("goal %s ended %s: %s", id, st.Status, reason)
		}
	}
	a := auditGoals(t, nc, subj, rec, ended)
	// What was acknowledged before the kill must have survived it.
	b := auditGoals(t, nc, subj, pre, ended)
	lostBefore := b.Lost
	t.Logf("before the kill: %s", b)
	var list protocol.ListReply
	if err := request(nc, subj.Registry(bus.RegistryList), protocol.ListRequest{}, &list); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ag := range list.Agents {
		names = append(names, ag.Name)
	}
	t.Logf("goals=%d statuses=%v observed_before_kill=%d; all: %s; lost_before_kill=%d registry=%v",
		goals, statuses, before, a, lostBefore, names)
	for _, p := range a.Problems {
		t.Error(p)
	}
	if a.Lost != 0 || lostBefore != 0 || a.Duplicated != 0 {
		t.Errorf("lost=%d (before kill %d) duplicated=%d, want 0", a.Lost, lostBefore, a.Duplicated)
	}
	if statuses[protocol.GoalConcluded] != goals {
		t.Errorf("statuses = %v, want all %d concluded", statuses, goals)
	}
	if got := strings.Join(names, ","); !strings.Contains(got, "coordinator") || !strings.Contains(got, "worker") || list.Total != 2 {
		t.Errorf("registry after restart lists %d agents: %v", list.Total, names)
	}
}
