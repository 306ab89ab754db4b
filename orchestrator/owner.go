package orchestrator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/ioa-nats/ioa/bus"
	"github.com/nats-io/nats.go/jetstream"
)

// Chat ownership. Several orchestrator instances share the chats: each chat
// (and each goal) falls in one of Config.Partitions partitions by a hash of
// its id, and each partition has at most one owner at a time, the instance
// holding its lease in the KV bucket ioa_leases (key p.<n>, value the owner's
// instance id). Only the owner referees the partition's chats, sweeps their
// deadlines and launches its goals; every other instance forwards what it
// receives for them to the owner (<p>.ref.<owner>, admin only), keeping the
// original reply subject, so the owner answers the agent directly.
//
// A lease is renewed by compare-and-set every TTL/3. An instance takes a
// partition that is free (no key, or deleted by an owner that stopped) or
// whose lease revision it has seen unchanged for a whole TTL by its own
// clock (so no clocks are compared between machines), up to a fair share
// of ceil(Partitions / live instances); instances announce themselves with a
// presence key i.<id> at the same pace. An owner that cannot renew for a TTL
// after its last successful renewal was sent stops acting on the partition
// before anyone else may take it. The chat logs' compare-and-set (every
// append names the log position it expects) keeps the logs whole even if
// two instances ever act at once.

// partitionOf maps a chat or goal id to its partition.
func partitionOf(id string, n int) int {
	var h uint32 = 2166136261
	for i := 0; i < len(id); i++ {
		h = (h ^ uint32(id[i])) * 16777619
	}
	return int(h % uint32(n))
}

func leaseKey(p int) string          { return "p." + itoa(p) }
func presenceKey(inst string) string { return "i." + inst }

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}

type leaseValue struct {
	Owner string `json:"owner"`
}

// seenLease is the last value of a key this instance has seen, and when it
// first saw that revision (local clock).
type seenLease struct {
	owner   string
	rev     uint64
	at      time.Time
	deleted bool
}

// heldLease is a partition this instance owns.
type heldLease struct {
	rev        uint64
	renewedAt  time.Time // when the last successful renewal was sent
	validUntil time.Time // renewedAt + TTL: acting on the partition stops then
}

type leases struct {
	s   *Service
	kv  jetstream.KeyValue
	id  string
	n   int
	ttl time.Duration

	mu         sync.Mutex
	seen       map[string]seenLease
	held       map[int]*heldLease
	releasing  map[int]bool
	presenceAt time.Time
	synced     chan struct{} // closed once the watcher has delivered the current values
	syncOnce   sync.Once
}

func newLeases(s *Service, kv jetstream.KeyValue) *leases {
	return &leases{
		s: s, kv: kv, id: s.id, n: s.cfg.Partitions, ttl: s.cfg.LeaseTTL,
		seen: map[string]seenLease{}, held: map[int]*heldLease{}, releasing: map[int]bool{},
		synced: make(chan struct{}),
	}
}

// watch keeps seen up to date from the bucket's updates, re-watching after
// an error.
func (l *leases) watch(ctx context.Context) {
	for ctx.Err() == nil {
		w, err := l.kv.WatchAll(ctx)
		if err != nil {
			l.s.log.Warn("lease watch", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(l.ttl / 5):
			}
			continue
		}
		for e := range w.Updates() {
			if e == nil {
				l.syncOnce.Do(func() { close(l.synced) })
				continue
			}
			var v leaseValue
			_ = json.Unmarshal(e.Value(), &v)
			deleted := e.Operation() != jetstream.KeyValuePut
			l.mu.Lock()
			old, ok := l.seen[e.Key()]
			if !ok || old.rev != e.Revision() {
				l.seen[e.Key()] = seenLease{owner: v.Owner, rev: e.Revision(), at: time.Now(), deleted: deleted}
			}
			l.mu.Unlock()
		}
		_ = w.Stop()
	}
}

// owns reports whether this instance referees partition p now.
func (l *leases) owns(p int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.held[p]
	return h != nil && !l.releasing[p] && time.Now().Before(h.validUntil)
}

// ownerOf returns the instance that owns partition p, as far as this
// instance knows: "" while the partition is free or its owner's lease has
// run out.
func (l *leases) ownerOf(p int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if h := l.held[p]; h != nil && !l.releasing[p] && time.Now().Before(h.validUntil) {
		return l.id
	}
	e, ok := l.seen[leaseKey(p)]
	if !ok || e.deleted || e.owner == "" || e.owner == l.id || time.Since(e.at) >= l.ttl {
		return ""
	}
	return e.owner
}

// live returns the instances that have announced themselves within a TTL,
// this one included.
func (l *leases) live() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := []string{l.id}
	for k, e := range l.seen {
		if len(k) > 2 && k[:2] == "i." && !e.deleted && e.owner != l.id && time.Since(e.at) < l.ttl {
			out = append(out, e.owner)
		}
	}
	return out
}

func (l *leases) heldCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.held)
}

// tick renews, takes and gives back leases. It returns the partitions this
// instance gained and lost.
func (l *leases) tick(ctx context.Context) (gained, lost []int) {
	val := bus.Encode(leaseValue{Owner: l.id})
	opCtx := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(ctx, max(l.ttl/5, 100*time.Millisecond))
	}
	now := time.Now()
	// Presence.
	if now.Sub(l.presenceAt) >= l.ttl/3 {
		c, cancel := opCtx()
		if _, err := l.kv.Put(c, presenceKey(l.id), val); err == nil {
			l.presenceAt = now
		}
		cancel()
	}
	// Renewals.
	l.mu.Lock()
	due := map[int]uint64{}
	for p, h := range l.held {
		if time.Since(h.renewedAt) >= l.ttl/3 {
			due[p] = h.rev
		}
	}
	l.mu.Unlock()
	for p, rev := range due {
		sent := time.Now()
		c, cancel := opCtx()
		nrev, err := l.kv.Update(c, leaseKey(p), val, rev)
		if err != nil && conflict(err) {
			// A renewal whose answer was lost is ours all the same.
			if e, gerr := l.kv.Get(c, leaseKey(p)); gerr == nil {
				var v leaseValue
				if json.Unmarshal(e.Value(), &v) == nil && v.Owner == l.id && e.Operation() == jetstream.KeyValuePut {
					nrev, err = e.Revision(), nil
				}
			}
		}
		cancel()
		l.mu.Lock()
		h := l.held[p]
		switch {
		case h == nil:
		case err == nil:
			h.rev, h.renewedAt, h.validUntil = nrev, sent, sent.Add(l.ttl)
		case conflict(err) || time.Now().After(h.validUntil):
			delete(l.held, p)
			lost = append(lost, p)
			l.s.log.Warn("partition lease lost", "partition", p, "err", err)
		}
		l.mu.Unlock()
	}
	// Leases that ran out without an answer.
	l.mu.Lock()
	for p, h := range l.held {
		if time.Now().After(h.validUntil) {
			delete(l.held, p)
			lost = append(lost, p)
		}
	}
	l.mu.Unlock()
	// Fair share.
	live := len(l.live())
	target := (l.n + live - 1) / live
	type cand struct {
		p      int
		rev    uint64
		exists bool
		long   bool // free or expired for a while: taken whatever the share
	}
	var cands []cand
	l.mu.Lock()
	have := len(l.held)
	for p := range l.n {
		if l.held[p] != nil {
			continue
		}
		e, ok := l.seen[leaseKey(p)]
		switch {
		case !ok:
			cands = append(cands, cand{p: p, long: true})
		case e.deleted:
			cands = append(cands, cand{p: p, rev: e.rev, long: time.Since(e.at) > l.ttl/2})
		case time.Since(e.at) >= l.ttl:
			cands = append(cands, cand{p: p, rev: e.rev, exists: true, long: time.Since(e.at) >= l.ttl+l.ttl/2})
		}
	}
	l.mu.Unlock()
	rand.Shuffle(len(cands), func(i, j int) { cands[i], cands[j] = cands[j], cands[i] })
	for _, c := range cands {
		if have >= target && !c.long {
			continue
		}
		cc, cancel := opCtx()
		var rev uint64
		var err error
		if c.exists {
			rev, err = l.kv.Update(cc, leaseKey(c.p), val, c.rev)
		} else {
			rev, err = l.kv.Create(cc, leaseKey(c.p), val)
		}
		cancel()
		if err != nil {
			continue
		}
		now := time.Now()
		l.mu.Lock()
		l.held[c.p] = &heldLease{rev: rev, renewedAt: now, validUntil: now.Add(l.ttl)}
		delete(l.releasing, c.p)
		l.mu.Unlock()
		gained = append(gained, c.p)
		have++
	}
	// More than the share while another live instance has less: give the
	// excess back, so a new instance gets its part.
	if have > target && l.someoneShort(target) {
		l.mu.Lock()
		var give []int
		for p := range l.held {
			if len(give) < have-target {
				give = append(give, p)
			}
		}
		for _, p := range give {
			l.releasing[p] = true
		}
		l.mu.Unlock()
		if len(give) > 0 {
			// Work already queued for those chats runs (and forwards) first.
			l.s.barrier(ctx)
			lost = append(lost, give...)
			for _, p := range give {
				l.release(ctx, p)
			}
		}
	}
	return gained, lost
}

// someoneShort reports whether a live instance holds fewer than target-1
// partitions (so that a remainder does not make leases move back and forth).
func (l *leases) someoneShort(target int) bool {
	liveSet := map[string]int{}
	for _, id := range l.live() {
		if id != l.id {
			liveSet[id] = 0
		}
	}
	if len(liveSet) == 0 {
		return false
	}
	l.mu.Lock()
	for p := range l.n {
		if e, ok := l.seen[leaseKey(p)]; ok && !e.deleted && time.Since(e.at) < l.ttl {
			if _, ok := liveSet[e.owner]; ok {
				liveSet[e.owner]++
			}
		}
	}
	l.mu.Unlock()
	for _, c := range liveSet {
		if c < target-1 {
			return true
		}
	}
	return false
}

// release gives a partition back: its key is deleted (if still ours), so
// another instance takes it at once.
func (l *leases) release(ctx context.Context, p int) {
	l.mu.Lock()
	h := l.held[p]
	delete(l.held, p)
	delete(l.releasing, p)
	l.mu.Unlock()
	if h == nil {
		return
	}
	c, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	err := l.kv.Delete(c, leaseKey(p), jetstream.LastRevision(h.rev))
	if conflict(err) {
		// A renewal whose answer was lost moved the revision on: the lease
		// is still ours if the key still names this instance.
		if e, gerr := l.kv.Get(c, leaseKey(p)); gerr == nil {
			var v leaseValue
			if json.Unmarshal(e.Value(), &v) == nil && v.Owner == l.id {
				err = l.kv.Delete(c, leaseKey(p), jetstream.LastRevision(e.Revision()))
			} else {
				err = nil // someone else's already
			}
		}
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		l.s.log.Warn("release partition", "partition", p, "err", err)
	}
}

// releaseAll gives every partition back and says goodbye (Shutdown).
func (l *leases) releaseAll(ctx context.Context) {
	l.mu.Lock()
	var ps []int
	for p := range l.held {
		ps = append(ps, p)
	}
	l.mu.Unlock()
	for _, p := range ps {
		l.release(ctx, p)
	}
	c, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_ = l.kv.Delete(c, presenceKey(l.id))
}

// partitionsKey holds, in the lease bucket, the number of partitions the
// running instances use: a chat's partition is a hash modulo that number,
// so instances that disagree on it would each think they own chats the
// other owns.
const partitionsKey = "partitions"

// agreePartitions records n as the deployment's number of partitions, or
// refuses to start when the running instances use another.
func agreePartitions(ctx context.Context, kv jetstream.KeyValue, n int) error {
	want := itoa(n)
	if _, err := kv.Create(ctx, partitionsKey, []byte(want)); err == nil || !errors.Is(err, jetstream.ErrKeyExists) {
		if err != nil {
			return fmt.Errorf("orchestrator: record the number of partitions: %w", err)
		}
		return nil
	}
	e, err := kv.Get(ctx, partitionsKey)
	if err != nil {
		return fmt.Errorf("orchestrator: read the number of partitions: %w", err)
	}
	if have := string(e.Value()); have != want {
		return fmt.Errorf("orchestrator: orchestrator.partitions is %s here but %s in the running instances (KV %s key %q): every instance must use the same value",
			want, have, bus.BucketLeases, partitionsKey)
	}
	// The same value again keeps the key from expiring with the bucket's
	// TTL; another instance doing so at the same moment is as good.
	_, _ = kv.Update(ctx, partitionsKey, []byte(want), e.Revision())
	return nil
}
