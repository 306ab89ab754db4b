package faulttest

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/orchestrator"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

var (
	realGoals    = flag.Int("real-goals", 40, "goals TestFaultRealCluster submits per kill target")
	realInFlight = flag.Int("real-inflight", 12, "goals TestFaultRealCluster keeps running at once")
)

// natsServerBinary finds the nats-server that `make tools` installs in
// $(go env GOPATH)/bin, or one on the PATH.
func natsServerBinary(t testing.TB) string {
	t.Helper()
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		for _, dir := range filepath.SplitList(strings.TrimSpace(string(out))) {
			p := filepath.Join(dir, "bin", "nats-server")
			if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
				return p
			}
		}
	}
	if p, err := exec.LookPath("nats-server"); err == nil {
		return p
	}
	t.Skip("nats-server is not installed: run `make tools` (go install github.com/nats-io/nats-server/v2@v2.15.3)")
	return ""
}

// realCluster is a cluster of nats-server processes on loopback.
type realCluster struct {
	t       testing.TB
	bin     string
	names   []string
	clients []string
	confs   []string
	procs   []*proc
}

// startRealCluster starts n nats-server processes, JetStream on, routed to
// each other, each with its own store.
func startRealCluster(t testing.TB, n int) *realCluster {
	t.Helper()
	c := &realCluster{t: t, bin: natsServerBinary(t), procs: make([]*proc, n)}
	dir := t.TempDir()
	routes := make([]string, n)
	for i := range n {
		routes[i] = "nats-route://" + freeAddr(t)
	}
	for i := range n {
		name := fmt.Sprintf("n%d", i)
		client := freeAddr(t)
		conf := fmt.Sprintf("server_name: %s\nlisten: %q\njetstream {\n  store_dir: %q\n}\ncluster {\n  name: ioa-real\n  listen: %q\n  routes: [%s]\n}\n",
			name, client, filepath.Join(dir, name), strings.TrimPrefix(routes[i], "nats-route://"), quoteAll(routes))
		c.names = append(c.names, name)
		c.clients = append(c.clients, "nats://"+client)
		c.confs = append(c.confs, writeFile(t, dir, name+".conf", conf, 0o644))
	}
	for i := range n {
		c.start(i)
	}
	return c
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// start runs node i (again, on the same ports and store).
func (c *realCluster) start(i int) {
	c.procs[i] = startExec(c.t, "nats-server "+c.names[i], nil, c.bin, "-c", c.confs[i])
}

// kill SIGKILLs node i and waits until it has exited.
func (c *realCluster) kill(i int) {
	c.procs[i].signal(syscall.SIGKILL)
	<-c.procs[i].done
}

// connect connects to the cluster (any node, reconnecting for ever) once it
// listens and has elected its JetStream meta leader; the connection closes
// when the test ends.
func (c *realCluster) connect() (*nats.Conn, jetstream.JetStream) {
	t := c.t
	var nc *nats.Conn
	waitFor(t, 60*time.Second, "nats-server to listen", func() bool {
		var err error
		nc, err = nats.Connect(c.urls(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
		return err == nil
	})
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the JetStream meta leader", func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		_, err := js.AccountInfo(ctx)
		return err == nil
	})
	return nc, js
}

// urls are the client URLs of every node, comma-separated.
func (c *realCluster) urls() string { return strings.Join(c.clients, ",") }

// streamCluster returns a stream's cluster info, or nil while it cannot be
// read.
func streamCluster(ctx context.Context, js jetstream.JetStream, stream string) *jetstream.ClusterInfo {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return nil
	}
	return st.CachedInfo().Cluster
}

// replicatedStreams are the streams of the runtime, the buckets' included.
var replicatedStreams = []string{bus.StreamChats, bus.StreamTasks, bus.StreamGoals,
	"KV_" + bus.BucketAgents, "KV_" + bus.BucketGoals, "KV_" + bus.BucketChats}

// waitHealthy waits until every stream has a leader and two current
// followers.
func waitHealthy(t testing.TB, js jetstream.JetStream) {
	t.Helper()
	waitFor(t, 90*time.Second, "every stream to have a leader and two current replicas", func() bool {
		for _, name := range replicatedStreams {
			ci := streamCluster(t.Context(), js, name)
			if ci == nil || ci.Leader == "" || len(ci.Replicas) != 2 {
				return false
			}
			for _, r := range ci.Replicas {
				if !r.Current || r.Offline {
					return false
				}
			}
		}
		return true
	})
}

// TestFaultRealCluster runs `ioa serve` (the built binary, every stream and
// bucket at 3 replicas) against a cluster of three nats-server processes,
// with three agents in an `ioa agent run` process that take 300 ms per task,
// and keeps goals of two to four clauses running. In each subtest it
// SIGKILLs the node that leads one stream (the chat logs, the task results,
// the goal records) while goals run, restarts it, and checks that every
// goal concludes and that no chat message, task result or log entry is lost
// or stored twice.
func TestFaultRealCluster(t *testing.T) {
	c := startRealCluster(t, 3)
	nc, js := c.connect()

	dir := t.TempDir()
	script := writeFile(t, dir, "step.sh", "#!/bin/sh\ncat >/dev/null\nsleep 0.3\necho done\n", 0o755)
	serveCfg := writeFile(t, dir, "serve.yaml", "log:\n  level: info\nlimits:\n  speaker_timeout: 20s\n  task_timeout: 30s\n", 0o644)
	workers := []string{"w0", "w1", "w2"}
	agentsCfg := writeFile(t, dir, "agents.yaml", agentConfig(workers, script, "log:\n  level: warn\n"), 0o644)
	env := []string{"IOA_BUS_REPLICAS=3"}
	serve := startExec(t, "ioa serve", env, ioaBinary(t), "serve", "--config", serveCfg, "--nats-url", c.urls())
	startExec(t, "ioa agent run", env, ioaBinary(t), "agent", "run", "--config", agentsCfg, "--nats-url", c.urls())
	subj, _ := bus.NewSubjects("ioa")
	waitOnline(t, nc, subj, append([]string{"coordinator"}, workers...)...)
	rec := record(t, nc, subj)
	key := markKey(t, js)

	var total struct{ submitted, concluded, lost, duplicated int }
	for _, target := range []string{bus.StreamChats, bus.StreamTasks, "KV_" + bus.BucketGoals} {
		t.Run(target, func(t *testing.T) {
			waitHealthy(t, js)
			logFrom := len(serve.out.String())
			r := runUnderKill(t, c, nc, js, subj, target, workers)
			a := auditGoals(t, nc, subj, rec, r.ended)
			raw := auditRaw(t, js, subj, key, r.ended)
			statuses := requireConcluded(t, r.ended)
			t.Logf("%s: killed leader %s after %d goals; goals submitted=%d concluded=%d statuses=%v submit_errors=%d; chats: %s; raw logs: %s; lost acks settled by reading back: %v",
				target, r.leader, r.killedAfter, len(r.ended), statuses[protocol.GoalConcluded], statuses, r.submitErrors, a, raw, settledWrites(serve.out.String()[logFrom:]))
			for _, p := range append(a.Problems, raw.problems...) {
				t.Error(p)
			}
			if a.Lost+a.Duplicated+raw.lost+raw.duplicated != 0 {
				t.Errorf("lost=%d duplicated=%d (raw logs: lost=%d duplicated=%d), want 0", a.Lost, a.Duplicated, raw.lost, raw.duplicated)
			}
			if r.submitErrors != 0 {
				t.Errorf("%d goal submissions failed", r.submitErrors)
			}
			total.submitted += len(r.ended)
			total.concluded += statuses[protocol.GoalConcluded]
			total.lost += a.Lost + raw.lost
			total.duplicated += a.Duplicated + raw.duplicated
		})
	}
	if n := foreignEntries(t, nc); n != 0 {
		t.Errorf("the referee found %d foreign log entries in logs only it wrote", n)
	}
	t.Logf("all targets: goals submitted=%d concluded=%d lost=%d duplicated=%d; lost acks settled by reading back: %v",
		total.submitted, total.concluded, total.lost, total.duplicated, settledWrites(serve.out.String()))
	if t.Failed() || testing.Verbose() {
		var warns []string
		for _, l := range strings.Split(serve.out.String(), "\n") {
			if strings.Contains(l, "WARN") || strings.Contains(l, "ERROR") {
				warns = append(warns, l)
			}
		}
		t.Logf("ioa serve logged %d warnings and errors; the first 40:\n%s", len(warns), strings.Join(warns[:min(len(warns), 40)], "\n"))
	}
}

// killRun is what one subtest of TestFaultRealCluster did.
type killRun struct {
	leader       string
	killedAfter  int
	submitErrors int
	ended        map[string]protocol.GoalStatus
}

// runUnderKill keeps realInFlight goals running until realGoals have been
// submitted; once a third of them are, it SIGKILLs the node leading stream,
// waits for another leader and restarts the node. It returns when every
// goal has ended.
func runUnderKill(t *testing.T, c *realCluster, nc *nats.Conn, js jetstream.JetStream, subj bus.Subjects, stream string, team []string) killRun {
	r := killRun{ended: map[string]protocol.GoalStatus{}}
	jobBase := 1000 * (1 + slices.Index(replicatedStreams, stream))
	open := map[string]bool{}
	killed := make(chan struct{})
	var once sync.Once
	kill := func() {
		ci := streamCluster(t.Context(), js, stream)
		if ci == nil || ci.Leader == "" {
			t.Errorf("stream %s has no leader to kill", stream)
			close(killed)
			return
		}
		r.leader = ci.Leader
		i := slices.Index(c.names, ci.Leader)
		c.kill(i)
		t.Logf("SIGKILLed %s, the leader of %s, with %d goals open", ci.Leader, stream, len(open))
		go func() {
			defer close(killed)
			defer c.start(i)
			for t0 := time.Now(); time.Since(t0) < 60*time.Second; time.Sleep(50 * time.Millisecond) {
				if ci := streamCluster(t.Context(), js, stream); ci != nil && ci.Leader != "" && ci.Leader != r.leader {
					t.Logf("%s leads %s %v after the kill", ci.Leader, stream, time.Since(t0).Round(time.Millisecond))
					return
				}
			}
			t.Errorf("no new leader of %s within 60s", stream)
		}()
	}
	submitted := 0
	deadline := time.Now().Add(4 * time.Minute)
	for submitted < *realGoals || len(open) > 0 {
		for submitted < *realGoals && len(open) < *realInFlight {
			n := jobBase + submitted
			clauses := 2 + submitted%3
			parts := make([]string, clauses)
			for k := range parts {
				parts[k] = fmt.Sprintf("do step %d of job %d", k+1, n)
			}
			if clauses > 2 {
				parts[clauses-1] = "then " + parts[clauses-1]
			}
			// Core NATS may lose a request or its answer while the
			// cluster's routes reconnect (CI saw one lost before any
			// kill): the key makes sending it again safe.
			var reply protocol.SubmitReply
			req := protocol.GoalRequest{Goal: strings.Join(parts, "; ") + ".", Team: team, IdempotencyKey: fmt.Sprintf("job-%d", n)}
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			err := bus.RequestAgain(ctx, nc, subj.Goal(bus.GoalSubmit), 10*time.Second, req, &reply)
			cancel()
			if err != nil {
				r.submitErrors++
				t.Logf("submit: %v", err)
				if r.submitErrors > 20 {
					t.Fatal("too many failed submissions")
				}
				continue
			}
			open[reply.GoalID] = true
			submitted++
		}
		if submitted >= *realGoals/3 {
			once.Do(func() {
				r.killedAfter = submitted
				kill()
			})
		}
		for id := range open {
			if st, err := goalGet(nc, subj, id); err == nil && protocol.GoalEnded(st.Status) {
				r.ended[id] = st
				delete(open, id)
			}
		}
		if time.Now().After(deadline) {
			var left []string
			for id := range open {
				st, err := goalGet(nc, subj, id)
				left = append(left, fmt.Sprintf("%s=%s(%v)", id, st.Status, err))
			}
			sort.Strings(left)
			t.Fatalf("%d goals have not ended: %v", len(left), left)
		}
		time.Sleep(100 * time.Millisecond)
	}
	<-killed
	for id := range open {
		r.ended[id] = protocol.GoalStatus{GoalID: id}
	}
	return r
}

// markKey reads the referee's log mark key (orchestrator/mark.go) from the
// ioa_chats bucket.
func markKey(t testing.TB, js jetstream.JetStream) []byte {
	t.Helper()
	kv, err := js.KeyValue(t.Context(), bus.BucketChats)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(t.Context(), "_ioa.log-mark-key")
	if err != nil {
		t.Fatalf("log mark key: %v", err)
	}
	key, err := hex.DecodeString(string(e.Value()))
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// rawAudit is what reading the streams themselves found.
type rawAudit struct {
	entries, results int
	// lost: a task result in a chat log with no trigger in IOA_TASKS.
	lost int
	// duplicated: a chat seq or message id twice in a log, a task result
	// (task, attempt) twice in IOA_TASKS.
	duplicated int
	unmarked   int
	problems   []string
}

func (a *rawAudit) problem(format string, args ...any) {
	if len(a.problems) < 20 {
		a.problems = append(a.problems, fmt.Sprintf(format, args...))
	}
}

func (a rawAudit) String() string {
	return fmt.Sprintf("entries=%d task_results=%d lost=%d duplicated=%d unmarked=%d", a.entries, a.results, a.lost, a.duplicated, a.unmarked)
}

// auditRaw reads every entry of the goals' chat logs and task results from
// the streams, past the referee: each entry marked, no chat seq or message
// id twice, every task result of a log stored once in IOA_TASKS.
func auditRaw(t testing.TB, js jetstream.JetStream, subj bus.Subjects, key []byte, goals map[string]protocol.GoalStatus) rawAudit {
	t.Helper()
	var a rawAudit
	chats, err := js.Stream(t.Context(), bus.StreamChats)
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := js.Stream(t.Context(), bus.StreamTasks)
	if err != nil {
		t.Fatal(err)
	}
	walk := func(st jetstream.Stream, subject string, fn func(*jetstream.RawStreamMsg)) {
		for seq := uint64(1); ; {
			raw, err := st.GetMsg(t.Context(), seq, jetstream.WithGetMsgSubject(subject))
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				return
			}
			if err != nil {
				a.problem("read %s at %d: %v", subject, seq, err)
				return
			}
			fn(raw)
			seq = raw.Sequence + 1
		}
	}
	for id, g := range goals {
		if g.CommID == "" {
			continue
		}
		subject, _ := subj.Chat(g.CommID)
		seqs, msgIDs := map[uint64]bool{}, map[string]bool{}
		results := map[string]bool{}
		walk(chats, subject, func(raw *jetstream.RawStreamMsg) {
			a.entries++
			if raw.Header.Get(orchestrator.MarkHeader) != orchestrator.EntryMark(key, raw.Subject, raw.Data) {
				a.unmarked++
				a.problem("goal %s: log entry %d has no valid mark", id, raw.Sequence)
			}
			var m protocol.AgentMessage
			if err := json.Unmarshal(raw.Data, &m); err != nil {
				a.problem("goal %s: log entry %d: %v", id, raw.Sequence, err)
				return
			}
			msgID := raw.Header.Get(jetstream.MsgIDHeader)
			if seqs[m.Seq] || msgIDs[msgID] {
				a.duplicated++
				a.problem("goal %s: seq %d / message id %s twice in the log", id, m.Seq, msgID)
			}
			seqs[m.Seq], msgIDs[msgID] = true, true
			if m.Type == protocol.MsgTaskResult {
				results[fmt.Sprintf("%s#%d", m.TaskID, m.Attempt)] = true
			}
		})
		stored := map[string]int{}
		walk(tasks, subj.Prefix()+".task."+g.CommID+".>", func(raw *jetstream.RawStreamMsg) {
			var m protocol.AgentMessage
			if err := json.Unmarshal(raw.Data, &m); err != nil {
				a.problem("goal %s: task result %d: %v", id, raw.Sequence, err)
				return
			}
			k := fmt.Sprintf("%s#%d", m.TaskID, m.Attempt)
			a.results++
			if stored[k]++; stored[k] > 1 {
				a.duplicated++
				a.problem("goal %s: task result %s stored %d times", id, k, stored[k])
			}
		})
		for k := range results {
			if stored[k] == 0 {
				a.lost++
				a.problem("goal %s: task result %s is in the chat log but not in %s", id, k, bus.StreamTasks)
			}
		}
	}
	return a
}

// foreignEntries reads the referee's count of foreign log entries from the
// stats of its outbox endpoint.
func foreignEntries(t testing.TB, nc *nats.Conn) uint64 {
	t.Helper()
	msg, err := nc.Request("$SRV.STATS.ioa-orchestrator", nil, 5*time.Second)
	if err != nil {
		t.Fatalf("stats: %v", err)
	}
	var stats struct {
		Endpoints []struct {
			Name string                    `json:"name"`
			Data orchestrator.RefereeStats `json:"data"`
		} `json:"endpoints"`
	}
	if err := json.Unmarshal(msg.Data, &stats); err != nil {
		t.Fatalf("stats %s: %v", msg.Data, err)
	}
	for _, e := range stats.Endpoints {
		if e.Name == "outbox" {
			return e.Data.ForeignLogEntries
		}
	}
	t.Fatalf("no outbox endpoint in %s", msg.Data)
	return 0
}

// settledWrites counts, by kind, the writes the orchestrator logged as
// stored though their answer was lost.
func settledWrites(log string) map[string]int {
	out := map[string]int{}
	for _, l := range strings.Split(log, "\n") {
		if !strings.Contains(l, "write stored though its answer was lost") {
			continue
		}
		kind := "other"
		for _, k := range []string{"chat log", "chat record", "goal record", ".task.", ".result"} {
			if strings.Contains(l, "what=\""+k) || strings.Contains(l, k) {
				kind = strings.Trim(k, ".")
				break
			}
		}
		out[kind]++
	}
	return out
}
