// Package natscliagent tests agent.sh, the agent written with bash and the
// nats CLI: it runs the script as a separate process against a server stack
// on a loopback port and has it do tasks in real goals.
package natscliagent

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/bus/auth"
	"github.com/ioa-nats/ioa/internal/stacktest"
)

const agentName = "rot13"

func TestBashAgent(t *testing.T) {
	natsCLI := findNATS(t)
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash is not installed")
	}
	s := stacktest.Start(t, stacktest.Options{Coordinator: true, Secure: true})
	script := startScript(t, bash, natsCLI, s.URL, s.Creds(t, agentName, auth.Agent))
	s.WaitOnline(t, agentName)

	cases := []struct {
		name, goal string
		want       []string
	}{
		// One clause: a sync task.
		{"sync", "Encode 'Hello NATS' with ROT13.", []string{"ROT13 of 'Hello NATS' is 'Uryyb ANGF'"}},
		// Double quotes, as people write them (the whole task was encoded).
		{"double quotes", `ROT13 the text "Hello agents"`, []string{"ROT13 of 'Hello agents' is 'Uryyb ntragf'"}},
		// Two independent clauses: async tasks, each with task_progress
		// before its task_result, then a pause on both.
		{"async", "Encode 'Internet of Agents' with ROT13. Decode 'Uryyb jbeyq' with ROT13.", []string{
			"ROT13 of 'Internet of Agents' is 'Vagrearg bs Ntragf'",
			"ROT13 of 'Uryyb jbeyq' is 'Hello world'",
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := s.Submit(t, protocol.GoalRequest{Goal: c.goal, Team: []string{agentName}})
			if res.Status != protocol.GoalConcluded {
				t.Fatalf("status %s (%s), conclusion:\n%s\nagent log:\n%s", res.Status, res.Reason, res.Conclusion, script.log())
			}
			for _, w := range c.want {
				if !strings.Contains(res.Conclusion, w) {
					t.Errorf("conclusion:\n%s\nwant it to contain %q", res.Conclusion, w)
				}
			}
		})
	}

	// Ctrl-C: the script deregisters, stops its nats processes and exits.
	script.stop(t)
	var info protocol.AgentInfo
	err = bus.Request(t.Context(), s.Bus.Conn(), s.Bus.Subjects().Registry(bus.RegistryGet), protocol.NameRequest{Name: agentName}, &info)
	if !errors.Is(err, protocol.ErrNotFound) {
		t.Errorf("after the script stopped, registry.get: %v (online %v), want not_found", err, info.Online)
	}

	// Killed in the middle of a task and started again: the new process,
	// which remembers nothing, is handed the task and the goal concludes.
	creds := s.Creds(t, agentName, auth.Agent)
	slow := startScript(t, bash, natsCLI, s.URL, creds, "WORK_DELAY=600")
	s.WaitOnline(t, agentName)
	var sub protocol.SubmitReply
	if err := s.Request(t, s.Bus.Subjects().Goal(bus.GoalSubmit), protocol.GoalRequest{Goal: "Encode 'crash test' with ROT13.", Team: []string{agentName}}, &sub); err != nil {
		t.Fatal(err)
	}
	stacktest.WaitFor(t, "the task to reach the script", func() bool { return strings.Contains(slow.log(), "sync_task_assign from") })
	slow.kill()
	startScript(t, bash, natsCLI, s.URL, creds)
	var st protocol.GoalStatus
	stacktest.WaitFor(t, "the goal to end after the restart", func() bool {
		return s.Request(t, s.Bus.Subjects().Goal(bus.GoalGet), protocol.GoalIDRequest{GoalID: sub.GoalID}, &st) == nil && protocol.GoalEnded(st.Status)
	})
	if st.Status != protocol.GoalConcluded || st.Result == nil || !strings.Contains(st.Result.Conclusion, "'penfu grfg'") {
		t.Fatalf("goal after the restart: %s %+v", st.Status, st.Result)
	}
}

// kill ends the script's process group at once, as a crash would.
func (s *script) kill() {
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	err := <-s.done
	s.done <- err // for the cleanup
}

// findNATS returns the nats CLI from PATH or $(go env GOPATH)/bin, where
// `make tools` installs it.
func findNATS(t *testing.T) string {
	if p, err := exec.LookPath("nats"); err == nil {
		return p
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		for _, dir := range filepath.SplitList(strings.TrimSpace(string(out))) {
			p := filepath.Join(dir, "bin", "nats")
			if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
				return p
			}
		}
	}
	t.Skip("the nats CLI is not installed: run `make tools` (go install github.com/nats-io/natscli/nats@v0.5.0)")
	return ""
}

type script struct {
	cmd  *exec.Cmd
	out  *stacktest.Buffer
	done chan error
}

// startScript runs agent.sh in its own process group; whatever happens, the
// group is killed when the test ends.
func startScript(t *testing.T, bash, natsCLI, url, creds string, env ...string) *script {
	t.Helper()
	cmd := exec.Command(bash, "agent.sh")
	cmd.Env = append(os.Environ(), "NATS_URL="+url, "NATS_CREDS="+creds, "NATS="+natsCLI, "AGENT_NAME="+agentName, "IOA_PREFIX=ioa", "HEARTBEAT=1")
	cmd.Env = append(cmd.Env, env...)
	out := &stacktest.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := &script{cmd: cmd, out: out, done: make(chan error, 1)}
	go func() { sc.done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-sc.done
		if t.Failed() {
			t.Logf("agent.sh output:\n%s", out.String())
		}
	})
	return sc
}

func (s *script) log() string { return s.out.String() }

// stop interrupts the script as Ctrl-C would and checks that it exits and
// leaves no process of its group behind.
func (s *script) stop(t *testing.T) {
	t.Helper()
	pid := s.cmd.Process.Pid
	if err := syscall.Kill(pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.done:
		s.done <- err // for the cleanup
		if err != nil {
			t.Errorf("agent.sh exited with %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("agent.sh did not exit on SIGINT; output:\n%s", s.log())
	}
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(-pid, 0) == nil {
		if time.Now().After(deadline) {
			ps, _ := exec.Command("ps", "-e", "-o", "pgid=,pid=,ppid=,stat=,args=").Output()
			var left []string
			for _, l := range strings.Split(string(ps), "\n") {
				if f := strings.Fields(l); len(f) > 0 && f[0] == strconv.Itoa(pid) {
					left = append(left, l)
				}
			}
			t.Fatalf("processes of agent.sh's group outlived it:\n%s", strings.Join(left, "\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
