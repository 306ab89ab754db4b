package faulttest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/internal/stacktest"
)

var (
	binDir   string
	binOnce  sync.Once
	binPath  string
	binErr   error
	binBuild []byte
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ioa-faulttest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// ioaBinary builds the ioa command once per test binary, on first use, so
// that fuzz workers and tests that need no child process do not pay for it.
func ioaBinary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		gomod, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			binErr = fmt.Errorf("go env GOMOD: %w", err)
			return
		}
		root := filepath.Dir(strings.TrimSpace(string(gomod)))
		binPath = filepath.Join(binDir, "ioa")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/ioa")
		cmd.Dir = root
		binBuild, binErr = cmd.CombinedOutput()
	})
	if binErr != nil {
		t.Fatalf("build ioa: %v\n%s", binErr, binBuild)
	}
	return binPath
}

// proc is a child process in its own process group.
type proc struct {
	t    testing.TB
	name string
	cmd  *exec.Cmd
	out  *stacktest.Buffer
	done chan struct{}
	err  error
}

// startProc runs the ioa binary with args. The process group, and the
// process groups of the programs it started (exec workers run in their
// own), are killed when the test ends.
func startProc(t testing.TB, name string, args ...string) *proc {
	t.Helper()
	return startExec(t, name, nil, ioaBinary(t), args...)
}

// startExec runs any program as startProc runs ioa, with env added to this
// process's environment.
func startExec(t testing.TB, name string, env []string, path string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(path, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	p := &proc{t: t, name: name, cmd: cmd, out: &stacktest.Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.kill()
		if dir := os.Getenv("IOA_FAULT_LOGS"); dir != "" {
			// The whole output, for a failure the last 4 KiB do not explain.
			file := filepath.Join(dir, strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()+"-"+name)+fmt.Sprintf("-%d.log", cmd.Process.Pid))
			if err := os.WriteFile(file, []byte(p.out.String()), 0o644); err != nil {
				t.Logf("keep the output of %s: %v", name, err)
			}
		}
		if t.Failed() {
			t.Logf("--- output of %s (last 4 KiB):\n%s", name, tail(p.out.String(), 4096))
		}
	})
	return p
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// signal sends sig to the child's process group.
func (p *proc) signal(sig syscall.Signal) {
	if err := syscall.Kill(-p.cmd.Process.Pid, sig); err != nil && err != syscall.ESRCH {
		p.t.Errorf("signal %v to %s: %v", sig, p.name, err)
	}
}

// kill SIGKILLs the process group and the groups of its descendants (exec
// workers), and waits for the child to be reaped. Safe to call twice.
func (p *proc) kill() {
	pid := p.cmd.Process.Pid
	desc := descendants(pid)
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	for _, d := range desc {
		_ = syscall.Kill(-d, syscall.SIGKILL)
		_ = syscall.Kill(d, syscall.SIGKILL)
	}
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.t.Errorf("%s (pid %d) did not exit after SIGKILL", p.name, pid)
	}
	// Orphans re-parented to init are no longer descendants: kill the ones
	// found before.
	for _, d := range desc {
		_ = syscall.Kill(-d, syscall.SIGKILL)
	}
}

// exited reports whether the child has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// descendants lists the pids below pid, from /proc (Linux); elsewhere none.
func descendants(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces and parens.
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		children[ppid] = append(children[ppid], n)
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// writeFile writes a file under dir and returns its path.
func writeFile(t testing.TB, dir, name, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	return p
}

// agentConfig is an ioa config with one exec worker agent per name, each
// running script.
func agentConfig(names []string, script string, extra string) string {
	var b strings.Builder
	if !strings.Contains(extra, "log:") {
		b.WriteString("log:\n  level: info\n")
	}
	b.WriteString(extra)
	b.WriteString("agents:\n")
	for _, n := range names {
		fmt.Fprintf(&b, "  - name: %s\n    description: Does the numbered steps of jobs (%s).\n    capabilities: [steps, jobs]\n    worker: {kind: exec, command: [/bin/sh, %q]}\n", n, n, script)
	}
	return b.String()
}
