package orchestrator

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/internal/backoff"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// Headers of the work one instance forwards to another on <p>.ref.<id>.
const (
	// HeaderSubject is the subject the forwarded request came on.
	HeaderSubject = "Ioa-Subject"
	// HeaderHops counts how often it was forwarded.
	HeaderHops = "Ioa-Hops"
	// HeaderOp names an internal operation instead (opLaunch, opEndChat,
	// opChats).
	HeaderOp = "Ioa-Op"
)

const (
	opLaunch  = "launch"
	opEndChat = "end-chat"
	opChats   = "chats"
)

// maxHops bounds forwarding while ownership moves.
const maxHops = 4

// InstanceID is this instance's id: its partition leases name it, and other
// instances forward work for its chats to <p>.ref.<id>.
func (s *Service) InstanceID() string { return s.id }

// Partitions returns the partitions this instance owns now.
func (s *Service) Partitions() []int {
	if s.lease == nil {
		return nil
	}
	s.lease.mu.Lock()
	defer s.lease.mu.Unlock()
	var out []int
	for p := range s.lease.held {
		if !s.lease.releasing[p] {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// mine reports whether this instance owns the chat or goal with id key.
func (s *Service) mine(key string) bool {
	return s.lease.owns(partitionOf(key, s.cfg.Partitions))
}

// ownedID returns a new id with prefix that falls in a partition this
// instance owns (when it owns any), so a goal submitted here is launched,
// and its chat refereed, here, without forwarding. want, if not empty, is
// an id whose partition the new id must share instead.
func (s *Service) ownedID(prefix, want string) string {
	if want != "" {
		p := partitionOf(want, s.cfg.Partitions)
		for {
			id := newID(prefix)
			if partitionOf(id, s.cfg.Partitions) == p {
				return id
			}
		}
	}
	id := newID(prefix)
	if s.lease.heldCount() == 0 {
		return id
	}
	for range 1024 {
		if s.mine(id) {
			return id
		}
		id = newID(prefix)
	}
	return id
}

// route sends a request this instance received for key (a comm or goal id
// it does not own) to the owner, keeping the reply subject so the owner
// answers the requester. While the partition has no owner (a takeover is
// under way) it waits beside the handler, up to two lease TTLs, and calls
// again once someone (maybe this instance) owns it.
func (s *Service) route(ctx context.Context, key, subject string, data []byte, replyTo string, hops int, again func(hops int)) {
	if hops >= maxHops {
		_ = bus.RespondErrorLater(s.nc, replyTo, protocol.Errorf(protocol.ErrUnavailable, "the referee of %s is moving; send again", key))
		return
	}
	p := partitionOf(key, s.cfg.Partitions)
	if owner := s.lease.ownerOf(p); owner != "" && owner != s.id {
		s.sendRef(owner, subject, data, replyTo, hops+1, "")
		return
	}
	if !s.waits.acquire("") {
		_ = bus.RespondErrorLater(s.nc, replyTo, protocol.Errorf(protocol.ErrUnavailable, "the referee of %s is moving; send again", key))
		return
	}
	s.wg.Go(func() {
		defer s.waits.release("")
		deadline := time.Now().Add(2 * s.cfg.LeaseTTL)
		for time.Now().Before(deadline) {
			select {
			case <-ctx.Done():
				_ = bus.RespondErrorLater(s.nc, replyTo, protocol.Errorf(protocol.ErrUnavailable, "orchestrator shutting down; send again"))
				return
			case <-time.After(25 * time.Millisecond):
			}
			if s.lease.ownerOf(p) != "" {
				again(hops + 1)
				return
			}
		}
		_ = bus.RespondErrorLater(s.nc, replyTo, protocol.Errorf(protocol.ErrUnavailable, "no orchestrator instance owns %s yet; send again", key))
	})
}

// sendRef forwards to instance owner.
func (s *Service) sendRef(owner, subject string, data []byte, replyTo string, hops int, op string) {
	ref, err := s.subj.Ref(owner)
	if err != nil {
		return
	}
	m := nats.NewMsg(ref)
	m.Data, m.Reply = data, replyTo
	m.Header.Set(HeaderSubject, subject)
	m.Header.Set(HeaderHops, strconv.Itoa(hops))
	if op != "" {
		m.Header.Set(HeaderOp, op)
	}
	if err := s.nc.PublishMsg(m); err != nil {
		s.log.Warn("forward", "to", owner, "subject", subject, "err", err)
	}
}

// handleRef takes work another instance forwarded to this one.
func (s *Service) handleRef(ctx context.Context, r micro.Request) {
	defer s.recoverTo(r)
	h := r.Headers()
	subject := h.Get(HeaderSubject)
	hops, _ := strconv.Atoi(h.Get(HeaderHops))
	data, replyTo := r.Data(), r.Reply()
	switch h.Get(HeaderOp) {
	case "":
	case opLaunch:
		s.launchOwned(ctx, string(data), hops)
		return
	case opEndChat:
		var req endChatRequest
		if err := json.Unmarshal(data, &req); err != nil {
			return
		}
		s.wg.Go(func() {
			done := make(chan struct{})
			s.endChatHops(ctx, req.CommID, req.Status, req.Reason, done, hops)
			select {
			case <-done:
			case <-ctx.Done():
			}
			_ = bus.RespondLater(s.nc, replyTo, struct{}{})
		})
		return
	case opChats:
		_ = r.Respond(bus.Encode(protocol.OpenChatsReply{Chats: s.localOpenChats(string(data))}))
		return
	default:
		_ = bus.RespondError(r, protocol.Errorf(protocol.ErrInvalid, "unknown operation %q", h.Get(HeaderOp)))
		return
	}
	switch {
	case subject == s.subj.Teamup() || strings.HasPrefix(subject, s.subj.Teamup()+"."):
		s.teamupAt(ctx, subject, data, replyTo, hops)
	default:
		as, err := s.subj.ParseAgent(subject)
		if err != nil || as.Kind != bus.AgentOut {
			_ = bus.RespondErrorLater(s.nc, replyTo, protocol.Errorf(protocol.ErrInvalid, "bad forwarded subject %q", subject))
			return
		}
		s.outbox(ctx, subject, data, replyTo, hops)
	}
}

type endChatRequest struct {
	CommID string `json:"comm_id"`
	Status string `json:"status"`
	Reason string `json:"reason"`
}

// barrier returns once every shard has run the jobs queued before it.
// It gives up after LeaseTTL/2: the lease loop that calls it must go on
// renewing the other partitions.
func (s *Service) barrier(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.LeaseTTL/2)
	defer cancel()
	s.awaitShards(ctx)
}

// runLeases keeps this instance's partitions: every TTL/10 it renews (what is due), takes
// a fair share and gives back the excess; it resumes the chats and goals of
// the partitions it gains and lets go of those it loses.
func (s *Service) runLeases(ctx context.Context) {
	t := time.NewTicker(s.cfg.LeaseTTL / 10)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		gained, lost := s.lease.tick(ctx)
		s.dropPartitions(lost)
		if len(gained) > 0 {
			s.log.Info("partitions taken", "instance", s.id, "partitions", gained)
			s.wg.Go(func() { s.resume(ctx, gained) })
		}
	}
}

// dropPartitions forgets the chats of partitions this instance lost: their
// new owner rebuilds them from the log.
func (s *Service) dropPartitions(ps []int) {
	if len(ps) == 0 {
		return
	}
	s.log.Info("partitions given up", "instance", s.id, "partitions", ps)
	set := map[int]bool{}
	for _, p := range ps {
		set[p] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for comm := range s.active {
		if set[partitionOf(comm, s.cfg.Partitions)] {
			delete(s.active, comm)
		}
	}
	for comm := range s.ended {
		if set[partitionOf(comm, s.cfg.Partitions)] {
			delete(s.ended, comm)
		}
	}
	s.endedOrder = slices.DeleteFunc(s.endedOrder, func(c string) bool { return set[partitionOf(c, s.cfg.Partitions)] })
}

// startLaunch has the owner of the goal's partition launch it: this
// instance, or the owner it forwards to. A goal recorded as forming was
// promised a launch by this instance, which keeps the promise even if the
// partition was given away since: the new owner's takeover may have read
// the live goals before the record was stored, and neither the forward nor
// the owner launches a goal that is no longer accepted (a CI run found one
// left forming for good while three instances shared the partitions out).
func (s *Service) startLaunch(ctx context.Context, st protocol.GoalStatus) {
	if st.Status == protocol.GoalForming || s.mine(st.GoalID) {
		s.wg.Go(func() { s.launch(ctx, st) })
		return
	}
	s.wg.Go(func() { s.forwardLaunch(ctx, st) })
}

// forwardLaunch forwards the launch of a goal recorded here to the owner of
// its partition, and again while the record still says accepted: a forward
// is a plain publish, lost when the owner's connection is moving to another
// server, sent to an owner whose lease just ran out, or when there is no
// owner yet; the instance that takes a partition over launches its
// accepted goals, but a lost forward to an owner that keeps the partition
// left the goal accepted until its timeout (a fault test found one after a
// NATS node was killed). Launching twice is safe: team-up is idempotent per
// goal and launchOwned skips a goal no longer accepted.
func (s *Service) forwardLaunch(ctx context.Context, st protocol.GoalStatus) {
	id := st.GoalID
	for pace := backoff.New(forwardRecheck, 4*forwardRecheck); ; {
		if s.mine(id) {
			if cur, err := s.readGoal(ctx, id); err == nil && cur.Status == protocol.GoalAccepted {
				s.launch(ctx, cur)
			}
			return
		}
		if owner := s.lease.ownerOf(partitionOf(id, s.cfg.Partitions)); owner != "" && owner != s.id {
			s.sendRef(owner, "", []byte(id), "", 1, opLaunch)
		}
		if !pace.Wait(ctx) {
			return
		}
		cur, err := s.readGoal(ctx, id)
		if err == nil && cur.Status != protocol.GoalAccepted {
			return // launched (or ended)
		}
		if (err != nil && !errors.Is(err, protocol.ErrUnavailable)) || time.Now().After(st.Deadline) {
			return // gone, or the sweep of its owner times it out
		}
	}
}

// forwardRecheck is how long a forwarded launch is given before the record
// is read to see whether it left accepted.
const forwardRecheck = 500 * time.Millisecond

// launchOwned launches a goal forwarded to this instance.
func (s *Service) launchOwned(ctx context.Context, goalID string, hops int) {
	if !protocol.ValidID(goalID) {
		return
	}
	s.wg.Go(func() {
		st, err := s.readGoal(ctx, goalID)
		if err != nil || st.Status != protocol.GoalAccepted {
			return
		}
		if !s.mine(goalID) {
			if owner := s.lease.ownerOf(partitionOf(goalID, s.cfg.Partitions)); owner != "" && owner != s.id && hops < maxHops {
				s.sendRef(owner, "", []byte(goalID), "", hops+1, opLaunch)
			}
			return
		}
		s.launch(ctx, st)
	})
}

// localOpenChats lists the open chats of this instance that name is in.
func (s *Service) localOpenChats(name string) []string {
	out := []string{}
	s.mu.Lock()
	defer s.mu.Unlock()
	for comm, rec := range s.active {
		if slices.Contains(rec.members, name) && !rec.over.Load() {
			out = append(out, comm)
		}
	}
	return out
}

// openChatsEverywhere asks every live instance for name's open chats.
func (s *Service) openChatsEverywhere(ctx context.Context, name string) []string {
	out := s.localOpenChats(name)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, inst := range s.lease.live() {
		if inst == s.id {
			continue
		}
		wg.Go(func() {
			ref, err := s.subj.Ref(inst)
			if err != nil {
				return
			}
			m := nats.NewMsg(ref)
			m.Data = []byte(name)
			m.Header.Set(HeaderOp, opChats)
			rctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			resp, err := s.nc.RequestMsgWithContext(rctx, m)
			if err != nil {
				return
			}
			var rep protocol.OpenChatsReply
			if json.Unmarshal(resp.Data, &rep) == nil {
				mu.Lock()
				out = append(out, rep.Chats...)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.Sort(out)
	return slices.Compact(out)
}
