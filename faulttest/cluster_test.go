package faulttest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/agentkit/rules"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/orchestrator"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// startCluster starts n embedded servers on loopback, routed to each other,
// with JetStream on each and every stream and bucket replicated n times.
// The nodes start together: each one's provisioning waits for the cluster
// to elect its JetStream meta leader.
func startCluster(t *testing.T, n int) []*bus.Bus {
	t.Helper()
	routes := make([]string, n)
	listens := make([]string, n)
	for i := range n {
		listens[i] = freeAddr(t)
		routes[i] = "nats-route://" + listens[i]
	}
	nodes := make([]*bus.Bus, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			nodes[i], errs[i] = bus.Start(ctx, bus.Config{
				DataDir:    filepath.Join(t.TempDir(), fmt.Sprintf("n%d", i)),
				Listen:     "127.0.0.1:0",
				ServerName: fmt.Sprintf("ioa-n%d", i),
				Name:       fmt.Sprintf("node%d", i),
				Replicas:   n,
				Cluster:    bus.Cluster{Name: "ioa-test", Listen: listens[i], Routes: routes},
				Logger:     clusterLog(t, i),
			})
		})
	}
	wg.Wait()
	for i, b := range nodes {
		if b != nil {
			t.Cleanup(func() { _ = b.Close() })
		}
		if errs[i] != nil {
			t.Errorf("node %d: %v", i, errs[i])
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	return nodes
}

// clusterLog shows a node's server log with -v and IOA_TEST_LOG=1.
func clusterLog(t *testing.T, i int) *slog.Logger {
	if os.Getenv("IOA_TEST_LOG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("node", i)
}

// TestFaultClusterNodeLoss runs the runtime on a 3-node cluster with every
// stream and bucket at 3 replicas, stops a node the runtime is not
// connected to while goals run, and checks that they end and that a goal
// submitted after the loss concludes.
func TestFaultClusterNodeLoss(t *testing.T) {
	nodes := startCluster(t, 3)
	start := time.Now()
	// Registry, orchestrator and coordinator on node 0's in-process
	// connections; the worker agents reach the cluster by URL, through
	// nodes 0 and 1 only.
	s := startServices(t, nodes[0], stackOpts{
		orch:        orchestrator.Config{SpeakerTimeout: 20 * time.Second, TaskTimeout: 20 * time.Second},
		coordinator: true,
	})
	ab, err := bus.Connect(t.Context(), bus.Config{
		NATSURL: nodes[0].ClientURL() + "," + nodes[1].ClientURL(), Replicas: 3, Name: "agents",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ab.Close() })
	worker := agentkit.Agent{
		Card: protocol.AgentCard{Name: "worker", Description: "Does the numbered steps of jobs.", Type: protocol.TypeTool},
		Worker: agentkit.WorkerFunc(func(ctx context.Context, tk agentkit.Task) (agentkit.Result, error) {
			select {
			case <-time.After(200 * time.Millisecond):
			case <-ctx.Done():
			}
			return agentkit.Result{Conclusion: "done: " + tk.TaskID}, nil
		}),
		Policy: rules.New(rules.Config{}),
	}
	rt, err := agentkit.NewRuntime(ab.Conn(), ab.Subjects(), []agentkit.Agent{worker}, agentkit.WithResyncInterval(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rt.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	waitOnline(t, s.nc, s.subj, "coordinator", "worker")
	rec := record(t, s.nc, s.subj)
	t.Logf("cluster of 3 formed and runtime up in %v", time.Since(start).Round(time.Millisecond))

	// Make the lost node lead the chat logs and the goal records, so that
	// losing it forces elections under load.
	for _, stream := range []string{bus.StreamChats, "KV_" + bus.BucketGoals, "KV_" + bus.BucketChats} {
		leader := moveLeader(t, s.b.Conn(), stream, "ioa-n2")
		t.Logf("stream %s: leader %s", stream, leader)
	}
	var ids []string
	for i := range 6 {
		ids = append(ids, submit(t, s.nc, s.subj, protocol.GoalRequest{
			Goal: fmt.Sprintf("Do step one of job %d, then do step two of job %d.", i, i), Team: []string{"worker"},
		}))
	}
	waitFor(t, 60*time.Second, "goals to be under way", func() bool { return rec.count() >= 12 })
	lost := time.Now()
	if err := nodes[2].Close(); err != nil {
		t.Logf("closing node 2: %v", err)
	}
	t.Logf("node 2 stopped after %d chat messages", rec.count())
	ended := waitEnded(t, s.nc, s.subj, 120*time.Second, ids...)
	t.Logf("the %d goals ended %v after the node loss", len(ids), time.Since(lost).Round(time.Millisecond))
	after := submit(t, s.nc, s.subj, protocol.GoalRequest{Goal: "Do step one of the last job, then do step two of it.", Team: []string{"worker"}})
	ended[after] = waitEnded(t, s.nc, s.subj, 60*time.Second, after)[after]
	statuses := map[string]int{}
	for id, st := range ended {
		statuses[st.Status]++
		if st.Status != protocol.GoalConcluded {
			t.Errorf("goal %s ended %s: %+v", id, st.Status, st.Result)
		}
	}
	a := auditGoals(t, s.nc, s.subj, rec, ended)
	t.Logf("statuses=%v %s", statuses, a)
	if a.Lost+a.Duplicated != 0 || len(a.Problems) > 0 {
		t.Errorf("%s %v", a, a.Problems)
	}
}

// moveLeader asks the stream's leader to step down in favour of server and
// returns the leader afterwards ("" if it cannot tell).
func moveLeader(t *testing.T, nc *nats.Conn, stream, server string) string {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		st, err := js.Stream(t.Context(), stream)
		if err != nil {
			t.Fatalf("stream %s: %v", stream, err)
		}
		info, err := st.Info(t.Context())
		if err == nil && info.Cluster != nil && info.Cluster.Leader == server {
			return server
		}
		req := fmt.Sprintf(`{"placement":{"preferred":%q}}`, server)
		if _, err := nc.Request("$JS.API.STREAM.LEADER.STEPDOWN."+stream, []byte(req), 5*time.Second); err != nil {
			t.Logf("stepdown %s: %v", stream, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	st, _ := js.Stream(t.Context(), stream)
	if info, err := st.Info(t.Context()); err == nil && info.Cluster != nil {
		return info.Cluster.Leader
	}
	return ""
}
