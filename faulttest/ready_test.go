package faulttest

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/nats-io/nats.go"
)

// TestFaultServeFirstGoalAfterStart runs the real `ioa serve --config
// configs/demo.yaml` as a child process, as a script or a CI job would:
// connect, ask goal.list until it answers, then submit a goal at once. The
// goal must conclude on fresh starts, after a clean stop and after a
// SIGKILL on the same data dir; `ioa serve --check` must agree.
func TestFaultServeFirstGoalAfterStart(t *testing.T) {
	cfg, err := filepath.Abs("../configs/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// Nothing listens here: --check says not ready, exit status 1.
	if code, out := runIOA(t, "serve", "--check", "--nats-url", "nats://"+freeAddr(t)); code != 1 || !strings.Contains(out, "cannot reach NATS") {
		t.Fatalf("ioa serve --check with no server: exit %d, output %q; want 1 and why", code, out)
	}
	type start struct {
		data string
		stop syscall.Signal // how this run ends: SIGTERM (clean) or SIGKILL
	}
	runs := []start{
		{dir + "/a", syscall.SIGTERM}, {dir + "/b", syscall.SIGTERM}, {dir + "/c", syscall.SIGKILL},
		{dir + "/c", syscall.SIGTERM}, // after a SIGKILL
		{dir + "/c", syscall.SIGTERM}, // after a clean stop
	}
	for i, r := range runs {
		addr := freeAddr(t)
		serve := startProc(t, "ioa serve", "serve", "--config", cfg, "--data-dir", r.data, "--listen", addr, "--insecure")
		var nc *nats.Conn
		waitFor(t, 60*time.Second, "ioa serve to listen", func() bool {
			nc, err = nats.Connect("nats://" + addr)
			return err == nil
		})
		subj, _ := bus.NewSubjects("ioa")
		probes := 0
		for {
			probes++
			var list protocol.GoalListReply
			err := request(nc, subj.Goal(bus.GoalList), protocol.GoalListRequest{}, &list)
			if err == nil {
				break
			}
			if !errors.Is(err, bus.ErrNoResponders) {
				t.Fatalf("run %d: goal.list: %v", i, err)
			}
			if serve.exited() {
				t.Fatalf("run %d: ioa serve exited: %v", i, serve.err)
			}
			time.Sleep(5 * time.Millisecond) // a pause between probes, not a deadline
		}
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		var res protocol.GoalResult
		err := bus.Request(ctx, nc, subj.Goal(bus.GoalSubmit), protocol.GoalRequest{Goal: "Compute 6 * 7", Wait: true}, &res)
		cancel()
		if err != nil {
			t.Fatalf("run %d: submit: %v", i, err)
		}
		if res.Status != protocol.GoalConcluded || !strings.Contains(res.Conclusion, "42") {
			t.Fatalf("run %d: first goal = %+v, want concluded with 42", i, res)
		}
		if code, out := runIOA(t, "serve", "--check", "--nats-url", "nats://"+addr); code != 0 || !strings.Contains(out, "ready since") {
			t.Fatalf("run %d: ioa serve --check: exit %d, output %q; want 0, ready", i, code, out)
		}
		if out := serve.out.String(); !strings.Contains(out, "ready in ") {
			t.Fatalf("run %d: ioa serve printed no ready line:\n%s", i, out)
		}
		nc.Close()
		serve.signal(r.stop)
		<-serve.done
		t.Logf("run %d (%s): the goal service answered after %d probes; first goal %s in %s; stopped with %v",
			i, filepath.Base(r.data), probes, res.Status, res.Elapsed, r.stop)
	}
}

// runIOA runs the ioa binary to its end and returns its exit status and
// combined output.
func runIOA(t *testing.T, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, ioaBinary(t), args...).CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &ee):
		return ee.ExitCode(), string(out)
	}
	t.Fatalf("ioa %v: %v", args, err)
	return -1, ""
}

// waitReady returns once the orchestrator's <p>.health says ready: the goal
// service is open, with its coordinator and configured agents online.
func waitReady(t testing.TB, nc *nats.Conn, subj bus.Subjects) {
	t.Helper()
	waitFor(t, 60*time.Second, "ioa serve to be ready", func() bool {
		var h protocol.Health
		return request(nc, subj.Health(), nil, &h) == nil && h.Ready
	})
}
