package orchestrator

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
)

// A member is gone when the registry says it is offline: no heartbeat for
// the registry's TTL (docs/protocol.md section 9, "member gone"). The referee asks only
// about members a chat has waited on for goneCheckAfter, and remembers each
// answer for livenessFresh, so a busy instance asks about each waited-on
// member at most once per livenessFresh.
const (
	goneCheckAfter = 5 * time.Second
	livenessFresh  = 5 * time.Second
	livenessAsk    = time.Second
)

// gone reports whether the registry says name is offline. A registry that
// does not answer, or an agent it no longer knows, tells nothing: only a
// clear "offline" counts.
func (s *Service) gone(ctx context.Context, name string) bool {
	a, ok := s.answers.cached(name, livenessFresh)
	if !ok {
		var err error
		if a, err = s.answers.ask(ctx, s, name, livenessAsk); err != nil {
			return false
		}
	}
	return a.registered && !a.info.Online
}

// cardFresh is how long a member's card, found online, is taken without
// asking the registry again. Busy agents join many teams a second, and each
// team-up asked the registry for every member's card; a card re-registered
// or a member gone within the last second is seen a second late, which the
// invitation (no responder) and the referee's liveness checks cover.
const cardFresh = time.Second

// registryAnswers keeps the registry's last answer about each agent, for
// the team-up (cardFresh, online answers only) and the liveness checks
// (livenessFresh) alike.
type registryAnswers struct {
	mu     sync.Mutex
	byName map[string]registryAnswer
}

type registryAnswer struct {
	info       protocol.AgentInfo
	registered bool // false: the registry does not know the name
	at         time.Time
}

// cached returns the last answer about name if it is younger than fresh.
func (r *registryAnswers) cached(name string, fresh time.Duration) (registryAnswer, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a, ok := r.byName[name]
	return a, ok && time.Since(a.at) < fresh
}

// ask asks the registry about name (within timeout) and keeps what it
// says. err is only for a registry that did not answer.
func (r *registryAnswers) ask(ctx context.Context, s *Service, name string, timeout time.Duration) (registryAnswer, error) {
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	a := registryAnswer{at: time.Now(), registered: true}
	err := bus.Request(rctx, s.nc, s.subj.Registry(bus.RegistryGet), protocol.NameRequest{Name: name}, &a.info)
	if errors.Is(err, protocol.ErrNotFound) {
		a.registered, err = false, nil
	}
	if err != nil {
		return a, err
	}
	r.mu.Lock()
	if r.byName == nil || len(r.byName) >= 4096 {
		r.byName = map[string]registryAnswer{} // past the bound, start over: each is only a saved request
	}
	r.byName[name] = a
	r.mu.Unlock()
	return a, nil
}
