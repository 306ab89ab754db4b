package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ioa-nats/ioa/agentkit/builtin"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/bus/auth"
	"github.com/ioa-nats/ioa/configs"
	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
)

func newAgentCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run agents against a NATS server, issue their credentials, or list the built-in workers",
	}
	run := &cobra.Command{
		Use:   "run",
		Short: "Run the agents of a config against any NATS server (agents can live on other machines)",
		Long: `run starts the agents listed under "agents:" in the config and connects them to
--nats-url (or NATS_URL; without either, to the embedded default address
nats://127.0.0.1:4222 of a local "ioa serve"). It runs no registry and no
orchestrator: those run where "ioa serve" runs. The agents register, heartbeat,
accept invitations and do their tasks until interrupted, then deregister.
A name that another process already serves online is taken over (run warns
first): its open turns and tasks come here, and when run stops the name is
gone from the registry until that process registers again.`,
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
			warnNamesOnline(cmd, cfg.Agents)
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
	cmd.AddCommand(run, builtins, newAgentAddCmd())
	return cmd
}

func newAgentAddCmd() *cobra.Command {
	var out, role string
	cmd := &cobra.Command{
		Use:   "add NAME",
		Short: "Write credentials (.creds) for an agent, client or observer of a secure ioa serve",
		Long: `add issues a NATS user JWT for NAME, signed by the account of the data dir's
operator (created by the first "ioa serve" there, or by this command), and
writes it with its new secret key as a standard .creds file: what nsc writes,
what "nats --creds", nats.UserCredentials and "ioa ... --creds" read.

The role decides what the server lets NAME do:
  agent     speak in its own chats, register and heartbeat NAME, launch goals,
            submit sub-goals, search the registry (the default)
  client    submit goals and get, list and cancel its own; search the registry
  observer  read every chat, task result, goal and agent; change nothing
  admin     everything (the runtime's own services)

It works offline, from the data dir; keep the file as secret as a password.`,
		Example: `  ioa agent add rot13 --data-dir data --out rot13.creds
  ioa agent add ci --role client --out ci.creds
  nats --creds rot13.creds --inbox-prefix _INBOX.rot13 req ioa.registry.search '{"query":"rot13"}'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := loadConfig(cmd)
			if err != nil {
				return err
			}
			r, err := auth.ParseRole(role)
			if err != nil {
				return err
			}
			name := args[0]
			if err := auth.CheckName(name); err != nil && r != auth.Admin {
				return err
			}
			if out == "" {
				out = name + ".creds"
			}
			a, err := auth.LoadOrCreate(bus.AuthDir(cfg.Bus.DataDir))
			if err != nil {
				return err
			}
			if err := a.WriteCreds(out, auth.Identity{Name: name, Role: r}, cfg.Bus.Prefix); err != nil {
				return err
			}
			// For an external server: the fragment that makes it trust
			// this operator.
			if err := a.WriteServerConfig(); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: %s %q of the operator in %s\n", out, r, name, a.Dir())
			if r != auth.Admin {
				fmt.Fprintf(cmd.OutOrStdout(), "its replies arrive under %s (nats CLI: --inbox-prefix %s)\n", auth.InboxPrefix(name), auth.InboxPrefix(name))
			}
			return nil
		},
	}
	configs.AddFlags(cmd.Flags())
	cmd.Flags().StringVarP(&out, "out", "o", "", "file to write (default NAME.creds)")
	cmd.Flags().StringVar(&role, "role", string(auth.Agent), "agent, client, observer or admin")
	return cmd
}

func fileNote(f string) string {
	if f == "" {
		return " (no --config given)"
	}
	return " " + f
}

// warnNamesOnline says which of the agents about to run are online already,
// served by another process: this one takes their names over (the referee
// reads a new incarnation as a restart and hands it their open turns and
// tasks), and when it stops it deregisters them, so they are gone from the
// registry until the other process registers again. A restart after a
// crash looks the same until the old heartbeat expires, so it is a warning,
// not a refusal. Nothing is said when the registry cannot be asked.
func warnNamesOnline(cmd *cobra.Command, agents []configs.Agent) {
	c, err := dialClient(cmd)
	if err != nil {
		return
	}
	defer c.Close()
	var online []string
	for _, a := range agents {
		var info protocol.AgentInfo
		err := c.requestWithin(cmd.Context(), 2*time.Second, c.subj.Registry(bus.RegistryGet), protocol.NameRequest{Name: a.Name}, &info)
		if err == nil && info.Online {
			online = append(online, a.Name)
		}
	}
	if len(online) == 0 {
		return
	}
	is, it := "is", "the name"
	if len(online) > 1 {
		is, it = "are", "the names"
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s %s already online, served by another process: this one takes %s over "+
		"(the referee hands it their open turns and tasks), and when it stops %s %s deregistered until that process registers again\n",
		strings.Join(online, ", "), is, it, it, is)
}
