package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/internal/backoff"
	"github.com/ioa-nats/ioa/telemetry"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
)

// Config holds the orchestrator's budgets. Zero values mean the defaults
// noted on each field.
type Config struct {
	Coordinator     string        // default launcher; "coordinator"
	MaxTurns        int           // per chat; 24
	MaxDepth        int           // nested team-up below a root goal; 2 (negative: none)
	MaxTeamSize     int           // members, launcher included; 8
	GoalTimeout     time.Duration // 5m
	SpeakerTimeout  time.Duration // 30s
	TaskTimeout     time.Duration // 2m
	LaunchTimeout   time.Duration // how long a launcher may take to form a team; 30s
	MaxChatMessages int           // per chat log; 1000
	MaxTaskProgress int           // task_progress reports per task and attempt; 100
	AgentRate       float64       // outbox messages per second per agent and chat; 50
	AgentBurst      int           // 100
	SweepInterval   time.Duration // how often deadlines are checked; 100ms
	// Expect names the agents a goal may need at once (the coordinator and
	// the configured agents of `ioa serve`). With Expect set, the goal
	// endpoints open only when every one of them is registered and online
	// (Ready is closed then, and <p>.health says ready); until then
	// goal.submit has no responders. Empty: the goal endpoints open in Start.
	Expect []string
	// ExpectTimeout bounds how long a goal waits for a launcher or member
	// that is expected (the coordinator, a name in Expect, or the launcher
	// that is forming the team) but not yet registered and online, instead
	// of failing at once; 10s.
	ExpectTimeout time.Duration
	// Partitions is how many partitions the chats and goals are spread
	// over; every instance sharing a bus must use the same number; 32.
	Partitions int
	// LeaseTTL is how long a partition lease lasts unless renewed (every
	// LeaseTTL/3): when an instance dies, the others take its partitions
	// within about LeaseTTL; 5s.
	LeaseTTL time.Duration
	// InstanceID names this instance in the leases; a random id if empty.
	InstanceID string
	Logger     *slog.Logger
	// Metrics, if not nil, count goals, turns, tasks and refusals
	// (telemetry.Metrics); nil counts nothing.
	Metrics *telemetry.Metrics
}

func (c Config) withDefaults() Config {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defD := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	if c.Coordinator == "" {
		c.Coordinator = "coordinator"
	}
	def(&c.MaxTurns, 24)
	switch {
	case c.MaxDepth == 0:
		c.MaxDepth = 2
	case c.MaxDepth < 0:
		c.MaxDepth = 0
	}
	def(&c.MaxTeamSize, 8)
	defD(&c.GoalTimeout, 5*time.Minute)
	defD(&c.SpeakerTimeout, 30*time.Second)
	defD(&c.TaskTimeout, 2*time.Minute)
	defD(&c.LaunchTimeout, 30*time.Second)
	def(&c.MaxChatMessages, 1000)
	def(&c.MaxTaskProgress, 100)
	if c.AgentRate <= 0 {
		c.AgentRate = 50
	}
	def(&c.AgentBurst, 100)
	defD(&c.SweepInterval, 100*time.Millisecond)
	defD(&c.ExpectTimeout, 10*time.Second)
	def(&c.Partitions, 32)
	defD(&c.LeaseTTL, 5*time.Second)
	if c.InstanceID == "" {
		c.InstanceID = newID("o")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Service is a running orchestrator instance.
type Service struct {
	cfg   Config
	b     *bus.Bus
	nc    *nats.Conn
	js    jetstream.JetStream
	subj  bus.Subjects
	codec bus.Codec
	log   *slog.Logger

	submits *inflight // goal submissions in flight
	reads   *inflight // history reads in flight
	waits   *inflight // requests waiting for their chat's partition to get an owner

	id    string  // instance id (Config.InstanceID)
	lease *leases // the partitions this instance owns (owner.go)

	goals      jetstream.KeyValue
	chatKV     jetstream.KeyValue
	outcomes   jetstream.KeyValue // each agent's finished tasks, for the registry
	outcomeQ   *outcomeWriter     // what is yet to be written to outcomes
	known      knownGoals         // the goal records this instance last wrote
	starting   sync.Map           // comm id -> true while its start message is being logged
	chats      jetstream.Stream
	tasks      jetstream.Stream
	goalStream jetstream.Stream

	eventTries   sync.Map    // event message id -> attempts so far, while being sent again
	goalSpans    sync.Map    // goal id -> its open root span (trace.go), when tracing
	teamupFailed sync.Map    // goal id -> why its last team-up was refused, for the reason of a launch that fails after it; kept only while the launch is watched here, dropped when it returns or the goal ends
	closing      atomic.Bool // Shutdown has begun: no more event retries

	markKey      []byte              // signs the referee's log entries (mark.go)
	foreignCount atomic.Uint64       // foreign log entries found
	reported     map[uint64]struct{} // stream seqs of foreign entries reported, under mu

	svc     micro.Service
	runCtx  context.Context
	shards  []chan func()
	limits  *rateLimits
	answers registryAnswers // the registry's last word on each agent: team-up and liveness

	ready      chan struct{} // closed when the goal endpoints are open
	readyMu    sync.Mutex
	readySince time.Time
	waiting    []string // expected agents not yet online
	expected   map[string]bool

	mu         sync.Mutex
	active     map[string]*chatRecord // comm_id -> record of the open chats this instance referees
	ended      map[string]*chatRecord // recently ended chats, for late messages
	pending    map[string]*pendingEnd // goal ends not recorded yet (finishOrRetry)
	launching  map[string]time.Time   // goals without a chat yet -> when to look again (stall.go)
	endedOrder []string

	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// RefereeStats is the data of the outbox endpoint's stats.
type RefereeStats struct {
	// ForeignLogEntries counts the chat log entries this instance found
	// that the referee did not write (mark.go), and skipped.
	ForeignLogEntries uint64 `json:"foreign_log_entries"`
}

// New prepares an orchestrator on b. Start serves it.
func New(b *bus.Bus, cfg Config) (*Service, error) {
	cfg = cfg.withDefaults()
	if err := protocol.CheckName("coordinator", cfg.Coordinator); err != nil {
		return nil, fmt.Errorf("orchestrator: %w", err)
	}
	expected := map[string]bool{cfg.Coordinator: true}
	for _, n := range cfg.Expect {
		if err := protocol.CheckName("expected agent", n); err != nil {
			return nil, fmt.Errorf("orchestrator: %w", err)
		}
		expected[n] = true
	}
	cfg.Expect = dedupe(cfg.Expect)
	if err := protocol.CheckID("instance id", cfg.InstanceID); err != nil {
		return nil, fmt.Errorf("orchestrator: %w", err)
	}
	return &Service{
		id: cfg.InstanceID, waits: &inflight{total: maxWaits, perCaller: maxWaits},
		cfg: cfg, b: b, subj: b.Subjects(), codec: b.Codec(), log: cfg.Logger,
		active: map[string]*chatRecord{}, ended: map[string]*chatRecord{}, reported: map[uint64]struct{}{},
		pending: map[string]*pendingEnd{}, launching: map[string]time.Time{},
		limits:  newRateLimits(cfg.AgentRate, cfg.AgentBurst),
		submits: &inflight{total: maxSubmits, perCaller: maxSubmitsPerCaller},
		reads:   &inflight{total: maxHistory, perCaller: maxHistoryPerAgent},
		ready:   make(chan struct{}), expected: expected, waiting: slices.Clone(cfg.Expect),
		readySince: time.Now().UTC(),
	}, nil
}

// Ready is closed once the goal endpoints are open: at the end of Start
// without Config.Expect, or once every expected agent is registered and
// online. A program embedding the runtime waits on it before submitting.
func (s *Service) Ready() <-chan struct{} { return s.ready }

// Health is what <p>.health answers.
func (s *Service) Health() protocol.Health {
	s.readyMu.Lock()
	defer s.readyMu.Unlock()
	h := protocol.Health{Status: protocol.HealthStarting, Since: s.readySince, Waiting: slices.Clone(s.waiting)}
	select {
	case <-s.ready:
		h.Status, h.Ready = protocol.HealthReady, true
	default:
	}
	return h
}

// shardQueue is how many jobs wait on one shard before an agent's message
// for it is refused with 503 instead of holding up the endpoint.
const shardQueue = 256

// numShards is how many chats the referee works on at once; messages of one
// chat always go to the same shard, so each chat is handled in order.
const numShards = 16

// Start opens the service's resources, resumes the chats and goals that
// were running, and begins serving. It returns once requests are served.
func (s *Service) Start(ctx context.Context) error {
	nc, err := s.b.NewConn("ioa-orchestrator")
	if err != nil {
		return fmt.Errorf("orchestrator: %w", err)
	}
	s.nc = nc
	s.cfg.Metrics.WatchConn("ioa-orchestrator", nc)
	// Goal events are stored with acknowledged asynchronous publishes: the
	// referee does not wait for each; a failed store is sent again
	// (eventRetry), and logged when it is given up.
	s.js, err = jetstream.New(nc, jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, m *nats.Msg, err error) {
		s.eventFailed(m, err)
	}), jetstream.WithPublishAsyncTimeout(5*time.Second))
	if err != nil {
		return fmt.Errorf("orchestrator: %w", err)
	}
	if s.goals, err = s.js.KeyValue(ctx, bus.BucketGoals); err != nil {
		return fmt.Errorf("orchestrator: bucket %s: %w", bus.BucketGoals, err)
	}
	if s.chatKV, err = s.js.KeyValue(ctx, bus.BucketChats); err != nil {
		return fmt.Errorf("orchestrator: bucket %s: %w", bus.BucketChats, err)
	}
	if s.outcomes, err = s.js.KeyValue(ctx, bus.BucketOutcomes); err != nil {
		return fmt.Errorf("orchestrator: bucket %s: %w", bus.BucketOutcomes, err)
	}
	for _, st := range []struct {
		name string
		to   *jetstream.Stream
	}{{bus.StreamChats, &s.chats}, {bus.StreamTasks, &s.tasks}, {bus.StreamGoals, &s.goalStream}} {
		if *st.to, err = s.js.Stream(ctx, st.name); err != nil {
			return fmt.Errorf("orchestrator: stream %s: %w", st.name, err)
		}
	}
	if err := s.loadMarkKey(ctx); err != nil {
		return err
	}
	leaseKV, err := s.js.KeyValue(ctx, bus.BucketLeases)
	if err != nil {
		return fmt.Errorf("orchestrator: bucket %s: %w", bus.BucketLeases, err)
	}
	if err := agreePartitions(ctx, leaseKV, s.cfg.Partitions); err != nil {
		return err
	}
	s.lease = newLeases(s, leaseKV)
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	s.shards = make([]chan func(), numShards)
	for i := range s.shards {
		ch := make(chan func(), shardQueue)
		s.shards[i] = ch
		s.wg.Go(func() {
			for {
				select {
				case <-runCtx.Done():
					return
				case job := <-ch:
					job()
				}
			}
		})
	}
	s.outcomeQ = newOutcomeWriter()
	s.wg.Go(func() { s.writeOutcomes(runCtx) })
	s.wg.Go(func() { s.lease.watch(runCtx) })
	select {
	case <-s.lease.synced:
	case <-time.After(5 * time.Second):
		s.log.Warn("partition leases not read yet; going on")
	case <-ctx.Done():
		cancel()
		s.wg.Wait()
		return ctx.Err()
	}
	if err := s.watchIncarnations(runCtx); err != nil {
		cancel()
		s.wg.Wait()
		return fmt.Errorf("orchestrator: follow the registry's cards: %w", err)
	}
	if err := s.serve(runCtx); err != nil {
		cancel()
		s.wg.Wait()
		return err
	}
	// Make sure the server knows the subscriptions before Start returns, so
	// a request sent right after it finds a responder.
	if err := s.nc.FlushTimeout(5 * time.Second); err != nil {
		cancel()
		s.wg.Wait()
		return fmt.Errorf("orchestrator: %w", err)
	}
	// The partitions free now are taken, and their chats and goals resumed,
	// before Start returns; more come as the leases of others run out.
	gained, _ := s.lease.tick(runCtx)
	s.log.Info("orchestrator instance started", "instance", s.id, "partitions", len(gained), "of", s.cfg.Partitions, "lease_ttl", s.cfg.LeaseTTL)
	s.resume(runCtx, gained)
	s.wg.Go(func() { s.runLeases(runCtx) })
	s.wg.Go(func() { s.sweep(runCtx) })
	if len(s.cfg.Expect) == 0 {
		return s.openGoals()
	}
	s.wg.Go(func() { s.awaitExpected(runCtx) })
	return nil
}

func (s *Service) serve(ctx context.Context) error {
	svc, err := micro.AddService(s.nc, micro.Config{
		Name:        "ioa-orchestrator",
		Version:     "1.0.0",
		Description: "IoA goals, team-up and the chat referee",
		QueueGroup:  "ioa-orchestrator",
		// The referee's counters, in the stats of its outbox endpoint
		// (`nats micro stats ioa-orchestrator`).
		StatsHandler: func(e *micro.Endpoint) any {
			if e.Name != "outbox" {
				return nil
			}
			return RefereeStats{ForeignLogEntries: s.ForeignEntries()}
		},
	})
	if err != nil {
		return fmt.Errorf("orchestrator: micro: %w", err)
	}
	s.svc = svc
	s.runCtx = ctx
	teamup := micro.HandlerFunc(func(r micro.Request) { s.asyncTeamup(ctx, r) })
	// The goal endpoints open later (openGoals), once a goal can run; the
	// endpoints agents need to register into and rejoin chats open now.
	// The team-up (and the goal endpoints) also answer on their
	// identity-bound form (<subject>.<caller>), which is how agents and
	// clients of a secure server reach them.
	errs := []error{
		add(svc, "health", micro.HandlerFunc(s.handleHealth), micro.WithEndpointSubject(s.subj.Health())),
		add(svc, "teamup", teamup, micro.WithEndpointSubject(s.subj.Teamup())),
		add(svc, "teamup-as", teamup, micro.WithEndpointSubject(s.subj.Teamup()+".*")),
		add(svc, "outbox", micro.HandlerFunc(func(r micro.Request) { s.handleOutbox(ctx, r) }), micro.WithEndpointSubject(s.subj.AllOutboxes())),
		add(svc, "history", micro.HandlerFunc(func(r micro.Request) { s.handleHistory(ctx, r) }), micro.WithEndpointSubject(s.subj.AllHistory())),
		add(svc, "chats", micro.HandlerFunc(func(r micro.Request) { s.handleOpenChats(ctx, r) }), micro.WithEndpointSubject(s.subj.AllOpenChats())),
	}
	ref, err := s.subj.Ref(s.id)
	if err != nil {
		return err
	}
	errs = append(errs, add(svc, "ref", micro.HandlerFunc(func(r micro.Request) { s.handleRef(ctx, r) }), micro.WithEndpointSubject(ref)))
	return errors.Join(errs...)
}

func add(g micro.Group, name string, h micro.Handler, o ...micro.EndpointOpt) error {
	if err := g.AddEndpoint(name, h, o...); err != nil {
		return fmt.Errorf("orchestrator: endpoint %s: %w", name, err)
	}
	return nil
}

// openGoals adds the goal endpoints and says ready.
func (s *Service) openGoals() error {
	ctx := s.runCtx
	opts := []bus.HandlerOption{bus.WithLogger(s.log)}
	goals := s.svc.AddGroup(s.subj.GoalGroup())
	submit := micro.HandlerFunc(func(r micro.Request) { s.handleSubmit(ctx, r) })
	get := bus.Handle(ctx, s.codec, s.handleGet, opts...)
	list := bus.Handle(ctx, s.codec, s.handleList, append(opts, bus.EmptyMeansObject())...)
	cancel := bus.Handle(ctx, s.codec, s.handleCancel, opts...)
	approve := bus.Handle(ctx, s.codec, s.handleApprove, opts...)
	err := errors.Join(
		add(goals, bus.GoalSubmit, submit),
		add(goals, bus.GoalSubmit+"-as", submit, micro.WithEndpointSubject(bus.GoalSubmit+".*")),
		add(goals, bus.GoalGet, get),
		add(goals, bus.GoalGet+"-as", get, micro.WithEndpointSubject(bus.GoalGet+".*")),
		add(goals, bus.GoalList, list),
		add(goals, bus.GoalList+"-as", list, micro.WithEndpointSubject(bus.GoalList+".*")),
		add(goals, bus.GoalCancel, cancel),
		add(goals, bus.GoalCancel+"-as", cancel, micro.WithEndpointSubject(bus.GoalCancel+".*")),
		add(goals, bus.GoalApprove, approve),
		add(goals, bus.GoalApprove+"-as", approve, micro.WithEndpointSubject(bus.GoalApprove+".*")),
	)
	if err == nil {
		// The server must know the subscriptions before anyone is told.
		err = s.nc.FlushTimeout(5 * time.Second)
	}
	if err != nil {
		return fmt.Errorf("orchestrator: open the goal service: %w", err)
	}
	s.readyMu.Lock()
	s.waiting, s.readySince = nil, time.Now().UTC()
	close(s.ready)
	s.readyMu.Unlock()
	s.log.Info("ready: goal service open", "subject", s.subj.GoalGroup()+".>", "expected", s.cfg.Expect)
	return nil
}

// awaitExpected opens the goal endpoints once every expected agent is
// registered and online in the registry (whose index is loaded by then:
// the registry answers only after replaying KV). It says which ones it still
// waits for every 10 s.
func (s *Service) awaitExpected(ctx context.Context) {
	started, lastWarn := time.Now(), time.Now()
	pace := backoff.New(10*time.Millisecond, 200*time.Millisecond)
	for {
		missing := s.notOnline(ctx, s.cfg.Expect)
		s.readyMu.Lock()
		s.waiting = missing
		s.readyMu.Unlock()
		if len(missing) == 0 {
			if err := s.openGoals(); err != nil {
				s.log.Error("not ready", "err", err)
				return
			}
			return
		}
		if time.Since(lastWarn) >= 10*time.Second {
			lastWarn = time.Now()
			s.log.Warn("not ready: waiting for agents to register", "waiting", missing, "for", time.Since(started).Round(time.Second))
		}
		if !pace.Wait(ctx) {
			return
		}
	}
}

// notOnline returns the names the registry does not list as online (or
// cannot be asked about).
func (s *Service) notOnline(ctx context.Context, names []string) []string {
	var out []string
	for _, n := range names {
		if err := s.online(ctx, n); err != nil {
			out = append(out, n)
		}
	}
	return out
}

// online asks the registry for name: nil if registered and online, else
// why not (not_found, conflict for offline, unavailable).
func (s *Service) online(ctx context.Context, name string) error {
	_, err := s.agentInfo(ctx, name)
	return err
}

func (s *Service) agentInfo(ctx context.Context, name string) (protocol.AgentCard, error) {
	a, err := s.lookupAgent(ctx, name, 5*time.Second)
	if err != nil {
		return a.info.AgentCard, protocol.Errorf(protocol.ErrUnavailable, "registry: %v", err)
	}
	switch {
	case !a.registered:
		return a.info.AgentCard, protocol.Errorf(protocol.ErrNotFound, "member %s is not registered", name)
	case !a.info.Online:
		return a.info.AgentCard, protocol.Errorf(protocol.ErrConflict, "member %s is offline", name)
	}
	return a.info.AgentCard, nil
}

// lookupAgent is the registry's answer about name: the last one when it
// said online within cardFresh, else a new one, asked within timeout. Only
// an online answer is taken again: an agent not registered or offline a
// moment ago may be starting. err is only for a registry that did not
// answer.
func (s *Service) lookupAgent(ctx context.Context, name string, timeout time.Duration) (registryAnswer, error) {
	if a, ok := s.answers.cached(name, cardFresh); ok && a.registered && a.info.Online {
		return a, nil
	}
	return s.answers.ask(ctx, s, name, timeout)
}

// handleHealth answers <p>.health, whatever the body: starting or ready.
func (s *Service) handleHealth(r micro.Request) {
	defer s.recoverTo(r)
	_ = r.Respond(bus.Encode(s.Health()))
}

// Shutdown stops serving, waits for in-flight work and closes the
// connection. Running goals stay in KV; another instance, or this one
// started again, resumes them.
func (s *Service) Shutdown(ctx context.Context) error {
	var err error
	s.once.Do(func() {
		s.closing.Store(true)
		if s.svc != nil {
			err = s.svc.Stop()
		}
		// Messages already taken are refereed to the end, effects included
		// (a task result's trigger, a goal's end): cancelling first would
		// cut a job between its log append and what follows from it.
		s.drainShards(ctx)
		if s.cancel != nil {
			s.cancel()
		}
		done := make(chan struct{})
		go func() { s.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			err = errors.Join(err, ctx.Err())
		}
		// Its partitions go to the other instances at once.
		if s.lease != nil {
			s.lease.releaseAll(ctx)
		}
		if s.js != nil {
			select {
			case <-s.js.PublishAsyncComplete():
			case <-ctx.Done():
			}
		}
		s.endGoalSpans()
		if s.nc != nil {
			err = errors.Join(err, bus.Drain(ctx, s.nc))
		}
	})
	return err
}

// Kill stops the instance the way a crash would, for fault drills (ioa
// bench, tests): its connection closes at once, work in flight is dropped
// and its partition leases are not given back, so the other instances take
// them only once they run out. Shutdown is the clean stop.
func (s *Service) Kill() {
	s.once.Do(func() {
		s.closing.Store(true)
		if s.nc != nil {
			s.nc.Close()
		}
		if s.cancel != nil {
			s.cancel()
		}
		s.wg.Wait()
	})
}

// shardDrainFor bounds how long a clean stop waits for queued shard jobs.
const shardDrainFor = 5 * time.Second

// drainShards waits until the jobs queued on every shard before it was
// called have run, for up to shardDrainFor or until ctx ends.
func (s *Service) drainShards(ctx context.Context) {
	if s.shards == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, shardDrainFor)
	defer cancel()
	if !s.awaitShards(ctx) {
		s.log.Warn("stopping with shard jobs still queued", "err", ctx.Err())
	}
}

// awaitShards queues a marker on every shard and reports whether all of
// them ran (so every job queued before did) before ctx ended.
func (s *Service) awaitShards(ctx context.Context) bool {
	var wg sync.WaitGroup
	for _, ch := range s.shards {
		wg.Add(1)
		select {
		case ch <- wg.Done:
		case <-ctx.Done():
			wg.Done()
			return false
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}

// shardOf is the shard that owns key (a comm or goal id).
func (s *Service) shardOf(key string) chan func() { return s.shards[shardIndex(key)] }

// shardIndex is the number of the shard that owns key.
func shardIndex(key string) int {
	var h uint32 = 2166136261
	for i := 0; i < len(key); i++ {
		h = (h ^ uint32(key[i])) * 16777619
	}
	return int(h % numShards)
}

// tryShard queues job on the shard that owns key unless that shard's queue
// is full. Request handlers use it: a handler that waited on one busy chat
// would hold up every chat behind it on the endpoint.
func (s *Service) tryShard(key string, job func()) bool {
	select {
	case s.shardOf(key) <- job:
		return true
	default:
		return false
	}
}

// onShard runs job on the shard that owns key (a comm or goal id), so work
// on one chat is serialised without a lock per chat.
func (s *Service) onShard(ctx context.Context, key string, job func()) {
	select {
	case s.shardOf(key) <- job:
	case <-ctx.Done():
	}
}
