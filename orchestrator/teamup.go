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
	"github.com/nats-io/nats.go/micro"
)

// inviteTimeout bounds how long a member may take to answer an invitation;
// each attempt gets inviteAttempt of it. Invitations are idempotent, so one
// that went to a process killed before it answered is simply sent again and
// reaches the restarted member.
const (
	inviteTimeout = 8 * time.Second
	inviteAttempt = 2 * time.Second
)

// handleTeamup checks the team, invites the members and starts the chat.
func (s *Service) handleTeamup(ctx context.Context, _ micro.Request, req *protocol.TeamupRequest) (*protocol.TeamupReply, error) {
	if err := protocol.CheckID("goal_id", req.GoalID); err != nil {
		return nil, err
	}
	if err := protocol.CheckName("launcher", req.Launcher); err != nil {
		return nil, err
	}
	for _, n := range req.Members {
		if err := protocol.CheckName("member", n); err != nil {
			return nil, err
		}
	}
	// The copy this instance kept of the record it last wrote saves a read:
	// a copy that is not the latest is caught by the compare-and-set that
	// records the team (as a record changed between a read and that write is).
	st, _, ok := s.known.get(req.GoalID)
	if !ok {
		var err error
		if st, err = s.readGoal(ctx, req.GoalID); err != nil {
			return nil, err
		}
	}
	if st.Launcher != req.Launcher {
		return nil, protocol.Errorf(protocol.ErrForbidden, "%s is not the launcher of goal %s", req.Launcher, req.GoalID)
	}
	members := dedupe(append([]string{req.Launcher}, req.Members...))
	if st.CommID != "" {
		return &protocol.TeamupReply{CommID: st.CommID}, nil // a retried request
	}
	if protocol.GoalEnded(st.Status) {
		return nil, protocol.Errorf(protocol.ErrConflict, "goal %s has already ended (%s)", st.GoalID, st.Status)
	}
	if len(members) > s.cfg.MaxTeamSize {
		return nil, protocol.Errorf(protocol.ErrInvalid, "team of %d is over the limit of %d members", len(members), s.cfg.MaxTeamSize)
	}
	cards, err := s.memberCards(ctx, req.Launcher, members)
	if err != nil {
		return nil, err
	}
	// The chat falls in its goal's partition: one owner for both.
	comm := s.ownedID("c", st.GoalID)
	depth := st.MaxDepth
	if err := s.invite(ctx, comm, st, cards, depth); err != nil {
		return nil, err
	}
	// From the moment the goal record names the chat until its start
	// message is logged, a member that read the record and speaks is told
	// to send again, not that there is no such chat.
	s.starting.Store(comm, true)
	defer s.starting.Delete(comm)
	var formed string // the chat an earlier team-up of this goal recorded
	st, err = s.updateGoal(ctx, st.GoalID, func(g *protocol.GoalStatus) error {
		formed = ""
		if g.CommID != "" && !protocol.GoalEnded(g.Status) {
			// A retried request that reached an instance whose copy
			// of the record was older: the chat recorded is the answer.
			formed = g.CommID
			return errSkip
		}
		if protocol.GoalEnded(g.Status) {
			return protocol.Errorf(protocol.ErrConflict, "goal %s ended while its team formed (%s)", g.GoalID, g.Status)
		}
		g.CommID, g.Team, g.Status = comm, members, protocol.GoalRunning
		return nil
	})
	if errors.Is(err, errSkip) && formed != "" {
		return &protocol.TeamupReply{CommID: formed}, nil
	}
	if err != nil {
		return nil, err
	}
	s.unwatchLaunch(st.GoalID)
	s.event(protocol.GoalEvent{GoalID: st.GoalID, Kind: protocol.EventTeamFormed, CommID: comm, Team: members})
	start := protocol.AgentMessage{
		Type: protocol.MsgSystem, Event: protocol.EventStart, ID: "start", Sender: protocol.SystemSender,
		GoalID: st.GoalID, Goal: st.Goal, Content: st.Goal, Launcher: req.Launcher, Team: cards,
		MaxTurns: st.MaxTurns, TeamUpDepth: depth, NextSpeaker: []string{req.Launcher},
	}
	if err := s.startChat(ctx, comm, st, start); err != nil {
		s.wg.Go(func() {
			s.finishOrRetry(ctx, st.GoalID, protocol.GoalFailed, "", "could not start the chat: "+err.Error(), nil)
		})
		return nil, protocol.Errorf(protocol.ErrUnavailable, "start chat: %v", err)
	}
	return &protocol.TeamupReply{CommID: comm}, nil
}

// startRetry is how long the start message is tried while JetStream cannot
// store it, e.g. while a cluster elects a new leader for the chat stream.
const startRetry = 10 * time.Second

// startChat logs the start message, each attempt on the chat's shard. An
// attempt whose ack was lost may still have stored it: the log decides.
func (s *Service) startChat(ctx context.Context, comm string, st protocol.GoalStatus, start protocol.AgentMessage) error {
	var err error
	for t0, pace := time.Now(), backoff.New(50*time.Millisecond, time.Second); ; {
		done := make(chan error, 1)
		s.onShard(ctx, comm, func() {
			rec := &chatRecord{
				Seen: map[string]sentReply{}, TaskSince: map[string]time.Time{},
				Deadline: st.Deadline, Chat: protocol.Chat{GoalID: st.GoalID}, trace: tracedBy(st),
			}
			_, err := s.appendMsg(ctx, comm, rec, start, nil)
			if err == nil {
				s.setActive(comm, rec)
			} else if _, rerr := s.chatFor(ctx, comm); rerr == nil {
				err = nil // logged after all; chatFor keeps the rebuilt record
			}
			done <- err
		})
		select {
		case err = <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
		if err == nil || time.Since(t0) > startRetry {
			return err
		}
		s.log.Warn("start message not stored yet; trying again", "comm", comm, "err", err)
		if !pace.Wait(ctx) {
			return ctx.Err()
		}
	}
}

// memberCards fetches each member's card from the registry and checks it is
// online. A member that is expected (the launcher forming this team, the
// coordinator, a name in Config.Expect) but not yet registered and online is
// waited for, up to Config.ExpectTimeout: it is starting, not missing. Any
// other member must be there now, so a misspelt name fails at once.
func (s *Service) memberCards(ctx context.Context, launcher string, members []string) ([]protocol.AgentCard, error) {
	cards := make([]protocol.AgentCard, len(members))
	errs := make([]error, len(members))
	deadline := time.Now().Add(s.cfg.ExpectTimeout)
	var wg sync.WaitGroup
	for i, name := range members {
		wg.Go(func() {
			wait := name == launcher || s.expected[name]
			for pace := backoff.New(10*time.Millisecond, 200*time.Millisecond); ; {
				cards[i], errs[i] = s.agentInfo(ctx, name)
				// The registry itself may be starting or failing over.
				transient := errors.Is(errs[i], protocol.ErrUnavailable) ||
					(wait && (errors.Is(errs[i], protocol.ErrNotFound) || errors.Is(errs[i], protocol.ErrConflict)))
				if errs[i] == nil || !transient || time.Now().After(deadline) || !pace.Wait(ctx) {
					break
				}
			}
		})
	}
	wg.Wait()
	for _, e := range errs {
		if e != nil {
			return nil, e
		}
	}
	return cards, nil
}

// invite asks every member but the launcher to join; all must accept. A
// member whose card says auto_join has accepted already: it is not asked.
func (s *Service) invite(ctx context.Context, comm string, st protocol.GoalStatus, cards []protocol.AgentCard, depth int) error {
	// One invitation, with the team's cards, encoded once for every member.
	req := bus.Encode(protocol.InviteRequest{
		CommID: comm, GoalID: st.GoalID, Goal: st.Goal, Launcher: st.Launcher,
		Team: cards, MaxTurns: st.MaxTurns, TeamUpDepth: depth,
	})
	errs := make([]error, len(cards))
	var wg sync.WaitGroup
	for i, c := range cards {
		if c.Name == st.Launcher || c.AutoJoin {
			continue
		}
		wg.Go(func() {
			ictx, cancel := context.WithTimeout(ctx, inviteTimeout)
			defer cancel()
			subject, err := s.subj.AgentInviteSubject(c.Name)
			if err != nil {
				errs[i] = err
				return
			}
			// A member restarting (still online in the registry) has no
			// responder for a moment, or took the invitation down with it:
			// ask again until the invitation's time is up.
			var raw json.RawMessage
			for pace := backoff.New(20*time.Millisecond, 500*time.Millisecond); ; {
				actx, acancel := context.WithTimeout(ictx, inviteAttempt)
				err = bus.Request(actx, s.nc, subject, req, &raw)
				acancel()
				retry := errors.Is(err, protocol.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)
				if !retry || !pace.Wait(ictx) {
					break
				}
			}
			errs[i] = inviteAnswer(c.Name, subject, raw, err, s.codec)
		})
	}
	wg.Wait()
	if i := slices.IndexFunc(errs, func(e error) bool { return e != nil }); i >= 0 {
		return errs[i]
	}
	return nil
}

// inviteAnswer is what a member's answer to its invitation (raw, or the
// request's err) means for the team-up: nil for an acceptance, else why
// the team cannot form, in words the launcher can act on.
func inviteAnswer(name, subject string, raw []byte, err error, codec bus.Codec) error {
	var reply protocol.InviteReply
	switch {
	case errors.Is(err, bus.ErrNoResponders):
		return protocol.Errorf(protocol.ErrConflict, "member %s does not listen for invitations on %s (is it running? an agent that joins every team it is put in sets auto_join on its card)", name, subject)
	case errors.Is(err, context.DeadlineExceeded):
		return protocol.Errorf(protocol.ErrConflict, "member %s did not answer the invitation within %s", name, inviteTimeout)
	case err != nil:
		return protocol.Errorf(protocol.ErrConflict, "member %s did not answer the invitation: %v", name, err)
	}
	if derr := codec.Decode(raw, &reply); derr != nil {
		return protocol.Errorf(protocol.ErrConflict, `member %s answered the invitation with %s, not {"accept":true} or {"accept":false,"reason":"…"}: %s`, name, quoteShort(raw), protocol.AsError(derr).Message)
	}
	switch {
	case reply.Accept:
		return nil
	case strings.TrimSpace(reply.Reason) == "":
		return protocol.Errorf(protocol.ErrConflict, "member %s declined", name)
	default:
		return protocol.Errorf(protocol.ErrConflict, "member %s declined: %s", name, reply.Reason)
	}
}

// quoteShort quotes the start of a reply for an error message.
func quoteShort(b []byte) string {
	if len(b) > 80 {
		return strconv.Quote(string(b[:80])) + "…"
	}
	return strconv.Quote(string(b))
}

// asyncTeamup runs a team-up beside the endpoint: it waits on the registry,
// the invitations and the log, and team-ups of different goals must not
// queue behind each other.
func (s *Service) asyncTeamup(ctx context.Context, r micro.Request) {
	s.teamupAt(ctx, r.Subject(), r.Data(), r.Reply(), 0)
}

// teamupAt runs a team-up request that came on subject, at the owner of the
// goal's partition: here, or forwarded there.
func (s *Service) teamupAt(ctx context.Context, subject string, data []byte, replyTo string, hops int) {
	caller, err := bus.Caller(s.subj.Teamup(), subject)
	if err != nil {
		_ = bus.RespondErrorLater(s.nc, replyTo, err)
		return
	}
	s.wg.Go(func() {
		defer func() {
			if p := recover(); p != nil {
				s.log.Error("teamup panic", "panic", p)
				_ = bus.RespondErrorLater(s.nc, replyTo, protocol.Errorf(protocol.ErrInternal, "internal error: %v", p))
			}
		}()
		var req protocol.TeamupRequest
		if err := s.codec.Decode(data, &req); err != nil {
			_ = bus.RespondErrorLater(s.nc, replyTo, err)
			return
		}
		if caller != "" && req.Launcher == "" {
			req.Launcher = caller // the bound form names it already
		}
		if caller != "" && caller != req.Launcher {
			_ = bus.RespondErrorLater(s.nc, replyTo, protocol.Errorf(protocol.ErrForbidden, "%s may not form the team of launcher %s", caller, req.Launcher))
			return
		}
		if err := protocol.CheckID("goal_id", req.GoalID); err != nil {
			_ = bus.RespondErrorLater(s.nc, replyTo, err)
			return
		}
		if !s.mine(req.GoalID) {
			s.route(ctx, req.GoalID, subject, data, replyTo, hops, func(h int) { s.teamupAt(ctx, subject, data, replyTo, h) })
			return
		}
		reply, err := s.handleTeamup(ctx, nil, &req)
		if err != nil {
			// Kept for the goal's reason: a launcher may answer its launch
			// without passing this on. Only while this instance launches
			// the goal: nothing would read it for an ended or unknown goal.
			if s.launchWatched(req.GoalID) {
				s.teamupFailed.Store(req.GoalID, protocol.AsError(err).Message)
			}
			_ = bus.RespondErrorLater(s.nc, replyTo, err)
			return
		}
		s.teamupFailed.Delete(req.GoalID)
		_ = bus.RespondLater(s.nc, replyTo, reply)
	})
}
