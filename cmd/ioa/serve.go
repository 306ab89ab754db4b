package main

import (
	"context"
	"fmt"

	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/configs"
	"github.com/spf13/cobra"
)

func newServeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run NATS (embedded), the registry, the orchestrator and the configured agents",
		Long: `serve runs until interrupted. With no --nats-url it starts NATS in-process with
JetStream on --data-dir and listens on --listen, so the nats CLI and other
processes can join. With --nats-url it uses that server or cluster instead.
Stopping and starting again on the same data dir keeps every goal, chat and
agent card.`,
		Example: `  ioa serve
  ioa serve --listen 0.0.0.0:4222 --data-dir /var/lib/ioa
  ioa serve --nats-url nats://nats1:4222,nats://nats2:4222
  IOA_CONFIG=configs/demo.yaml ioa serve`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(cmd)
			if err != nil {
				return err
			}
			return serve(cmd.Context(), cmd, cfg)
		},
	}
	configs.AddFlags(cmd.Flags())
	return cmd
}

func busConfig(c *configs.Config) bus.Config {
	return bus.Config{
		NATSURL:         c.Bus.NATSURL,
		CredsFile:       c.Bus.CredsFile,
		DataDir:         c.Bus.DataDir,
		Listen:          c.Bus.Listen,
		MonitorListen:   c.Bus.MonitorListen,
		WebsocketListen: c.Bus.WebsocketListen,
		Prefix:          c.Bus.Prefix,
		Replicas:        c.Bus.Replicas,
		MaxMessageBytes: c.Limits.MaxMessageBytes,
	}
}

func serve(ctx context.Context, cmd *cobra.Command, cfg *configs.Config) error {
	log := newLogger(cfg)
	st, err := startStack(ctx, cfg, stackOptions{services: true}, log)
	if err != nil {
		return err
	}
	defer st.shutdown()
	b := st.bus
	out := cmd.OutOrStdout()
	if b.Embedded() {
		if url := b.ClientURL(); url != "" {
			fmt.Fprintf(out, "NATS (embedded, JetStream in %s) listening on %s\n", cfg.Bus.DataDir, url)
		} else {
			fmt.Fprintf(out, "NATS (embedded, JetStream in %s), in-process only\n", cfg.Bus.DataDir)
		}
	} else {
		fmt.Fprintf(out, "using NATS at %s\n", b.ClientURL())
	}
	fmt.Fprintf(out, "registry: %s   orchestrator: %s (coordinator %q, %s policy)   agents: %d configured\n",
		onOff(st.reg != nil), onOff(st.orch != nil), cfg.Orchestrator.Coordinator, cfg.CoordinatorPolicy(), len(cfg.Agents))
	p := b.Subjects().Prefix()
	fmt.Fprintf(out, "submit a goal:  nats req %s.goal.submit 'your goal'   (or: ioa goal 'your goal')\n", p)
	fmt.Fprintf(out, "follow chats:   nats sub '%s.chat.>'\n", p)
	<-ctx.Done()
	fmt.Fprintln(out, "shutting down")
	return nil
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}
