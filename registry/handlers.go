package registry

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
)

// MaxListLimit bounds one page of registry.list.
const MaxListLimit = 1000

// settleTimeout bounds how long a write waits for this instance's view to
// show it, so that a search right after a register sees the new card
// (the view follows a KV watch, which lags under load).
const settleTimeout = 10 * time.Second

// casRetries bounds the read-modify-write loop of register.
const casRetries = 5

type empty struct{}

func (s *Service) addEndpoints(ctx context.Context, svc micro.Service) error {
	codec := s.bus.Codec()
	opts := []bus.HandlerOption{bus.WithLogger(s.log)}
	g := svc.AddGroup(s.bus.Subjects().RegistryGroup(), micro.WithGroupQueueGroup(QueueGroup))
	endpoints := []struct {
		name, request, reply string
		h                    micro.Handler
	}{
		{bus.RegistryRegister, "AgentCard", `{"name","revision","registered_at"}`,
			s.limitBody(s.cfg.MaxCardBytes, "agent card", bus.Handle(ctx, codec, s.register, opts...))},
		{bus.RegistryDeregister, `{"name"}`, `{}`, bus.Handle(ctx, codec, s.deregister, opts...)},
		{bus.RegistryHeartbeat, `{"name"}`, `{"ttl"}`, bus.Handle(ctx, codec, s.heartbeat, opts...)},
		{bus.RegistryGet, `{"name"}`, `AgentCard + {"online","last_seen"}`, bus.Handle(ctx, codec, s.get, opts...)},
		{bus.RegistryList, `{"offset","limit","online_only"}`, `{"agents","total"}`,
			bus.Handle(ctx, codec, s.list, append(opts, bus.EmptyMeansObject())...)},
		// Searches only read the index, and take CPU: one per core at once.
		{bus.RegistrySearch, "SearchRequest", `{"results"}`, bus.Handle(ctx, codec, s.search, append(opts, bus.Concurrently(s.nc, runtime.GOMAXPROCS(0)))...)},
	}
	for _, e := range endpoints {
		md := map[string]string{"request": e.request, "reply": e.reply}
		if err := g.AddEndpoint(e.name, e.h, micro.WithEndpointMetadata(md)); err != nil {
			return err
		}
		// The writes also answer on their identity-bound form
		// (<p>.registry.register.<name>): what an agent of a secure server
		// uses, and may use only with its own name.
		if slices.Contains(callerBound, e.name) {
			md["caller"] = "last token"
			if err := g.AddEndpoint(e.name+"-as", e.h, micro.WithEndpointSubject(e.name+".*"), micro.WithEndpointMetadata(md)); err != nil {
				return err
			}
		}
	}
	return nil
}

// callerBound are the endpoints with an identity-bound form.
var callerBound = []string{bus.RegistryRegister, bus.RegistryDeregister, bus.RegistryHeartbeat}

// checkCaller refuses a write to name on the identity-bound form of
// endpoint by any other caller. It returns the caller, "" on the plain form.
func (s *Service) checkCaller(r micro.Request, endpoint, name string) (string, error) {
	caller, err := bus.Caller(s.bus.Subjects().Registry(endpoint), r.Subject())
	if err != nil {
		return "", err
	}
	if caller != "" && caller != name {
		return "", protocol.Errorf(protocol.ErrForbidden, "%s may not %s agent %q: an identity acts only for its own name", caller, endpoint, name)
	}
	return caller, nil
}

// limitBody refuses a body over max bytes before it is parsed.
func (s *Service) limitBody(max int, what string, h micro.Handler) micro.Handler {
	return micro.HandlerFunc(func(r micro.Request) {
		if n := len(r.Data()); n > max {
			_ = bus.RespondError(r, protocol.Errorf(protocol.ErrTooLarge, "%s of %d bytes is over the limit of %d bytes", what, n, max))
			return
		}
		h.Handle(r)
	})
}

// identity is who registers: the reply subject without its last token,
// which nats.go makes unique per connection (_INBOX.<id>.<token>). A reply
// subject of fewer than three tokens is its own identity.
func identity(reply string) string {
	if strings.Count(reply, ".") < 2 {
		return reply
	}
	return reply[:strings.LastIndexByte(reply, '.')]
}

func (s *Service) register(ctx context.Context, r micro.Request, card *protocol.AgentCard) (*protocol.RegisterReply, error) {
	if err := card.Validate(); err != nil {
		return nil, err
	}
	if n := len(card.Description); n > s.cfg.MaxDescriptionBytes {
		return nil, protocol.Errorf(protocol.ErrTooLarge, "description of %d bytes is over the limit of %d bytes", n, s.cfg.MaxDescriptionBytes)
	}
	caller, err := s.checkCaller(r, bus.RegistryRegister, card.Name)
	if err != nil {
		return nil, err
	}
	owner := identity(r.Reply())
	if caller != "" {
		owner = "id:" + caller // the authenticated identity, not a reply prefix it chose
	}
	if err := s.checkQuota(owner, card.Name); err != nil {
		return nil, err
	}
	// Registering counts as a heartbeat; it goes first so that the card is
	// online the moment it appears.
	beatRev, err := s.presence.Put(ctx, card.Name, nil)
	if err != nil {
		return nil, kvError("record heartbeat", err)
	}
	rec, rev, err := s.store(ctx, card, owner)
	if err != nil {
		return nil, err
	}
	s.settle(ctx, func(v *view) bool {
		a, ok := v.agents[card.Name]
		return ok && a.rev >= rev && v.beats[card.Name].rev >= beatRev
	})
	return &protocol.RegisterReply{Name: card.Name, Revision: rev, RegisteredAt: rec.RegisteredAt}, nil
}

func (s *Service) checkQuota(owner, name string) error {
	s.view.mu.RLock()
	defer s.view.mu.RUnlock()
	if a, ok := s.view.agents[name]; ok && a.rec.Owner == owner {
		return nil // an update: no new card for this owner
	}
	if n := s.view.owners[owner]; n >= s.cfg.MaxAgentsPerConn {
		return protocol.Errorf(protocol.ErrQuotaExceeded, "this connection has registered %d agents, the limit is %d", n, s.cfg.MaxAgentsPerConn)
	}
	return nil
}

// store writes the card with compare-and-set, keeping the first
// registration time across updates.
func (s *Service) store(ctx context.Context, card *protocol.AgentCard, owner string) (record, uint64, error) {
	for range casRetries {
		now := time.Now().UTC()
		rec := record{AgentCard: *card, RegisteredAt: now, UpdatedAt: now, Owner: owner}
		var (
			rev uint64
			err error
		)
		e, gerr := s.agents.Get(ctx, card.Name)
		switch {
		case errors.Is(gerr, jetstream.ErrKeyNotFound):
			rev, err = s.agents.Create(ctx, card.Name, bus.Encode(rec))
		case gerr != nil:
			return record{}, 0, kvError("read card", gerr)
		default:
			var old record
			if json.Unmarshal(e.Value(), &old) == nil && !old.RegisteredAt.IsZero() {
				rec.RegisteredAt = old.RegisteredAt
			}
			rev, err = s.agents.Update(ctx, card.Name, bus.Encode(rec), e.Revision())
		}
		if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			continue // another instance wrote the same name meanwhile
		}
		if err != nil {
			return record{}, 0, kvError("write card", err)
		}
		return rec, rev, nil
	}
	return record{}, 0, protocol.Errorf(protocol.ErrConflict, "agent %q is being registered concurrently; retry", card.Name)
}

func (s *Service) deregister(ctx context.Context, r micro.Request, req *protocol.NameRequest) (*empty, error) {
	if err := protocol.CheckName("name", req.Name); err != nil {
		return nil, err
	}
	if req.Incarnation != "" {
		if err := protocol.CheckID("incarnation", req.Incarnation); err != nil {
			return nil, err
		}
	}
	if _, err := s.checkCaller(r, bus.RegistryDeregister, req.Name); err != nil {
		return nil, err
	}
	if err := s.deleteCard(ctx, req.Name, req.Incarnation); err != nil {
		return nil, err
	}
	if err := s.presence.Delete(ctx, req.Name); err != nil {
		s.log.Warn("registry: delete heartbeat", "agent", req.Name, "err", err)
	}
	s.settle(ctx, func(v *view) bool { _, ok := v.agents[req.Name]; return !ok })
	return &empty{}, nil
}

// deleteCard deletes name's card, with compare-and-set: when incarnation is
// given, only while the card is still that incarnation's. A replacement that
// registered meanwhile keeps the name (409 conflict to the leaving process).
func (s *Service) deleteCard(ctx context.Context, name, incarnation string) error {
	for range casRetries {
		e, err := s.agents.Get(ctx, name)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return protocol.Errorf(protocol.ErrNotFound, "no agent named %q is registered", name)
		}
		if err != nil {
			return kvError("read card", err)
		}
		var rec record
		if incarnation != "" && json.Unmarshal(e.Value(), &rec) == nil &&
			rec.Incarnation != "" && rec.Incarnation != incarnation {
			return protocol.Errorf(protocol.ErrConflict,
				"agent %q is now registered by another incarnation (%s, since %s), not %s: its card is kept",
				name, rec.Incarnation, rec.UpdatedAt.Format(time.RFC3339), incarnation)
		}
		err = s.agents.Delete(ctx, name, jetstream.LastRevision(e.Revision()))
		if bus.WrongLastSeq(err) {
			continue // registered again meanwhile: look again
		}
		if err != nil {
			return kvError("delete card", err)
		}
		return nil
	}
	return protocol.Errorf(protocol.ErrConflict, "agent %q is being registered concurrently; retry", name)
}

func (s *Service) heartbeat(ctx context.Context, r micro.Request, req *protocol.NameRequest) (*protocol.HeartbeatReply, error) {
	if err := protocol.CheckName("name", req.Name); err != nil {
		return nil, err
	}
	if _, err := s.checkCaller(r, bus.RegistryHeartbeat, req.Name); err != nil {
		return nil, err
	}
	incarnation, ok := s.incarnation(req.Name)
	if !ok {
		info, err := s.lookup(ctx, req.Name)
		if err != nil {
			return nil, err
		}
		incarnation = info.Incarnation
	}
	if _, err := s.presence.Put(ctx, req.Name, nil); err != nil {
		// The heartbeat is proof of life even when the presence bucket
		// cannot store it (its stream electing a leader in a cluster): this
		// instance keeps it, so the agent is not taken for gone meanwhile.
		// The agent still hears of the failure.
		s.view.beatLocally(req.Name, time.Now())
		return nil, kvError("record heartbeat (kept in this registry instance's memory)", err)
	}
	return &protocol.HeartbeatReply{TTL: protocol.Duration(s.cfg.HeartbeatTTL), Incarnation: incarnation}, nil
}

func (s *Service) get(ctx context.Context, _ micro.Request, req *protocol.NameRequest) (*protocol.AgentInfo, error) {
	if err := protocol.CheckName("name", req.Name); err != nil {
		return nil, err
	}
	return s.lookup(ctx, req.Name)
}

func (s *Service) list(_ context.Context, _ micro.Request, req *protocol.ListRequest) (*protocol.ListReply, error) {
	if req.Offset < 0 {
		return nil, protocol.Errorf(protocol.ErrInvalid, "offset %d must not be negative", req.Offset)
	}
	if req.Limit < 0 || req.Limit > MaxListLimit {
		return nil, protocol.Errorf(protocol.ErrInvalid, "limit %d outside 1..%d (0 means 100)", req.Limit, MaxListLimit)
	}
	limit := cmp.Or(req.Limit, 100)
	now := time.Now()
	s.view.mu.RLock()
	defer s.view.mu.RUnlock()
	reply := &protocol.ListReply{Agents: []protocol.AgentInfo{}}
	for _, name := range s.view.namesLocked() {
		info := s.infoLocked(name, now)
		if req.OnlineOnly && !info.Online {
			continue
		}
		if reply.Total >= req.Offset && len(reply.Agents) < limit {
			reply.Agents = append(reply.Agents, info)
		}
		reply.Total++
	}
	return reply, nil
}

// incarnation is the incarnation name's card was registered with, as this
// instance's view has it; ok is false when the view does not know the name.
func (s *Service) incarnation(name string) (_ string, ok bool) {
	s.view.mu.RLock()
	defer s.view.mu.RUnlock()
	a, ok := s.view.agents[name]
	if !ok {
		return "", false
	}
	return a.rec.Incarnation, true
}

// lookup finds an agent in the view, or in KV when this instance has not
// seen it yet (another instance registered it a moment ago).
func (s *Service) lookup(ctx context.Context, name string) (*protocol.AgentInfo, error) {
	now := time.Now()
	s.view.mu.RLock()
	if _, ok := s.view.agents[name]; ok {
		info := s.infoLocked(name, now)
		s.view.mu.RUnlock()
		return &info, nil
	}
	s.view.mu.RUnlock()

	e, err := s.agents.Get(ctx, name)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, protocol.Errorf(protocol.ErrNotFound, "no agent named %q is registered", name)
	}
	if err != nil {
		return nil, kvError("read card", err)
	}
	var rec record
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return nil, protocol.Errorf(protocol.ErrInternal, "stored card of %q is unreadable: %v", name, err)
	}
	info := &protocol.AgentInfo{AgentCard: rec.AgentCard}
	if b, err := s.presence.Get(ctx, name); err == nil {
		info.LastSeen = b.Created().UTC()
		info.Online = now.Sub(b.Created()) < s.cfg.HeartbeatTTL
	}
	return info, nil
}

// infoLocked builds the get/list view of a known agent; s.view.mu held.
func (s *Service) infoLocked(name string, now time.Time) protocol.AgentInfo {
	info := protocol.AgentInfo{AgentCard: s.view.agents[name].rec.AgentCard}
	if b, ok := s.view.beats[name]; ok {
		info.LastSeen = b.at.UTC()
		info.Online = now.Sub(b.at) < s.cfg.HeartbeatTTL
	}
	return info
}

// settle waits, briefly, until this instance's view reflects a write. The
// write is durable either way; waiting only gives read-your-writes.
func (s *Service) settle(ctx context.Context, cond func(v *view) bool) {
	ctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	if err := s.view.waitFor(ctx, cond); err != nil {
		s.log.Debug("registry: write not yet visible in this instance", "err", err)
	}
}

func kvError(op string, err error) error {
	return protocol.Errorf(protocol.ErrUnavailable, "%s: %v", op, err)
}
