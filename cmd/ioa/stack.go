package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/builtin"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/agentkit/rules"
	"github.com/ioa-nats/ioa/agentkit/worker"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/bus/auth"
	"github.com/ioa-nats/ioa/configs"
	"github.com/ioa-nats/ioa/interop"
	"github.com/ioa-nats/ioa/orchestrator"
	"github.com/ioa-nats/ioa/registry"
	"github.com/ioa-nats/ioa/telemetry"
)

// stack is everything one ioa process runs: NATS (embedded or not), the
// registry, the orchestrator with its coordinator, and the configured agents.
type stack struct {
	bus    *bus.Bus
	reg    *registry.Service
	orch   *orchestrator.Service
	cancel context.CancelFunc
	rt     *agentkit.Runtime
	agents chan error // the agent runtime's result
	log    *slog.Logger
	// closers end the agents' outside sessions (MCP servers, A2A clients)
	// once the agents have stopped.
	closers []func() error
	// http serves the web console, the A2A front door and /metrics, when
	// serve (or demo --web) runs it.
	http *httpFrontDoor
	// metrics are the process's Prometheus metrics (on /metrics of --http).
	metrics *telemetry.Metrics
	// endTraces flushes the spans, when OTEL_* turned tracing on.
	endTraces func(context.Context) error
}

// stackOptions choose the parts a command runs.
type stackOptions struct {
	services bool // registry and orchestrator (serve, demo); agent run needs neither
	sandbox  string
	http     bool // the console and the A2A front door, when cfg.A2A.Listen is set (serve, demo --web)
}

// startStack starts the parts in dependency order and stops what it started
// if a later part fails.
func startStack(ctx context.Context, cfg *configs.Config, opt stackOptions, log *slog.Logger) (_ *stack, err error) {
	bcfg := busConfig(cfg)
	bcfg.Logger = log
	// Only the runtime's services provision streams: agents elsewhere leave
	// them as the operator made them.
	bcfg.NoProvision = !opt.services
	if bcfg.CredsFile != "" {
		id, err := auth.ReadIdentity(bcfg.CredsFile)
		if err != nil {
			return nil, err
		}
		if id.Role != auth.Admin {
			bcfg.InboxPrefix = auth.InboxPrefix(id.Name)
			for _, a := range cfg.Agents {
				if id.Role != auth.Agent || a.Name != id.Name {
					return nil, fmt.Errorf("the credentials in %s are %s's (role %s): they can run only agent %q, not %q; use one credentials file per agent (ioa agent add) or the admin's", bcfg.CredsFile, id.Name, id.Role, id.Name, a.Name)
				}
			}
		}
	}
	s := &stack{log: log, metrics: telemetry.NewMetrics()}
	if s.endTraces, err = telemetry.Setup(ctx, "ioa"); err != nil {
		return nil, err
	}
	if telemetry.Enabled() {
		log.Info("tracing: exporting spans with OTLP/HTTP (OTEL_* environment)")
	}
	if s.bus, err = bus.Open(ctx, bcfg); err != nil {
		_ = s.endTraces(ctx)
		return nil, err
	}
	defer func() {
		if err != nil {
			s.shutdown()
		}
	}()
	s.metrics.WatchConn("ioa-bus", s.bus.Conn())
	if opt.services && cfg.Registry.Enabled {
		e := cfg.Registry.Embedder
		// The built-in embedder is nil here: the index then weighs the
		// words of a task by the cards it holds.
		emb, err := registry.NewEmbedder(e.Kind, e.BaseURL, e.Model, e.APIKey)
		if err != nil {
			return nil, err
		}
		s.reg, err = registry.New(s.bus, registry.Config{
			HeartbeatTTL: cfg.Registry.HeartbeatTTL, MaxDescriptionBytes: cfg.Registry.MaxDescriptionBytes,
			MaxCardBytes: cfg.Registry.MaxCardBytes, MaxAgentsPerConn: cfg.Registry.MaxAgentsPerConn,
			MaxResults: cfg.Registry.MaxResults, Embedder: emb, Logger: log.With("service", "registry"),
			Metrics: s.metrics,
			// A remote embedder's vectors outlive a restart.
			EmbedderID: e.Kind + " " + e.BaseURL + " " + e.Model,
			VectorDir:  filepath.Join(cfg.Bus.DataDir, "registry-vectors"),
		})
		if err != nil {
			return nil, err
		}
		if err := s.reg.Start(ctx); err != nil {
			return nil, err
		}
	}
	agents, closers, err := buildAgents(ctx, cfg, opt.sandbox, log, s.metrics)
	s.closers = closers
	if err != nil {
		return nil, err
	}
	if opt.services && cfg.Orchestrator.Enabled {
		l := cfg.Limits
		// The goal service opens once the coordinator and every configured
		// agent is registered and online: a goal submitted the moment it
		// answers finds its team.
		expect := []string{cfg.Orchestrator.Coordinator}
		for _, a := range agents {
			expect = append(expect, a.Card.Name)
		}
		s.orch, err = orchestrator.New(s.bus, orchestrator.Config{
			Expect:      expect,
			Coordinator: cfg.Orchestrator.Coordinator, MaxTurns: l.MaxTurns, MaxDepth: depthConfig(l.MaxDepth),
			MaxTeamSize: l.MaxTeamSize, GoalTimeout: l.GoalTimeout, SpeakerTimeout: l.SpeakerTimeout,
			TaskTimeout: l.TaskTimeout, MaxChatMessages: l.MaxChatMessages, AgentRate: l.AgentRate,
			AgentBurst: l.AgentBurst, MaxTaskProgress: l.MaxTaskProgress, Logger: log.With("service", "orchestrator"),
			LeaseTTL: cfg.Orchestrator.LeaseTTL, Partitions: cfg.Orchestrator.Partitions,
			Metrics: s.metrics,
		})
		if err != nil {
			return nil, err
		}
		if err := s.orch.Start(ctx); err != nil {
			return nil, err
		}
		policy, err := policyFor(cfg, cfg.CoordinatorPolicy(), s.metrics)
		if err != nil {
			return nil, err
		}
		agents = append([]agentkit.Agent{orchestrator.Coordinator(cfg.Orchestrator.Coordinator, policy)}, agents...)
	}
	if len(agents) > 0 {
		if err := s.runAgents(cfg, agents); err != nil {
			return nil, err
		}
	}
	if opt.http && httpListen(cfg) != "" {
		if s.http, err = startHTTP(cfg, s.bus, log, s.metrics); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// depthConfig maps the configured max_depth (0 means no nesting) to the
// orchestrator's convention (0 means the default, negative none).
func depthConfig(d int) int {
	if d == 0 {
		return -1
	}
	return d
}

func (s *stack) runAgents(cfg *configs.Config, agents []agentkit.Agent) error {
	nc, err := s.bus.NewConn("ioa-agents")
	if err != nil {
		return err
	}
	s.metrics.WatchConn("ioa-agents", nc)
	rt, err := agentkit.NewRuntime(nc, s.bus.Subjects(), agents,
		agentkit.WithLogger(s.log.With("service", "agents")),
		agentkit.WithTaskTimeout(cfg.Limits.TaskTimeout),
		agentkit.WithProgressAfter(cfg.Limits.ProgressAfter),
		agentkit.WithCodec(s.bus.Codec()))
	if err != nil {
		return err
	}
	s.rt = rt
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.agents = make(chan error, 1)
	go func() { s.agents <- rt.Run(ctx) }()
	return nil
}

// readyTimeout bounds how long serve and demo wait for their agents to
// register before saying which ones are missing.
const readyTimeout = 30 * time.Second

// waitReady returns once the goal service is open (the coordinator and the
// configured agents registered and online) or, without an orchestrator,
// once the agents are registered. If the agents stop first it fails. After
// readyTimeout it fails too, saying what it still waits for, unless slow is
// given: then slow is told and the wait goes on.
func (s *stack) waitReady(ctx context.Context, slow func(error)) error {
	var ready <-chan struct{}
	switch {
	case s.orch != nil:
		ready = s.orch.Ready()
	case s.rt != nil:
		ready = s.rt.Ready()
	default:
		return nil
	}
	t := time.NewTicker(readyTimeout)
	defer t.Stop()
	for {
		select {
		case <-ready:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case err := <-s.agents:
			s.agents <- err // shutdown reads it again
			return fmt.Errorf("the agents stopped before the goal service opened: %v", err)
		case <-t.C:
		}
		err := fmt.Errorf("not ready after %s: the agents have not all registered (see the log)", readyTimeout)
		if s.orch != nil {
			err = fmt.Errorf("not ready after %s: waiting for %s to register and come online (see the log)",
				readyTimeout, strings.Join(s.orch.Health().Waiting, ", "))
		}
		if slow == nil {
			return err
		}
		slow(err)
	}
}

// shutdown stops the parts in reverse order: agents first, so they
// deregister while the registry still runs.
func (s *stack) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if s.cancel != nil {
		s.cancel()
		select {
		case err := <-s.agents:
			if err != nil && !errors.Is(err, context.Canceled) {
				s.log.Warn("agents stopped", "err", err)
			}
		case <-ctx.Done():
		}
	}
	if s.http != nil {
		s.http.shutdown(ctx)
	}
	for _, c := range s.closers {
		if err := c(); err != nil {
			s.log.Debug("closing an agent's session", "err", err)
		}
	}
	if s.orch != nil {
		_ = s.orch.Shutdown(ctx)
	}
	if s.reg != nil {
		_ = s.reg.Shutdown(ctx)
	}
	if s.bus != nil {
		_ = s.bus.Shutdown(ctx)
	}
	if s.endTraces != nil {
		if err := s.endTraces(ctx); err != nil {
			s.log.Warn("flushing spans", "err", err)
		}
	}
}

// buildAgents turns the configured agents into agentkit agents. Agents
// whose workers speak MCP or A2A reach their servers here, to complete
// their cards; closers end those sessions (also when it fails).
func buildAgents(ctx context.Context, cfg *configs.Config, sandbox string, log *slog.Logger, m *telemetry.Metrics) (out []agentkit.Agent, closers []func() error, err error) {
	for _, a := range cfg.Agents {
		if a.Type == protocol.TypeHuman {
			// A person: hosted (registered, online, in its chats) but
			// never answered for; see agentkit.Agent.
			out = append(out, agentkit.Agent{Card: protocol.AgentCard{
				Name: a.Name, Description: a.Description, Capabilities: a.Capabilities, Type: a.Type,
				Tags: a.Tags, Metadata: a.Metadata,
			}})
			continue
		}
		p, err := policyFor(cfg, a.Policy, m)
		if err != nil {
			return nil, closers, fmt.Errorf("agent %s: %w", a.Name, err)
		}
		typ := a.Type
		if typ == "" {
			typ = protocol.TypeTool
		}
		card := protocol.AgentCard{
			Name: a.Name, Description: a.Description, Capabilities: a.Capabilities, Type: typ,
			Tags: a.Tags, NestedTeams: a.NestedTeams, MaxConcurrency: a.MaxConcurrency, Metadata: a.Metadata,
		}
		var w agentkit.Worker
		if interop.Handles(a.Worker.Kind) {
			o := interop.Options{Logger: log}
			if a.Policy == "llm" {
				if o.Model, err = modelFor(cfg.LLM, log); err != nil {
					return nil, closers, fmt.Errorf("agent %s: %w", a.Name, err)
				}
			}
			built, err := interop.Build(ctx, a, card, o)
			if err != nil {
				return nil, closers, fmt.Errorf("agent %s: %w", a.Name, err)
			}
			closers = append(closers, built.Close)
			w, card = built.Worker, built.Card
		} else if w, err = workerFor(cfg, a, sandbox); err != nil {
			return nil, closers, fmt.Errorf("agent %s: %w", a.Name, err)
		}
		out = append(out, agentkit.Agent{Card: card, Worker: w, Policy: p})
	}
	return out, closers, nil
}

func workerFor(cfg *configs.Config, a configs.Agent, sandbox string) (agentkit.Worker, error) {
	w := a.Worker
	switch w.Kind {
	case "builtin":
		dir := w.Dir
		if dir == "" {
			dir = sandbox
		}
		bw, err := builtin.New(w.Builtin, builtin.Options{Sandbox: dir})
		if err != nil || !a.NestedTeams {
			return bw, err
		}
		return borrowed{Worker: bw, agent: a.Name, builtin: w.Builtin}, nil
	case "exec":
		return &worker.Exec{Command: w.Command, Dir: w.Dir, Timeout: w.Timeout, MaxOutput: w.MaxOutput}, nil
	}
	return extraWorker(cfg, a)
}

// borrowed is the built-in worker of an agent that teams up for tasks of
// several steps and does one-step tasks itself with a built-in (the demo's
// trip-planner, with the calculator): its refusals say so, or they would
// read as the calculator's.
type borrowed struct {
	agentkit.Worker
	agent, builtin string
}

func (b borrowed) Run(ctx context.Context, t agentkit.Task) (agentkit.Result, error) {
	res, err := b.Worker.Run(ctx, t)
	if err != nil {
		err = fmt.Errorf("%s teams up for tasks of several steps and does one-step tasks with the built-in %s worker: %w", b.agent, b.builtin, err)
	}
	return res, err
}

func policyFor(cfg *configs.Config, name string, m *telemetry.Metrics) (agentkit.Policy, error) {
	switch name {
	case "", "rules":
		return rules.New(rules.Config{MaxTeam: cfg.Limits.MaxTeamSize, MinMatch: minMatch(cfg)}), nil
	}
	return extraPolicy(cfg, name, m)
}

// minMatch is registry.min_match for the policies, where 0 means the
// default and a negative value no check.
func minMatch(cfg *configs.Config) float64 {
	if cfg.Registry.MinMatch == 0 {
		return -1
	}
	return cfg.Registry.MinMatch
}
