package agentkit

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ioa-nats/ioa/bus"
)

// Option tunes a Runtime.
type Option func(*options) error

type options struct {
	log               *slog.Logger
	heartbeat         time.Duration // 0: ttl/3 from the registry
	maxConcurrency    int           // 0: the card's, else 4
	requestTimeout    time.Duration
	teamupTimeout     time.Duration
	taskTimeout       time.Duration
	progressAfter     time.Duration // 0: report task_progress at once
	policyTimeout     time.Duration
	policyRetries     int
	resync            time.Duration
	codec             bus.Codec
	recentMessages    int
	registerBackoffHi time.Duration
}

func defaultOptions() options {
	return options{
		log:               slog.New(slog.DiscardHandler),
		requestTimeout:    5 * time.Second,
		teamupTimeout:     30 * time.Second,
		taskTimeout:       10 * time.Minute,
		progressAfter:     50 * time.Millisecond,
		policyTimeout:     2 * time.Minute,
		policyRetries:     2,
		resync:            15 * time.Second,
		recentMessages:    20,
		registerBackoffHi: 5 * time.Second,
	}
}

func positive(what string, d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("agentkit: %s must be positive, got %v", what, d)
	}
	return nil
}

// WithLogger sets the runtime's logger; nil discards.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			l = slog.New(slog.DiscardHandler)
		}
		o.log = l
		return nil
	}
}

// WithHeartbeatInterval fixes the heartbeat interval instead of a third of
// the ttl the registry announces.
func WithHeartbeatInterval(d time.Duration) Option {
	return func(o *options) error { o.heartbeat = d; return positive("heartbeat interval", d) }
}

// WithMaxConcurrency bounds how many tasks each agent runs at once,
// overriding the cards' max_concurrency (default 4).
func WithMaxConcurrency(n int) Option {
	return func(o *options) error {
		if n <= 0 {
			return fmt.Errorf("agentkit: max concurrency must be positive, got %d", n)
		}
		o.maxConcurrency = n
		return nil
	}
}

// WithRequestTimeout bounds each request to the registry, an outbox or a
// history subject (default 5s).
func WithRequestTimeout(d time.Duration) Option {
	return func(o *options) error { o.requestTimeout = d; return positive("request timeout", d) }
}

// WithTeamupTimeout bounds the teamup request of a launch (default 30s).
func WithTeamupTimeout(d time.Duration) Option {
	return func(o *options) error { o.teamupTimeout = d; return positive("teamup timeout", d) }
}

// WithTaskTimeout bounds each task, including a nested team's goal
// (default 10m).
func WithTaskTimeout(d time.Duration) Option {
	return func(o *options) error { o.taskTimeout = d; return positive("task timeout", d) }
}

// WithProgressAfter sets how long an async task may run before its agent
// reports task_progress (default 50ms). A task done sooner is acknowledged by
// its task_result alone; 0 reports progress as soon as the task starts.
func WithProgressAfter(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return fmt.Errorf("agentkit: progress delay must not be negative, got %v", d)
		}
		o.progressAfter = d
		return nil
	}
}

// WithPolicyTimeout bounds each policy call (default 2m).
func WithPolicyTimeout(d time.Duration) Option {
	return func(o *options) error { o.policyTimeout = d; return positive("policy timeout", d) }
}

// WithPolicyRetries sets how many times a refused move is sent back to the
// policy before the runtime makes a safe fallback move (default 2).
func WithPolicyRetries(n int) Option {
	return func(o *options) error {
		if n < 0 {
			return errors.New("agentkit: policy retries must not be negative")
		}
		o.policyRetries = n
		return nil
	}
}

// WithResyncInterval sets how long a chat may stay silent before the agent
// asks its history for messages it may have missed (default 15s). Core NATS
// delivers at most once; this is the safety net.
func WithResyncInterval(d time.Duration) Option {
	return func(o *options) error { o.resync = d; return positive("resync interval", d) }
}

// WithCodec sets how inbound requests are decoded (size limit).
func WithCodec(c bus.Codec) Option {
	return func(o *options) error { o.codec = c; return nil }
}
