// Command loadgen drives an ioa runtime from outside, over TCP, speaking
// nothing but the wire protocol of docs/protocol.md: it runs teams of wire
// agents (a launcher and three workers each), submits goals that name them,
// and measures concluded goals per second with many goals in flight and the
// latency of one goal alone. It imports only the standard library and
// nats.go; see README.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	cfg := defaults()
	fs := flag.NewFlagSet("loadgen", flag.ExitOnError)
	fs.StringVar(&cfg.URL, "url", cfg.URL, "NATS URL of the runtime (ioa serve --listen)")
	fs.StringVar(&cfg.Prefix, "prefix", cfg.Prefix, "subject prefix (bus.prefix)")
	fs.StringVar(&cfg.CredsDir, "creds-dir", cfg.CredsDir, "folder of the agents' <name>.creds (from `ioa agent add NAME`); empty for an insecure server")
	submit := fs.String("submit-creds", "", "creds of the identity that submits goals, admin or client (default: <creds-dir>/admin.creds, as ioa serve writes it in <data dir>/creds)")
	fs.IntVar(&cfg.Teams, "teams", cfg.Teams, "teams of 4 wire agents: lg-lead-<i> and lg-work-<i>-1..3")
	fs.IntVar(&cfg.Goals, "goals", cfg.Goals, "goals of the load phase")
	fs.IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "goals in flight in the load phase")
	fs.IntVar(&cfg.Solo, "solo", cfg.Solo, "goals one at a time after the load phase (0: none)")
	fs.IntVar(&cfg.Runs, "runs", cfg.Runs, "times to run the reference, load and solo phases; the table shows each figure's median run and every run's figure")
	fs.DurationVar(&cfg.GoalTimeout, "goal-timeout", cfg.GoalTimeout, "longest wait for one goal (also its timeout on the server)")
	fs.BoolVar(&cfg.Invite, "invite", false, "register cards without auto_join, so that every team-up invites the workers (a round trip each goal)")
	fs.DurationVar(&cfg.ReadyWait, "ready-wait", cfg.ReadyWait, "how long to wait for <prefix>.health to say ready")
	_ = fs.Parse(os.Args[1:])
	cfg.SubmitCreds = *submit
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}
