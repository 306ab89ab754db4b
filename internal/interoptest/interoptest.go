// Package interoptest builds, for tests, the agents of a configuration file
// the way `ioa agent run` does: mcp and a2a workers through package interop
// (which reaches their servers), built-in ones through agentkit/builtin,
// all with the rules policy. Their sessions end with the test.
package interoptest

import (
	"path/filepath"
	"testing"

	"github.com/spf13/pflag"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/builtin"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/agentkit/rules"
	"github.com/ioa-nats/ioa/configs"
	"github.com/ioa-nats/ioa/interop"
)

// Load reads a configuration file as `ioa agent run --config file` does.
func Load(t testing.TB, file string) *configs.Config {
	t.Helper()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	configs.AddFlags(fs)
	if err := fs.Parse([]string{"--config", file}); err != nil {
		t.Fatal(err)
	}
	cfg, err := configs.Load(fs)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return cfg
}

// Agents builds cfg's agents. Commands run in root (the repository root,
// where the configs' relative paths start) unless they name a dir.
func Agents(t testing.TB, cfg *configs.Config, root string) []agentkit.Agent {
	t.Helper()
	var out []agentkit.Agent
	for _, a := range cfg.Agents {
		w := a.Worker
		if w.Dir == "" || !filepath.IsAbs(w.Dir) {
			w.Dir = filepath.Join(root, w.Dir)
		}
		a.Worker = w
		card := protocol.AgentCard{Name: a.Name, Description: a.Description, Capabilities: a.Capabilities, Type: protocol.TypeTool, Tags: a.Tags}
		var worker agentkit.Worker
		if interop.Handles(w.Kind) {
			built, err := interop.Build(t.Context(), a, card, interop.Options{})
			if err != nil {
				t.Fatalf("agent %s: %v", a.Name, err)
			}
			t.Cleanup(func() { _ = built.Close() })
			worker, card = built.Worker, built.Card
		} else {
			var err error
			if worker, err = builtin.New(w.Builtin, builtin.Options{Sandbox: w.Dir}); err != nil {
				t.Fatalf("agent %s: %v", a.Name, err)
			}
		}
		out = append(out, agentkit.Agent{Card: card, Worker: worker, Policy: rules.New(rules.Config{})})
	}
	return out
}
