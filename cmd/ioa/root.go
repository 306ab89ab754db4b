package main

import (
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"

	"github.com/ioa-nats/ioa/agentkit/builtin"
	"github.com/ioa-nats/ioa/configs"
	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "ioa",
		Short: "Internet of Agents on NATS: agents that find each other, team up and get goals done",
		Long: `ioa runs the Internet of Agents on NATS in one binary: an embedded NATS
server with JetStream, the agent registry, the goal orchestrator and agents.

Agents register their capabilities, are discovered by meaning, team up in
group chats for a goal, split the work into sync and async tasks, pause until
tasks finish, spin off nested sub-teams and conclude.`,
		Example: `  ioa demo                         # watch a team of agents solve a goal
  ioa serve                        # run everything; NATS on 127.0.0.1:4222
  ioa goal "Convert 5 km to miles" # submit a goal to a running server
  nats --creds data/creds/admin.creds req ioa.goal.submit 'Convert 5 km to miles'`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newDemoCmd(), newServeCmd(), newBenchCmd(), newGoalCmd(), newWatchCmd(), newAgentsCmd(), newGoalsCmd(), newAgentCmd(), newVersionCmd(), newConfigCmd(), newRegistryCmd(), newMCPCmd(), newChatCmd())
	for _, c := range root.Commands() {
		refuseUnknownSubcommands(c)
	}
	return root
}

// refuseUnknownSubcommands makes a group of commands ("ioa goals") say
// that a word it does not know is no command of it, with exit status 1:
// cobra would print the group's help and exit 0 ("ioa goals frobnicate"),
// or, with a flag after it, complain about the flag ("ioa goals show ID
// --data-dir data": unknown flag --data-dir).
func refuseUnknownSubcommands(c *cobra.Command) {
	if !c.HasSubCommands() || c.Runnable() {
		return
	}
	c.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			return fmt.Errorf("unknown command %q for %q (its commands: %s)", args[0], cmd.CommandPath(), strings.Join(subcommandNames(cmd), ", "))
		}
		return nil
	}
	c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	c.DisableFlagsInUseLine = true
	c.FParseErrWhitelist.UnknownFlags = true // the unknown command is the error to report
}

func subcommandNames(c *cobra.Command) []string {
	var names []string
	for _, s := range c.Commands() {
		if s.IsAvailableCommand() {
			names = append(names, s.Name())
		}
	}
	return names
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of ioa and of its NATS server",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			natsVersion := "unknown"
			if bi, ok := debug.ReadBuildInfo(); ok {
				for _, d := range bi.Deps {
					if d.Path == "github.com/nats-io/nats-server/v2" {
						natsVersion = d.Version
					}
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "ioa %s (nats-server %s, protocol v1)\n", version, natsVersion)
			return nil
		},
	}
}

func newConfigCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Print the default configuration, or check a configuration",
		Example: `  ioa config > ioa.yaml          # start your own from the commented default
  ioa config --check --config ioa.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			check, _ := cmd.Flags().GetBool("check")
			if !check {
				_, err := cmd.OutOrStdout().Write(configs.DefaultYAML)
				return err
			}
			c, err := loadConfig(cmd)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "configuration OK (%s)\n", plural(len(c.Agents), "agent"))
			return nil
		},
	}
	configs.AddFlags(cmd.Flags())
	cmd.Flags().Bool("check", false, "load and validate the configuration instead of printing the default")
	return cmd
}

// loadConfig loads the configuration of a command that took the common
// flags, and checks the names of its built-in workers, which the configs
// package does not know: a misspelt one used to pass `ioa config --check`
// and stop `ioa serve` only after NATS and the registry had started.
func loadConfig(cmd *cobra.Command) (*configs.Config, error) {
	return configs.Load(cmd.Flags(), checkBuiltins)
}

// checkBuiltins names the built-in workers the configuration asks for that
// this binary does not have.
func checkBuiltins(c *configs.Config) []configs.Problem {
	var bad []configs.Problem
	for i, a := range c.Agents {
		if a.Worker.Kind == "builtin" && a.Worker.Builtin != "" && !builtin.Has(a.Worker.Builtin) {
			bad = append(bad, configs.Problem{Key: c.AgentKey(i) + ".worker.builtin",
				Msg: fmt.Sprintf("%q is not a built-in worker (have %s)", a.Worker.Builtin, strings.Join(builtin.Names(), ", "))})
		}
	}
	return bad
}

func newLogger(c *configs.Config) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.Log.Level))
	opts := &slog.HandlerOptions{Level: level}
	if c.Log.Format == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}
