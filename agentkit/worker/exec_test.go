package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/agentkit/worker"
)

// The test binary doubles as the program the Exec worker runs: with
// IOA_EXEC_HELPER set it plays the role named there.
func TestMain(m *testing.M) {
	if mode := os.Getenv("IOA_EXEC_HELPER"); mode != "" {
		os.Exit(helper(mode))
	}
	os.Exit(m.Run())
}

func helper(mode string) int {
	switch mode {
	case "echo":
		var t agentkit.Task
		if err := json.NewDecoder(os.Stdin).Decode(&t); err != nil {
			fmt.Fprintln(os.Stderr, "bad stdin:", err)
			return 2
		}
		fmt.Printf("did %s (%s) for goal %q with %d earlier\n", t.TaskID, t.TaskDesc, t.Goal, len(t.Earlier))
	case "json":
		_, _ = io.Copy(io.Discard, os.Stdin)
		fmt.Print(`{"conclusion": "from json", "extra": 1}`)
	case "json-error":
		fmt.Print(`{"error": "cannot do that"}`)
	case "fail":
		fmt.Fprintln(os.Stderr, "line one\nline two\nline three\nline four\nline five\nline six\nline seven")
		return 3
	case "sleep":
		// A child in the same process group that also holds stdout: the
		// group kill must take it down too, or Run would wait for it.
		child := exec.Command(os.Args[0])
		child.Env = append(os.Environ(), "IOA_EXEC_HELPER=sleep-child")
		child.Stdout = os.Stdout
		_ = child.Start()
		if f := os.Getenv("IOA_EXEC_PIDFILE"); f != "" && child.Process != nil {
			_ = os.WriteFile(f, []byte(strconv.Itoa(child.Process.Pid)), 0o600)
		}
		time.Sleep(time.Minute)
	case "sleep-child":
		time.Sleep(time.Minute)
	case "flood":
		chunk := strings.Repeat("x", 4096)
		for {
			if _, err := fmt.Print(chunk); err != nil {
				return 1
			}
		}
	}
	return 0
}

func helperExec(mode string) *worker.Exec {
	return &worker.Exec{
		Command: []string{os.Args[0], "-test.run=^$"},
		// atexit_sleep_ms: a -race child would otherwise linger 1s at exit.
		Env: append(os.Environ(), "IOA_EXEC_HELPER="+mode, "GORACE=atexit_sleep_ms=0"),
	}
}

func task() agentkit.Task {
	return agentkit.Task{
		Task:    protocol.Task{TaskID: "t1", Assignee: "a", TaskDesc: "count sheep"},
		CommID:  "c1",
		GoalID:  "g1",
		Goal:    "sleep well",
		Earlier: []agentkit.TaskOutcome{{TaskID: "t0", Status: protocol.TaskCompleted, Result: "bed made"}},
	}
}

func TestExecStdinStdout(t *testing.T) {
	res, err := helperExec("echo").Run(t.Context(), task())
	if err != nil {
		t.Fatal(err)
	}
	if want := `did t1 (count sheep) for goal "sleep well" with 1 earlier`; res.Conclusion != want {
		t.Fatalf("conclusion %q, want %q", res.Conclusion, want)
	}
}

func TestExecJSONResult(t *testing.T) {
	res, err := helperExec("json").Run(t.Context(), task())
	if err != nil || res.Conclusion != "from json" {
		t.Fatalf("got %q, %v; want from json", res.Conclusion, err)
	}
	_, err = helperExec("json-error").Run(t.Context(), task())
	if !errors.Is(err, worker.ErrExit) || !strings.Contains(err.Error(), "cannot do that") {
		t.Fatalf("json error: got %v", err)
	}
}

func TestExecNonZeroExit(t *testing.T) {
	_, err := helperExec("fail").Run(t.Context(), task())
	if !errors.Is(err, worker.ErrExit) {
		t.Fatalf("got %v, want ErrExit", err)
	}
	msg := err.Error()
	for _, want := range []string{"exit status 3", "line one", "line five"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "line six") {
		t.Errorf("error %q has more than the first lines of stderr", msg)
	}
}

func TestExecTimeoutKillsGroup(t *testing.T) {
	w := helperExec("sleep")
	// Long enough for the helper to start its child and say so, even on a
	// loaded machine.
	w.Timeout = 5 * time.Second
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	w.Env = append(w.Env, "IOA_EXEC_PIDFILE="+pidFile)
	_, err := w.Run(t.Context(), task())
	if !errors.Is(err, worker.ErrTimeout) {
		t.Fatalf("got %v, want ErrTimeout", err)
	}
	// The grandchild held stdout and would have slept a minute: the group
	// kill took it down too.
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("the helper did not start its child: %v", err)
	}
	pid, _ := strconv.Atoi(string(b))
	for i := 0; alive(pid); i++ {
		if i == 500 {
			t.Fatalf("child %d of the timed-out worker is still running: the process group was not killed", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// alive reports whether pid runs (a zombie waiting to be reaped does not).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	return len(f) > 2 && f[2] != "Z" && f[2] != "X"
}

func TestExecOutputCap(t *testing.T) {
	w := helperExec("flood")
	w.MaxOutput = 64 << 10
	_, err := w.Run(t.Context(), task())
	if !errors.Is(err, worker.ErrOutputLimit) || !strings.Contains(err.Error(), "65536 bytes") {
		t.Fatalf("got %v, want ErrOutputLimit naming the cap", err)
	}
}

func TestExecMissingProgram(t *testing.T) {
	w := &worker.Exec{Command: []string{"/nonexistent/ioa-worker"}}
	_, err := w.Run(t.Context(), task())
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/ioa-worker") {
		t.Fatalf("got %v, want an error naming the program", err)
	}
	if _, err := (&worker.Exec{}).Run(t.Context(), task()); err == nil {
		t.Fatal("empty command: no error")
	}
}

func TestExecCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := helperExec("sleep").Run(ctx, task())
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}
