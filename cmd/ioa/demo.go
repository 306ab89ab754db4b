package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/configs"
	"github.com/spf13/cobra"
)

// demoGoal exercises discovery, async tasks with a pause on them, a sync
// task fed with their results, and one nested sub-team (the packing budget).
const demoGoal = "Count the words in notes.txt. Convert 42 km to miles. Compute 19.5 * 4. " +
	"Prepare a packing budget: convert 20 kg to pounds and compute 3 * 45. " +
	"Then write a Markdown report of the results."

const demoNotes = `Agents built by different people register their capabilities and are found by meaning.
They team up in group chats for a goal, split the work into tasks and conclude.
Nested teams take on the tasks that need more skills than one agent has.
`

func newDemoCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Watch a team of agents solve a goal: everything in one process, no API key",
		Long: `demo starts NATS in-process on a fresh data directory, the registry, the
orchestrator and the demo team of configs/demo.yaml (agents with built-in
workers: calculator, unit converter, text analyst, file reader, report writer,
and a trip planner that spins off a nested team). It submits a goal, shows
the collaboration live and prints the conclusion.

The goal exercises discovery by meaning, async tasks with pause and trigger,
a sync task, and a nested sub-team.`,
		Example: `  ioa demo
  ioa demo --goal "Convert 10 miles to km. Then write a Markdown report of the results."
  ioa demo --json | jq .status
  ioa demo --web                     # then keep running, with the web console on 127.0.0.1:8080
  ioa demo --listen 127.0.0.1:4222   # also let the nats CLI watch: nats sub 'ioa.>'`,
		Args: cobra.NoArgs,
		RunE: runDemo,
	}
	configs.AddFlags(cmd.Flags())
	cmd.Flags().String("goal", demoGoal, "the goal to give the team")
	cmd.Flags().Bool("json", false, "print the GoalResult as JSON instead of the live view")
	cmd.Flags().Bool("web", false, "serve the web console (on $IOA_HTTP_LISTEN, default "+defaultHTTP+") and keep running after the goal, until interrupted")
	return cmd
}

func runDemo(cmd *cobra.Command, _ []string) error {
	ctx := cmd.Context()
	cfg, err := configs.LoadOver(cmd.Flags(), configs.DemoYAML)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "ioa-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if !cmd.Flags().Changed(configs.FlagDataDir) && os.Getenv("IOA_DATA_DIR") == "" {
		cfg.Bus.DataDir = filepath.Join(tmp, "data")
	}
	if !cmd.Flags().Changed(configs.FlagListen) && os.Getenv("IOA_LISTEN") == "" {
		cfg.Bus.Listen = bus.NoListen // a demo never collides with a running server
	}
	if os.Getenv("IOA_LOG_LEVEL") == "" {
		cfg.Log.Level = "warn"
	}
	sandbox := filepath.Join(tmp, "sandbox")
	if err := os.MkdirAll(sandbox, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(sandbox, "notes.txt"), []byte(demoNotes), 0o644); err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	asJSON, _ := cmd.Flags().GetBool("json")
	goal, _ := cmd.Flags().GetString("goal")
	web, _ := cmd.Flags().GetBool("web")
	if web && httpListen(cfg) == "" {
		return errors.New("--web needs an HTTP address: set $IOA_HTTP_LISTEN (it is empty or none)")
	}
	start := time.Now()
	st, err := startStack(ctx, cfg, stackOptions{services: true, sandbox: sandbox, http: web}, newLogger(cfg))
	if err != nil {
		return err
	}
	defer st.shutdown()
	names := []string{cfg.Orchestrator.Coordinator}
	for _, a := range cfg.Agents {
		names = append(names, a.Name)
	}
	if err := st.waitReady(ctx, nil); err != nil {
		return err
	}
	where := "in-process only"
	if url := st.bus.ClientURL(); url != "" {
		where = "listening on " + url
	}
	if !asJSON {
		fmt.Fprintf(out, "ioa demo: NATS embedded (%s), registry, orchestrator and %d agents ready in %s\n",
			where, len(names), time.Since(start).Round(time.Millisecond))
		if st.http != nil {
			printConsole(out, st.http)
		}
		fmt.Fprintf(out, "goal: %s\n\n", goal)
	}
	var sub protocol.SubmitReply
	if err := bus.Request(ctx, st.bus.Conn(), st.bus.Subjects().Goal(bus.GoalSubmit), protocol.GoalRequest{Goal: goal}, &sub); err != nil {
		return fmt.Errorf("submit the demo goal: %w", err)
	}
	opt := renderOptionsFor(out)
	if asJSON {
		opt.Quiet = true
	}
	var sink = out
	if asJSON {
		sink = nopWriter{}
	}
	res, err := followGoal(ctx, st.bus.Conn(), st.bus.Subjects(), sub.GoalID, sink, opt)
	if err != nil {
		return followError(sub.GoalID, err)
	}
	if asJSON {
		if err := writeJSON(out, res); err != nil {
			return err
		}
	}
	if web {
		if st.http == nil {
			fmt.Fprintf(out, "\nthe web console is off: %s is taken (set $IOA_HTTP_LISTEN to another address)\n", httpListen(cfg))
		} else {
			fmt.Fprintf(out, "\nstill running for the web console: %s  (Ctrl-C to stop)\n", st.http.consoleURL())
			<-ctx.Done()
		}
	}
	return goalExit(res)
}

type nopWriter struct{}

func (nopWriter) Write(p []byte) (int, error) { return len(p), nil }
