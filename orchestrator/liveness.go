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

type liveness struct {
	mu   sync.Mutex
	seen map[string]livenessEntry
}

type livenessEntry struct {
	online bool
	at     time.Time
}

// gone reports whether the registry says name is offline. A registry that
// does not answer, or an agent it no longer knows, tells nothing: only a
// clear "offline" counts.
func (s *Service) gone(ctx context.Context, name string) bool {
	now := time.Now()
	s.live.mu.Lock()
	e, ok := s.live.seen[name]
	s.live.mu.Unlock()
	if ok && now.Sub(e.at) < livenessFresh {
		return !e.online
	}
	actx, cancel := context.WithTimeout(ctx, livenessAsk)
	defer cancel()
	var info protocol.AgentInfo
	err := bus.Request(actx, s.nc, s.subj.Registry(bus.RegistryGet), protocol.NameRequest{Name: name}, &info)
	if err != nil && !errors.Is(err, protocol.ErrNotFound) {
		return false
	}
	online := err != nil || info.Online // unregistered: not ours to judge
	s.live.mu.Lock()
	if s.live.seen == nil || len(s.live.seen) > 4096 {
		s.live.seen = map[string]livenessEntry{}
	}
	s.live.seen[name] = livenessEntry{online: online, at: now}
	s.live.mu.Unlock()
	return !online
}

// cardFresh is how long a member's card, found online, is taken without
// asking the registry again. Busy agents join many teams a second, and each
// team-up asked the registry for every member's card; a card re-registered
// or a member gone within the last second is seen a second late, which the
// invitation (no responder) and the referee's liveness checks cover.
const cardFresh = time.Second

// onlineCards keeps the cards of members the registry said were online.
type onlineCards struct {
	mu   sync.Mutex
	byID map[string]cardEntry
}

type cardEntry struct {
	card protocol.AgentCard
	at   time.Time
}

func (c *onlineCards) get(name string) (protocol.AgentCard, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byID[name]
	if !ok || time.Since(e.at) >= cardFresh {
		return protocol.AgentCard{}, false
	}
	return e.card, true
}

func (c *onlineCards) put(name string, card protocol.AgentCard) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byID == nil || len(c.byID) >= 4096 {
		c.byID = map[string]cardEntry{} // past the bound, start over: each is only a saved request
	}
	c.byID[name] = cardEntry{card: card, at: time.Now()}
}
