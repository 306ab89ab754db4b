package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/ioa-nats/ioa/agentkit"
)

// Defaults of Exec.
const (
	DefaultExecTimeout   = 5 * time.Minute
	DefaultExecMaxOutput = 1 << 20
	stderrKeep           = 4 << 10
	stderrLines          = 5
)

// Errors an Exec run wraps, for callers that branch on them.
var (
	ErrTimeout     = errors.New("timed out")
	ErrOutputLimit = errors.New("output limit exceeded")
	ErrExit        = errors.New("program failed")
)

// Exec runs a program for each task, with no shell: the task (agentkit.Task
// as JSON) on its stdin, the result on its stdout, either plain text or a
// JSON object {"conclusion": "..."} (or {"error": "..."} to fail the task).
// The program runs in its own process group, which is killed on timeout,
// when stdout passes the cap, or when the task is cancelled.
type Exec struct {
	// Command is the program and its arguments.
	Command []string
	// Dir is the working directory; empty means the agent's.
	Dir string
	// Env, when set, is the program's whole environment (KEY=value).
	Env []string
	// Timeout bounds a run (default 5m).
	Timeout time.Duration
	// MaxOutput bounds stdout in bytes (default 1 MiB).
	MaxOutput int
}

var _ agentkit.Worker = (*Exec)(nil)

// Run runs the program once for t.
func (e *Exec) Run(ctx context.Context, t agentkit.Task) (agentkit.Result, error) {
	if len(e.Command) == 0 || e.Command[0] == "" {
		return agentkit.Result{}, errors.New("exec: no command")
	}
	prog := e.Command[0]
	timeout := e.Timeout
	if timeout <= 0 {
		timeout = DefaultExecTimeout
	}
	limit := e.MaxOutput
	if limit <= 0 {
		limit = DefaultExecMaxOutput
	}
	input, err := json.Marshal(t)
	if err != nil {
		return agentkit.Result{}, fmt.Errorf("exec %s: encode task: %w", prog, err)
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(rctx, prog, e.Command[1:]...)
	cmd.Dir = e.Dir
	if e.Env != nil {
		cmd.Env = e.Env
	}
	cmd.Stdin = bytes.NewReader(input)
	stdout := &capWriter{limit: limit, over: cancel}
	stderr := &capWriter{limit: stderrKeep}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// If the program leaves children holding the pipes, stop waiting soon.
	cmd.WaitDelay = time.Second
	killGroup(cmd)

	err = cmd.Run()
	switch {
	case stdout.exceeded():
		return agentkit.Result{}, fmt.Errorf("exec %s: %w: stdout passed %d bytes", prog, ErrOutputLimit, limit)
	case ctx.Err() != nil:
		return agentkit.Result{}, fmt.Errorf("exec %s: %w", prog, ctx.Err())
	case errors.Is(rctx.Err(), context.DeadlineExceeded):
		return agentkit.Result{}, fmt.Errorf("exec %s: %w after %v", prog, ErrTimeout, timeout)
	case err != nil:
		var xe *exec.ExitError
		if errors.As(err, &xe) {
			return agentkit.Result{}, fmt.Errorf("exec %s: %w: %v%s", prog, ErrExit, xe.ProcessState, firstLines(stderr.String()))
		}
		return agentkit.Result{}, fmt.Errorf("exec %s: %w", prog, err)
	}
	return parseOutput(prog, stdout.String())
}

// parseOutput reads stdout: a JSON object with "conclusion" (or "error"),
// else the text itself.
func parseOutput(prog, out string) (agentkit.Result, error) {
	trimmed := strings.TrimSpace(out)
	if strings.HasPrefix(trimmed, "{") {
		var v struct {
			Conclusion *string `json:"conclusion"`
			Error      string  `json:"error"`
		}
		if json.Unmarshal([]byte(trimmed), &v) == nil && (v.Conclusion != nil || v.Error != "") {
			if v.Error != "" {
				return agentkit.Result{}, fmt.Errorf("exec %s: %w: %s", prog, ErrExit, v.Error)
			}
			return agentkit.Result{Conclusion: *v.Conclusion}, nil
		}
	}
	return agentkit.Result{Conclusion: trimmed}, nil
}

func firstLines(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return " (no stderr)"
	}
	lines := strings.SplitN(s, "\n", stderrLines+1)
	if len(lines) > stderrLines {
		lines = append(lines[:stderrLines], "...")
	}
	return "; stderr: " + strings.Join(lines, "\n")
}

// capWriter keeps up to limit bytes; past it, it calls over (once) and
// fails the write, so the program is stopped instead of filling memory.
type capWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	limit int
	over  func()
	hit   bool
}

var errCap = errors.New("output cap reached")

func (w *capWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	room := w.limit - w.buf.Len()
	if len(p) <= room {
		return w.buf.Write(p)
	}
	w.buf.Write(p[:max(room, 0)])
	if w.over == nil {
		return len(p), nil // stderr: keep the start, drop the rest quietly
	}
	if !w.hit {
		w.hit = true
		w.over()
	}
	return 0, errCap
}

func (w *capWriter) exceeded() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.hit
}

func (w *capWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}
