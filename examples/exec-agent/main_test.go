// Package execagent tests the exec-agent example: it loads agents.yaml the
// way `ioa agent run` does and runs its agents, whose workers are the
// Python and shell programs of this folder, against a server stack.
package execagent

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/agentkit/rules"
	"github.com/ioa-nats/ioa/agentkit/worker"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/configs"
	"github.com/ioa-nats/ioa/internal/stacktest"
	"github.com/nats-io/nats.go"
	"github.com/spf13/pflag"
)

// repoRoot is where agents.yaml's relative commands are meant to run.
const repoRoot = "../.."

func TestExecWorkers(t *testing.T) {
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	configs.AddFlags(fs)
	if err := fs.Parse([]string{"--config", "agents.yaml"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := configs.Load(fs)
	if err != nil {
		t.Fatalf("agents.yaml: %v", err)
	}

	missing := map[string]string{} // agent name -> the program it lacks
	var agents []agentkit.Agent
	for _, a := range cfg.Agents {
		w := a.Worker
		if w.Kind != "exec" {
			t.Fatalf("agent %s: worker kind %q, want exec", a.Name, w.Kind)
		}
		if _, err := exec.LookPath(w.Command[0]); err != nil {
			missing[a.Name] = w.Command[0]
			continue
		}
		dir := w.Dir
		if dir == "" || !filepath.IsAbs(dir) {
			dir = filepath.Join(repoRoot, dir)
		}
		agents = append(agents, agentkit.Agent{
			Card: protocol.AgentCard{
				Name: a.Name, Description: a.Description, Capabilities: a.Capabilities,
				Type: a.Type, Tags: a.Tags,
			},
			Worker: &worker.Exec{Command: w.Command, Dir: dir, Timeout: w.Timeout, MaxOutput: w.MaxOutput},
			Policy: rules.New(rules.Config{}),
		})
	}
	if len(agents) == 0 {
		t.Skipf("none of the workers' programs is installed: %v", missing)
	}

	s := stacktest.Start(t, stacktest.Options{Coordinator: true, Secure: true})
	// Over TCP, as `ioa agent run --nats-url --creds` connects; one
	// connection may act for several agents with the admin's credentials.
	nc, err := nats.Connect(s.URL, nats.Name("exec-agents"), nats.UserCredentials(bus.AdminCredsFile(s.Bus.Config().DataDir)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	subjects, err := bus.NewSubjects(cfg.Bus.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := agentkit.NewRuntime(nc, subjects, agents)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- rt.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("runtime: %v", err)
		}
	})

	cases := []struct {
		agent, goal, want string
	}{
		{"py-stats", "Compute the mean and median of 3, 5 and 10.", "statistics: n=3, mean=6, median=5, stdev=3.606"},
		{"py-stats", "Compute the mean of 3,200, 5 and 10.", "statistics: n=3, mean=1071.67, median=10"},
		{"sh-wordcount", "Count the words in 'to be or not to be'.", "'to be or not to be' has 6 words"},
		{"sh-wordcount", `Count the words in "the quick brown fox".`, "'the quick brown fox' has 4 words"},
	}
	for _, c := range cases {
		t.Run(c.agent, func(t *testing.T) {
			if prog, ok := missing[c.agent]; ok {
				t.Skipf("%s is not installed: the %s worker cannot run", prog, c.agent)
			}
			s.WaitOnline(t, c.agent)
			res := s.Submit(t, protocol.GoalRequest{Goal: c.goal, Team: []string{c.agent}})
			if res.Status != protocol.GoalConcluded {
				t.Fatalf("status %s (%s), conclusion:\n%s", res.Status, res.Reason, res.Conclusion)
			}
			if !strings.Contains(res.Conclusion, c.want) {
				t.Errorf("conclusion:\n%s\nwant it to contain %q", res.Conclusion, c.want)
			}
		})
	}
}
