package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/registry/search"
)

// record is the value of a key in ioa_agents: the card as registered plus
// the registry's own fields. Readers that expect a bare AgentCard ignore the
// extra fields.
type record struct {
	protocol.AgentCard
	RegisteredAt time.Time `json:"registered_at"`
	UpdatedAt    time.Time `json:"updated_at"`
	// Owner is the identity (reply inbox prefix) that registered the card
	// last; quotas count cards per owner.
	Owner string `json:"owner,omitempty"`
}

func (r *record) doc() search.Doc {
	return search.Doc{Name: r.Name, Description: r.Description, Type: r.Type, Capabilities: r.Capabilities, Tags: r.Tags}
}

type agent struct {
	rec record
	rev uint64
}

type beat struct {
	at  time.Time // server time of the last heartbeat
	rev uint64
}

// view is this instance's copy of the two buckets. The watch loop is its
// only writer; handlers read it.
type view struct {
	mu      sync.RWMutex
	agents  map[string]*agent
	beats   map[string]beat
	owners  map[string]int // owner -> number of cards
	changed chan struct{}  // closed and replaced on every change
}

func newView() *view {
	return &view{
		agents:  make(map[string]*agent),
		beats:   make(map[string]beat),
		owners:  make(map[string]int),
		changed: make(chan struct{}),
	}
}

func (v *view) len() int {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return len(v.agents)
}

// notifyLocked wakes every waiter; v.mu must be held for writing.
func (v *view) notifyLocked() {
	close(v.changed)
	v.changed = make(chan struct{})
}

// waitFor blocks until cond holds on the view, or ctx ends. cond runs under
// the read lock.
func (v *view) waitFor(ctx context.Context, cond func(v *view) bool) error {
	for {
		v.mu.RLock()
		ok, ch := cond(v), v.changed
		v.mu.RUnlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// onlineLocked reports whether name had a heartbeat within ttl of now; v.mu held.
func (v *view) onlineLocked(name string, now time.Time, ttl time.Duration) bool {
	b, ok := v.beats[name]
	return ok && now.Sub(b.at) < ttl
}

func (v *view) putAgent(name string, a *agent) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if old, ok := v.agents[name]; ok {
		v.disown(old.rec.Owner)
	}
	v.agents[name] = a
	v.owners[a.rec.Owner]++
	v.notifyLocked()
}

func (v *view) deleteAgent(name string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if old, ok := v.agents[name]; ok {
		v.disown(old.rec.Owner)
		delete(v.agents, name)
	}
	v.notifyLocked()
}

func (v *view) disown(owner string) {
	if v.owners[owner]--; v.owners[owner] <= 0 {
		delete(v.owners, owner)
	}
}

func (v *view) putBeat(name string, b beat) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.beats[name] = b
	v.notifyLocked()
}

// beatLocally moves name's last heartbeat to at when it is later, keeping
// the revision of the last one stored.
func (v *view) beatLocally(name string, at time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if b := v.beats[name]; at.After(b.at) {
		b.at = at
		v.beats[name] = b
		v.notifyLocked()
	}
}

func (v *view) deleteBeat(name string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.beats, name)
	v.notifyLocked()
}

// namesLocked returns the names of the known agents, sorted; v.mu held.
func (v *view) namesLocked() []string {
	names := make([]string, 0, len(v.agents))
	for n := range v.agents {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// watch is the pair of KV watchers that feed a view.
type watch struct {
	agents, presence, outcomes jetstream.KeyWatcher
}

func startWatch(ctx context.Context, agents, presence, outcomes jetstream.KeyValue) (*watch, error) {
	wa, err := agents.WatchAll(ctx)
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", agents.Bucket(), err)
	}
	wp, err := presence.WatchAll(ctx)
	if err != nil {
		_ = wa.Stop()
		return nil, fmt.Errorf("watch %s: %w", presence.Bucket(), err)
	}
	wo, err := outcomes.WatchAll(ctx)
	if err != nil {
		_ = wa.Stop()
		_ = wp.Stop()
		return nil, fmt.Errorf("watch %s: %w", outcomes.Bucket(), err)
	}
	return &watch{agents: wa, presence: wp, outcomes: wo}, nil
}

func (w *watch) stop() {
	_ = w.agents.Stop()
	_ = w.presence.Stop()
	_ = w.outcomes.Stop()
}

// follow applies KV changes to the view and the index until ctx ends. It
// closes ready once both buckets' initial values are applied.
func (s *Service) follow(ctx context.Context, w *watch, ready chan<- struct{}) {
	defer w.stop()
	agents, presence, outcomes := w.agents.Updates(), w.presence.Updates(), w.outcomes.Updates()
	agentsDone, presenceDone, outcomesDone := false, false, false
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-agents:
			if !ok {
				s.log.Error("registry: watch of agents ended")
				return
			}
			if e == nil {
				agentsDone = true
			} else {
				s.applyAgent(ctx, e)
				s.cfg.Metrics.IndexSize(s.view.len())
			}
		case e, ok := <-presence:
			if !ok {
				s.log.Error("registry: watch of presence ended")
				return
			}
			if e == nil {
				presenceDone = true
			} else {
				s.applyBeat(e)
			}
		case e, ok := <-outcomes:
			if !ok {
				s.log.Error("registry: watch of outcomes ended")
				return
			}
			if e == nil {
				outcomesDone = true
			} else {
				s.applyOutcomes(ctx, e)
			}
		}
		if agentsDone && presenceDone && outcomesDone && ready != nil {
			close(ready)
			ready = nil
		}
	}
}

func (s *Service) applyAgent(ctx context.Context, e jetstream.KeyValueEntry) {
	name := e.Key()
	if e.Operation() != jetstream.KeyValuePut {
		s.view.deleteAgent(name)
		s.clearPending(name)
		if err := s.index.Delete(ctx, name); err != nil && !errors.Is(err, search.ErrNotFound) {
			s.log.Warn("registry: index delete", "agent", name, "err", err)
		}
		return
	}
	var rec record
	err := json.Unmarshal(e.Value(), &rec)
	if err == nil && rec.Name != name {
		err = fmt.Errorf("card name %q under key %q", rec.Name, name)
	}
	if err == nil {
		err = rec.Validate()
	}
	if err != nil {
		// Not written by a registry: leave it out rather than serve it.
		s.log.Warn("registry: ignoring invalid card in KV", "key", name, "revision", e.Revision(), "err", err)
		s.view.deleteAgent(name)
		_ = s.index.Delete(ctx, name)
		return
	}
	s.view.mu.RLock()
	old, had := s.view.agents[name]
	s.view.mu.RUnlock()
	// The index first: a register is answered once the view has the card,
	// and the card must be searchable by then.
	if !had || !sameDoc(old.rec.doc(), rec.doc()) || s.isPending(name) {
		s.upsertMu.Lock()
		err := s.index.Upsert(ctx, rec.doc())
		s.upsertMu.Unlock()
		if err != nil {
			s.log.Error("registry: index upsert; retrying in the background", "agent", name, "err", err)
			s.setPending(name)
		} else {
			s.clearPending(name)
		}
	}
	s.view.putAgent(name, &agent{rec: rec, rev: e.Revision()})
}

func (s *Service) applyBeat(e jetstream.KeyValueEntry) {
	if e.Operation() != jetstream.KeyValuePut {
		s.view.deleteBeat(e.Key())
		return
	}
	s.view.putBeat(e.Key(), beat{at: e.Created(), rev: e.Revision()})
}

func sameDoc(a, b search.Doc) bool {
	return a.Name == b.Name && a.Description == b.Description && a.Type == b.Type &&
		slices.Equal(a.Capabilities, b.Capabilities) && slices.Equal(a.Tags, b.Tags)
}
