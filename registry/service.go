package registry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/registry/search"
	"github.com/ioa-nats/ioa/telemetry"
)

// ServiceName is the micro service name, as shown by `nats micro ls`.
const ServiceName = "ioa-registry"

// Version is the service version reported to `nats micro info`.
const Version = "1.0.0"

// QueueGroup is shared by every registry instance, so each request is
// answered by exactly one of them.
const QueueGroup = "ioa-registry"

// BucketPresence holds heartbeats; the bus provisions it.
const BucketPresence = bus.BucketPresence

// Defaults of Config.
const (
	DefaultHeartbeatTTL        = 30 * time.Second
	DefaultMaxDescriptionBytes = 4096
	DefaultMaxCardBytes        = 16 << 10
	DefaultMaxAgentsPerConn    = 1000
	DefaultMaxResults          = 100
)

var (
	// ErrStarted is returned by Start on a service that was started before.
	ErrStarted = errors.New("registry: service already started")
	// ErrClosed is returned by Start after Shutdown.
	ErrClosed = errors.New("registry: service shut down")
)

// Config tunes a registry instance. The zero value is a sensible default.
type Config struct {
	// HeartbeatTTL is how long an agent stays online after its last
	// heartbeat or registration; 30s by default.
	HeartbeatTTL time.Duration
	// MaxDescriptionBytes bounds a card's description; 4096 by default.
	MaxDescriptionBytes int
	// MaxCardBytes bounds a register request body; 16 KiB by default.
	MaxCardBytes int
	// MaxAgentsPerConn bounds how many agents one client connection may
	// register; 1000 by default.
	MaxAgentsPerConn int
	// MaxResults is the largest search limit; 100 by default.
	MaxResults int
	// Embedder embeds cards and queries; nil means search.LocalEmbedder.
	Embedder search.Embedder
	// EmbedderID names Embedder (kind, address, model): vectors kept on
	// disk are re-used only for the same one.
	EmbedderID string
	// VectorDir, when set with an Embedder, keeps the cards' vectors there
	// (chromem-go's persistent store) so that a restarted instance does not
	// embed every card again. The built-in embedder needs no such store.
	VectorDir string
	// RetryInterval is how long a card that could not be indexed (its
	// embedder failed) waits before the first retry; the wait doubles up
	// to RetryMax. 1s and 30s by default.
	RetryInterval, RetryMax time.Duration
	// Logger receives the service's logs; nil discards them.
	Logger *slog.Logger
	// Metrics, if not nil, time searches and count the index
	// (telemetry.Metrics); nil counts nothing.
	Metrics *telemetry.Metrics
}

func (c Config) withDefaults() (Config, error) {
	if c.RetryInterval <= 0 {
		c.RetryInterval = time.Second
	}
	if c.RetryMax < c.RetryInterval {
		c.RetryMax = max(c.RetryInterval, 30*time.Second)
	}
	if c.HeartbeatTTL < 0 || c.MaxDescriptionBytes < 0 || c.MaxCardBytes < 0 || c.MaxAgentsPerConn < 0 || c.MaxResults < 0 {
		return c, errors.New("registry: config: limits must not be negative")
	}
	if c.HeartbeatTTL == 0 {
		c.HeartbeatTTL = DefaultHeartbeatTTL
	}
	if c.MaxDescriptionBytes == 0 {
		c.MaxDescriptionBytes = DefaultMaxDescriptionBytes
	}
	if c.MaxCardBytes == 0 {
		c.MaxCardBytes = DefaultMaxCardBytes
	}
	if c.MaxAgentsPerConn == 0 {
		c.MaxAgentsPerConn = DefaultMaxAgentsPerConn
	}
	if c.MaxResults == 0 {
		c.MaxResults = DefaultMaxResults
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// Service is one registry instance. Create it with New, serve with Start and
// stop with Shutdown.
type Service struct {
	bus   *bus.Bus
	cfg   Config
	log   *slog.Logger
	index *search.Index
	view  *view

	mu       sync.Mutex
	started  bool
	closed   bool
	nc       *nats.Conn
	agents   jetstream.KeyValue
	presence jetstream.KeyValue
	outcomes jetstream.KeyValue
	svc      micro.Service
	cancel   context.CancelFunc
	done     chan struct{} // closed when the watch loop has ended

	// pending are the agents whose card or outcomes the index could not
	// take (the embedder failed); the retry loop tries them again.
	upsertMu  sync.Mutex // one card upsert at a time: the watch's or a retry's
	pendingMu sync.Mutex
	pending   map[string]bool
	retry     chan struct{} // wakes the retry loop
	retryDone chan struct{} // closed when the retry loop has ended
}

// New prepares a registry instance on b; nothing runs before Start.
func New(b *bus.Bus, cfg Config) (*Service, error) {
	if b == nil {
		return nil, errors.New("registry: nil bus")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	var opts []search.Option
	if cfg.VectorDir != "" && cfg.Embedder != nil {
		opts = append(opts, search.WithPersistDir(cfg.VectorDir, cfg.EmbedderID))
	}
	ix, err := search.NewIndex(cfg.Embedder, opts...)
	if err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	return &Service{bus: b, cfg: cfg, log: cfg.Logger, index: ix, view: newView(),
		pending: map[string]bool{}, retry: make(chan struct{}, 1)}, nil
}

// Start opens the buckets, replays them into the index and then serves the
// endpoints. It returns once the service answers requests with everything
// that was in KV when it started; the watch goes on until Shutdown.
func (s *Service) Start(ctx context.Context) (err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return ErrClosed
	case s.started:
		return ErrStarted
	}
	s.started = true
	defer func() {
		if err != nil {
			s.stopLocked(context.WithoutCancel(ctx))
		}
	}()

	nc, err := s.bus.NewConn(ServiceName)
	if err != nil {
		return fmt.Errorf("registry: start: %w", err)
	}
	s.nc = nc
	s.cfg.Metrics.WatchConn(ServiceName, nc)
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("registry: start: %w", err)
	}
	if s.agents, err = js.KeyValue(ctx, bus.BucketAgents); err != nil {
		return fmt.Errorf("registry: start: bucket %s: %w", bus.BucketAgents, err)
	}
	// The bus provisions the presence bucket with the others (retrying
	// while a cluster forms).
	s.presence, err = js.KeyValue(ctx, BucketPresence)
	if err != nil {
		return fmt.Errorf("registry: start: bucket %s: %w", BucketPresence, err)
	}

	if s.outcomes, err = js.KeyValue(ctx, BucketOutcomes); err != nil {
		return fmt.Errorf("registry: start: bucket %s: %w", BucketOutcomes, err)
	}

	// The watch outlives Start's context: it belongs to the service.
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	w, err := startWatch(wctx, s.agents, s.presence, s.outcomes)
	if err != nil {
		return fmt.Errorf("registry: start: %w", err)
	}
	ready := make(chan struct{})
	s.done = make(chan struct{})
	s.retryDone = make(chan struct{})
	go func() {
		defer close(s.retryDone)
		s.retryLoop(wctx)
	}()
	go func() {
		defer close(s.done)
		s.follow(wctx, w, ready)
	}()
	select {
	case <-ready:
	case <-s.done:
		return errors.New("registry: start: the KV watch ended before catching up")
	case <-ctx.Done():
		return fmt.Errorf("registry: start: catching up with KV: %w", ctx.Err())
	}

	// Vectors kept on disk for cards that are gone are dropped.
	if err := s.index.Prune(ctx); err != nil {
		s.log.Warn("registry: prune the vector store", "err", err)
	}
	svc, err := micro.AddService(nc, micro.Config{
		Name:        ServiceName,
		Version:     Version,
		Description: "IoA agent registry: register, heartbeat, get, list and search agent cards (docs/protocol.md section 5)",
		QueueGroup:  QueueGroup,
		Metadata:    map[string]string{"prefix": s.bus.Subjects().Prefix(), "heartbeat_ttl": s.cfg.HeartbeatTTL.String()},
		ErrorHandler: func(_ micro.Service, err *micro.NATSError) {
			s.log.Warn("registry: service error", "subject", err.Subject, "err", err.Description)
		},
	})
	if err != nil {
		return fmt.Errorf("registry: start: %w", err)
	}
	s.svc = svc
	if err := s.addEndpoints(wctx, svc); err != nil {
		return fmt.Errorf("registry: start: %w", err)
	}
	// The server must know the subscriptions before Start says "serving".
	if err := nc.FlushTimeout(10 * time.Second); err != nil {
		return fmt.Errorf("registry: start: %w", err)
	}
	s.log.Info("registry started", "agents", s.view.len(), "ttl", s.cfg.HeartbeatTTL)
	return nil
}

// Shutdown stops serving, stops the KV watch and closes the service's
// connection after in-flight replies are sent. It is safe to call twice,
// and before Start.
func (s *Service) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	return s.stopLocked(ctx)
}

func (s *Service) stopLocked(ctx context.Context) error {
	s.closed = true
	var errs []error
	if s.svc != nil {
		if err := s.svc.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	if s.cancel != nil {
		s.cancel()
	}
	if s.done != nil {
		select {
		case <-s.done:
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("waiting for the KV watch to end: %w", ctx.Err()))
		}
	}
	if s.retryDone != nil {
		select {
		case <-s.retryDone:
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("waiting for the index retries to end: %w", ctx.Err()))
		}
	}
	if s.nc != nil {
		if err := bus.Drain(ctx, s.nc); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("registry: shutdown: %w", err)
	}
	return nil
}

// Len is the number of agents this instance knows.
func (s *Service) Len() int { return s.view.len() }
