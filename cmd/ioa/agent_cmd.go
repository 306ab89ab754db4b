package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ioa-nats/ioa/agentkit/builtin"
	"github.com/ioa-nats/ioa/configs"
	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
)

func newAgentCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run agents against a NATS server, or list the built-in workers",
	}
	run := &cobra.Command{
		Use:   "run",
		Short: "Run the agents of a config against any NATS server (agents can live on other machines)",
		Long: `run starts the agents listed under "agents:" in the config and connects them to
--nats-url (or NATS_URL; without either, to the embedded default address
nats://127.0.0.1:4222 of a local "ioa serve"). It runs no registry and no
orchestrator: those run where "ioa serve" runs. The agents register, heartbeat,
accept invitations and do their tasks until interrupted, then deregister.`,
		Example: `  ioa agent run --config configs/demo.yaml
  ioa agent run --config my-agents.yaml --nats-url nats://nats.example.com:4222
  ioa agent run --config examples/exec-agent/agents.yaml --sandbox ./files`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(cmd)
			if err != nil {
				return err
			}
			if len(cfg.Agents) == 0 {
				return fmt.Errorf("no agents in the configuration%s: add some under \"agents:\" (see configs/demo.yaml)", fileNote(cfg.File))
			}
			if cfg.Bus.NATSURL == "" {
				url, err := clientURL(cfg)
				if err != nil {
					return err
				}
				cfg.Bus.NATSURL = url
			}
			sandbox, _ := cmd.Flags().GetString("sandbox")
			log := newLogger(cfg)
			st, err := startStack(cmd.Context(), cfg, stackOptions{sandbox: sandbox}, log)
			if err != nil {
				if isDialError(err) || errors.Is(err, nats.ErrNoServers) {
					return fmt.Errorf("cannot reach NATS at %s: is \"ioa serve\" running? (or pass --nats-url)", cfg.Bus.NATSURL)
				}
				return err
			}
			defer st.shutdown()
			names := make([]string, len(cfg.Agents))
			for i, a := range cfg.Agents {
				names[i] = a.Name
			}
			fmt.Fprintf(cmd.OutOrStdout(), "running %d agents (%s) on %s; Ctrl-C to stop\n", len(names), strings.Join(names, ", "), cfg.Bus.NATSURL)
			<-cmd.Context().Done()
			return nil
		},
	}
	configs.AddFlags(run.Flags())
	run.Flags().String("sandbox", ".", "folder the built-in file and text workers may read")
	builtins := &cobra.Command{
		Use:   "builtins",
		Short: "List the built-in workers an agent config can use (worker: {kind: builtin, builtin: NAME})",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, n := range builtin.Names() {
				fmt.Fprintln(cmd.OutOrStdout(), n)
			}
			return nil
		},
	}
	cmd.AddCommand(run, builtins)
	return cmd
}

func fileNote(f string) string {
	if f == "" {
		return " (no --config given)"
	}
	return " " + f
}
