package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ioa-nats/ioa/agentkit/builtin"
	"github.com/ioa-nats/ioa/agentkit/protocol"
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
agent card.

serve says it is ready once a goal can run: the coordinator and every
configured agent registered and online, the registry's index loaded. Until
then the goal subjects have no responders. It prints a "ready:" line, logs
"ready: goal service open", and the orchestrator answers <prefix>.health
with {"status":"ready","ready":true} (before that {"status":"starting",
"waiting":[...]}). A supervisor asks with "ioa serve --check" (exit 0 ready,
1 not ready or not reachable), optionally waiting: --check --wait 30s.

serve also serves HTTP on --http (default 127.0.0.1:8080; "" or none: off):
the web console at / (agents, goals, each goal's chat live, people's turns
and tasks) and the A2A front door. It prints the console's URL; on loopback
that URL carries the login token (data dir creds/console.token), and
without it the console is read-only; on any other address every page needs
the token. If the default address is taken, serve goes on without HTTP.`,
		Example: `  ioa serve
  ioa serve --listen 0.0.0.0:4222 --data-dir /var/lib/ioa
  ioa serve --nats-url nats://nats1:4222,nats://nats2:4222
  ioa serve --http 0.0.0.0:8080         # the web console and A2A for other machines (login with the console token)
  ioa serve --http none                 # no HTTP at all
  IOA_CONFIG=configs/demo.yaml ioa serve
  ioa serve --check --wait 30s && ioa goal "Compute 6 * 7"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(cmd)
			if err != nil {
				return err
			}
			if check, _ := cmd.Flags().GetBool("check"); check {
				wait, _ := cmd.Flags().GetDuration("wait")
				return checkHealth(cmd, wait)
			}
			return serve(cmd.Context(), cmd, cfg)
		},
	}
	configs.AddFlags(cmd.Flags())
	cmd.Flags().Bool("insecure", false, "accept connections without credentials (development only) [$IOA_INSECURE]")
	cmd.Flags().String("http", defaultHTTP, "serve HTTP on this host:port: the web console at / and the A2A front door (agent cards, goals as A2A tasks); \"\" or none: no HTTP [$IOA_HTTP_LISTEN]")
	cmd.Flags().String("sandbox", "", "folder the built-in file and text workers read, for agents without worker.dir (default <data-dir>/sandbox, created empty)")
	cmd.Flags().Bool("check", false, "do not serve: ask the running server (--nats-url, or --listen) whether it is ready; exit 0 ready, 1 not")
	cmd.Flags().Duration("wait", 0, "with --check: keep asking until ready or this much time has passed")
	return cmd
}

// checkHealth asks <prefix>.health of a running server until it says ready
// or wait has passed; not ready (or no answer) is exit status 1.
func checkHealth(cmd *cobra.Command, wait time.Duration) error {
	if wait < 0 {
		return fmt.Errorf("--wait %s is negative", wait)
	}
	deadline := time.Now().Add(wait)
	out := cmd.OutOrStdout()
	var last error
	for {
		h, err := askHealth(cmd)
		switch {
		case err == nil && h.Ready:
			fmt.Fprintf(out, "ready since %s\n", h.Since.Format(time.RFC3339))
			return nil
		case err == nil:
			last = fmt.Errorf("not ready (%s): waiting for %s", h.Status, strings.Join(h.Waiting, ", "))
		default:
			last = err
		}
		if !time.Now().Before(deadline) {
			return exitCode{code: 1, msg: last.Error()}
		}
		select {
		case <-cmd.Context().Done():
			return exitCode{code: 1, msg: last.Error()}
		case <-time.After(min(250*time.Millisecond, time.Until(deadline))):
		}
	}
}

func askHealth(cmd *cobra.Command) (protocol.Health, error) {
	var h protocol.Health
	c, err := dialClient(cmd)
	if err != nil {
		return h, err
	}
	defer c.Close()
	subject := c.subj.Health()
	ctx, cancel := context.WithTimeout(cmd.Context(), clientRequestTimeout)
	defer cancel()
	if err := bus.Request(ctx, c.nc, subject, nil, &h); err != nil {
		if errors.Is(err, bus.ErrNoResponders) {
			return h, fmt.Errorf("NATS at %s answers, but no orchestrator answers on %s yet (starting, or orchestrator.enabled is false)", c.url, subject)
		}
		return h, fmt.Errorf("%s at %s: %v", subject, c.url, err)
	}
	if h.Status == "" {
		return h, fmt.Errorf("%s answered without a status", subject)
	}
	return h, nil
}

func busConfig(c *configs.Config) bus.Config {
	creds := c.Bus.CredsFile
	if creds == "" && c.Bus.NATSURL != "" {
		creds = credsFor(c) // the admin's, when this data dir has them
	}
	return bus.Config{
		NATSURL:   c.Bus.NATSURL,
		CredsFile: creds,
		// An embedded server with a listener requires credentials unless
		// told otherwise; one with none is reached only in-process.
		Secure:          c.Bus.NATSURL == "" && c.Bus.Listen != bus.NoListen && !c.Bus.Insecure,
		TLS:             bus.TLS{CertFile: c.Bus.TLS.CertFile, KeyFile: c.Bus.TLS.KeyFile, CAFile: c.Bus.TLS.CAFile},
		DataDir:         c.Bus.DataDir,
		Listen:          c.Bus.Listen,
		MonitorListen:   c.Bus.MonitorListen,
		WebsocketListen: c.Bus.WebsocketListen,
		Prefix:          c.Bus.Prefix,
		Replicas:        c.Bus.Replicas,
		Retention:       bus.Retention{MaxAge: c.Bus.Retention.MaxAge, MaxBytes: c.Bus.Retention.MaxBytes},
		MaxMessageBytes: c.Limits.MaxMessageBytes,
	}
}

func serve(ctx context.Context, cmd *cobra.Command, cfg *configs.Config) error {
	log := newLogger(cfg)
	start := time.Now()
	sandbox, err := serveSandbox(cmd, cfg)
	if err != nil {
		return err
	}
	st, err := startStack(ctx, cfg, stackOptions{services: true, http: true, sandbox: sandbox}, log)
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
		if b.Config().Secure {
			creds := b.Config().CredsFile
			fmt.Fprintf(out, "secure: credentials required; admin credentials in %s\n", creds)
			fmt.Fprintf(out, "  nats CLI:       nats context save ioa --server %s --creds %s --select\n", b.ClientURL(), absPath(creds))
			fmt.Fprintf(out, "  more identities: ioa agent add NAME --data-dir %s --out NAME.creds [--role agent|client|observer]\n", cfg.Bus.DataDir)
		} else if b.ClientURL() != "" {
			log.Warn("INSECURE: the NATS listener accepts anyone without credentials; anyone who reaches " + b.ClientURL() + " can read every chat, speak for any agent and delete the streams")
			fmt.Fprintf(out, "WARNING: insecure mode: no credentials required on %s (development only)\n", b.ClientURL())
		}
	} else {
		fmt.Fprintf(out, "using NATS at %s\n", b.ClientURL())
	}
	fmt.Fprintf(out, "registry: %s   orchestrator: %s (coordinator %q, %s policy)   agents: %d configured\n",
		onOff(st.reg != nil), onOff(st.orch != nil), cfg.Orchestrator.Coordinator, cfg.CoordinatorPolicy(), len(cfg.Agents))
	if sandbox != "" {
		fmt.Fprintf(out, "sandbox:        the built-in file and text agents read files from %s\n", absPath(sandbox))
	}
	p := b.Subjects().Prefix()
	if f := st.http; f != nil {
		printConsole(out, f)
	} else if addr := httpListen(cfg); addr != "" {
		fmt.Fprintf(out, "web console:    off: %s is taken (another ioa serve?); choose an address with --http HOST:PORT\n", addr)
	}
	if err := st.waitReady(ctx, func(err error) { fmt.Fprintln(out, err) }); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	if st.orch != nil {
		fmt.Fprintf(out, "ready in %s: goal service on %s.goal.*, coordinator and %d agents online (%s.health says ready)\n",
			time.Since(start).Round(time.Millisecond), p, len(cfg.Agents), p)
	} else {
		fmt.Fprintf(out, "ready in %s: %d agents registered\n", time.Since(start).Round(time.Millisecond), len(cfg.Agents))
	}
	fmt.Fprintf(out, "submit a goal:  nats req %s.goal.submit 'your goal'   (or: ioa goal 'your goal')\n", p)
	fmt.Fprintf(out, "follow chats:   nats sub '%s.chat.>'\n", p)
	if f := st.http; f != nil {
		fmt.Fprintf(out, "A2A:            %s%s (goals submitted as %q)\n", f.base, "/.well-known/agent-card.json", cfg.A2A.As)
		fmt.Fprintf(out, "metrics:        curl %s/metrics   (Prometheus)\n", f.base)
		if f.tokenFile != "" {
			fmt.Fprintf(out, "  bearer token:   curl -H \"Authorization: Bearer $(cat %s)\" %s/a2a ...\n", absPath(f.tokenFile), f.base)
		} else {
			fmt.Fprintf(out, "WARNING: insecure mode: the A2A endpoints take goals from anyone who reaches %s\n", f.base)
		}
	}
	<-ctx.Done()
	fmt.Fprintln(out, "shutting down")
	return nil
}

// printConsole says where the web console is and how to log in.
func printConsole(out io.Writer, f *httpFrontDoor) {
	fmt.Fprintf(out, "web console:    %s\n", f.consoleURL())
	switch {
	case f.consoleToken == "":
		fmt.Fprintf(out, "WARNING: insecure mode: the console lets anyone who reaches %s submit, cancel and answer\n", f.base)
	case f.loopback:
		fmt.Fprintf(out, "  that URL logs you in; without it the console is read-only (token in %s)\n", absPath(f.consoleTokenFile))
	default:
		fmt.Fprintf(out, "  login token:    %s (in %s); without it every page answers 401\n", f.consoleToken, absPath(f.consoleTokenFile))
	}
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// serveSandbox is the folder the built-in file and text workers of agents
// without a worker.dir read from: --sandbox, else <data_dir>/sandbox,
// created when missing. Never the working directory: a goal's submitter
// would read whatever files are there. "" when no agent needs one.
func serveSandbox(cmd *cobra.Command, cfg *configs.Config) (string, error) {
	need := slices.ContainsFunc(cfg.Agents, func(a configs.Agent) bool {
		return a.Worker.Kind == "builtin" && a.Worker.Dir == "" && builtin.ReadsFiles(a.Worker.Builtin)
	})
	if !need {
		return "", nil
	}
	dir, _ := cmd.Flags().GetString("sandbox")
	if dir == "" {
		dir = filepath.Join(cfg.Bus.DataDir, "sandbox")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", fmt.Errorf("sandbox for the built-in file agents: %w", err)
		}
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("--sandbox %s: not a folder", dir)
	}
	return dir, nil
}
