package orchestrator

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/internal/backoff"
	"github.com/ioa-nats/ioa/telemetry"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/segmentio/encoding/json"
)

// newID returns a short random id that is valid in subjects.
func newID(prefix string) string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return idFrom(prefix, b)
}

// idFrom spells 12 bytes (random, or a hash) as an id after prefix.
func idFrom(prefix string, b []byte) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	out := make([]byte, 12)
	for i := range out {
		out[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return prefix + string(out)
}

// goalID is the id of a new goal: derived from the submitter and the
// idempotency key when there is one, else random and, when it can be, in a
// partition this instance owns.
func (s *Service) goalID(req protocol.GoalRequest) string {
	if req.IdempotencyKey != "" {
		return keyedGoalID(req.Submitter, req.IdempotencyKey)
	}
	return s.ownedID("g", "")
}

// parseGoalRequest accepts a GoalRequest object or a plain-text goal, no
// longer than maxGoalBytes.
func (s *Service) parseGoalRequest(data []byte) (protocol.GoalRequest, error) {
	req, err := s.decodeGoalRequest(data)
	if err == nil && len(req.Goal) > s.maxGoalBytes() {
		return req, protocol.Errorf(protocol.ErrTooLarge, "goal of %d bytes is over the limit of %d bytes for a goal "+
			"(an eighth of max_message_bytes: the chat's messages restate it); put long data in a file the agents read", len(req.Goal), s.maxGoalBytes())
	}
	return req, err
}

// maxGoalBytes bounds a goal's text: the start message carries it twice
// beside the team's cards, and a launcher's plan restates it in its
// clauses, its tasks and their descriptions. A longer goal made moves that
// were over the message limit, and the goal ended having done nothing.
func (s *Service) maxGoalBytes() int { return s.b.Config().MaxMessageBytes / 8 }

// decodeGoalRequest reads a GoalRequest object or a plain-text goal.
func (s *Service) decodeGoalRequest(data []byte) (protocol.GoalRequest, error) {
	var req protocol.GoalRequest
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return req, protocol.Errorf(protocol.ErrInvalid, "empty goal: send the goal as text or as {\"goal\":\"...\"}")
	}
	if bytes.Equal(trimmed, []byte("null")) {
		// docs/protocol.md: a JSON null body is rejected, not taken as a goal.
		return req, protocol.Errorf(protocol.ErrInvalid, "body is null: send the goal as text or as {\"goal\":\"...\"}")
	}
	if trimmed[0] == '{' {
		if err := s.codec.Decode(data, &req); err != nil {
			return req, err
		}
		req.Goal = strings.TrimSpace(req.Goal)
		return req, req.Validate()
	}
	// Any other body is a goal in text, checked once for size and encoding
	// before it is read.
	if len(data) > s.b.Config().MaxMessageBytes {
		return req, protocol.Errorf(protocol.ErrTooLarge, "goal of %d bytes is over the limit of %d", len(data), s.b.Config().MaxMessageBytes)
	}
	if !utf8.Valid(trimmed) {
		return req, protocol.Errorf(protocol.ErrInvalid, "goal is not valid UTF-8")
	}
	switch scalar := jsonScalar(trimmed); {
	case trimmed[0] == '[' && json.Valid(trimmed):
		// A list of goals, or a request in the wrong shape: taken as text,
		// "[1,2]" was a goal no agent could make sense of.
		return req, protocol.Errorf(protocol.ErrInvalid, "body is a JSON array: send one goal as text or as {\"goal\":\"...\"}")
	case scalar != "":
		// "42" or "true": JSON, but no goal; taken as text, no agent could
		// make sense of it, and the same mistake as an array.
		return req, protocol.Errorf(protocol.ErrInvalid, "body is a JSON %s: send the goal as text or as {\"goal\":\"...\"}", scalar)
	case trimmed[0] == '"' && json.Unmarshal(trimmed, &req.Goal) == nil:
		// A goal sent as a JSON string ('"Convert 5 km to miles"') is its text.
	default:
		req.Goal = string(trimmed)
	}
	req.Goal = strings.TrimSpace(req.Goal)
	return req, req.Validate()
}

// jsonScalar names the JSON number or boolean that b is, or is "".
func jsonScalar(b []byte) string {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return ""
	}
	switch v.(type) {
	case float64:
		return "number"
	case bool:
		return "boolean"
	}
	return ""
}

// handleSubmit takes a goal beside the endpoint: recording it waits on KV,
// and submissions must not queue behind each other.
func (s *Service) handleSubmit(ctx context.Context, r micro.Request) {
	data, replyTo := r.Data(), r.Reply()
	// A sub-goal submitted from a task continues the task's trace.
	parent := telemetry.TraceParent(telemetry.Extract(ctx, nats.Header(r.Headers())))
	caller, err := bus.Caller(s.subj.Goal(bus.GoalSubmit), r.Subject())
	if err != nil {
		_ = bus.RespondError(r, err)
		return
	}
	// Each submission holds a goroutine (a waiting one until its goal
	// ends): they are bounded per caller and in all.
	if !s.submits.acquire(caller) {
		_ = bus.RespondError(r, protocol.Errorf(protocol.ErrQuotaExceeded,
			"too many submissions in flight (at most %d per caller, %d in all); wait for some to end", maxSubmitsPerCaller, maxSubmits))
		return
	}
	s.wg.Go(func() {
		defer s.submits.release(caller)
		s.submit(ctx, caller, data, replyTo, parent)
	})
}

func (s *Service) submit(ctx context.Context, caller string, data []byte, replyTo, traceParent string) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("submit panic", "panic", p)
			_ = bus.RespondErrorLater(s.nc, replyTo, protocol.Errorf(protocol.ErrInternal, "internal error: %v", p))
		}
	}()
	req, err := s.parseGoalRequest(data)
	if err != nil {
		_ = bus.RespondErrorLater(s.nc, replyTo, err)
		return
	}
	req.Submitter = caller
	// A waiting submitter is answered by whichever orchestrator instance
	// ends the goal: the reply subject is kept in the goal's record, so the
	// answer comes even if this instance is gone by then.
	wait := ""
	if req.Wait {
		wait = replyTo
	}
	fail := func(err error) {
		if protocol.AsError(err).Status >= 500 {
			// Not the submitter's fault: an operator should see it.
			s.log.Warn("submission failed", "submitter", caller, "err", err)
		}
		_ = bus.RespondErrorLater(s.nc, replyTo, err)
	}
	if req.IdempotencyKey != "" {
		if done, err := s.resubmitted(ctx, req, wait, replyTo); err != nil {
			fail(err)
			return
		} else if done {
			return
		}
	}
	st, err := s.createGoal(ctx, req, wait, traceParent)
	if req.IdempotencyKey != "" && errors.Is(err, jetstream.ErrKeyExists) {
		// The same key sent twice at once: the other copy created the goal.
		if done, rerr := s.resubmitted(ctx, req, wait, replyTo); done {
			if err = rerr; err == nil {
				return
			}
		}
	}
	if err != nil {
		fail(err)
		return
	}
	if wait == "" {
		// The reply says the timeout in force: a larger one asked for was
		// clamped to limits.goal_timeout.
		_ = bus.RespondLater(s.nc, replyTo, protocol.SubmitReply{GoalID: st.GoalID, Status: protocol.GoalAccepted, Timeout: st.Timeout})
	}
}

// createGoal validates budgets, records the goal and starts it. A goal is
// one trace: its root span starts here (under traceParent, a sub-goal's
// task span, if any) and ends in finishGoal.
func (s *Service) createGoal(ctx context.Context, req protocol.GoalRequest, replyTo, traceParent string) (_ protocol.GoalStatus, err error) {
	now := time.Now().UTC()
	st := protocol.GoalStatus{
		GoalID: s.goalID(req), Status: protocol.GoalAccepted, Goal: req.Goal, ReplyTo: replyTo,
		Launcher: req.Launcher, Team: slices.Clone(req.Team), CreatedAt: now, UpdatedAt: now,
		MaxTurns: s.cfg.MaxTurns, MaxDepth: s.cfg.MaxDepth, Timeout: protocol.Duration(s.cfg.GoalTimeout),
		Children: []string{}, Submitter: req.Submitter, ApproveBy: req.ApproveBy,
	}
	if st.Launcher == "" {
		st.Launcher = s.cfg.Coordinator
	}
	if st.Team == nil {
		st.Team = []string{}
	}
	if req.MaxTurns > 0 {
		st.MaxTurns = min(req.MaxTurns, s.cfg.MaxTurns)
	}
	if req.MaxDepth != nil {
		st.MaxDepth = min(*req.MaxDepth, s.cfg.MaxDepth)
	}
	if req.Timeout > 0 {
		st.Timeout = protocol.Duration(min(req.Timeout.D(), s.cfg.GoalTimeout))
	}
	if len(st.Team) > 0 && len(dedupe(append([]string{st.Launcher}, st.Team...))) > s.cfg.MaxTeamSize {
		return st, protocol.Errorf(protocol.ErrInvalid, "team of %d is over the limit of %d members", len(st.Team)+1, s.cfg.MaxTeamSize)
	}
	if st.ApproveBy != "" {
		card, err := s.agentInfo(ctx, st.ApproveBy)
		if errors.Is(err, protocol.ErrNotFound) || (err == nil && card.Type != protocol.TypeHuman) {
			return st, protocol.Errorf(protocol.ErrInvalid, "approve_by %s is not a registered person (an agent of type human)", st.ApproveBy)
		}
		if err != nil && !errors.Is(err, protocol.ErrConflict) { // offline is fine: the wait is durable
			return st, err
		}
	}
	st.Deadline = now.Add(st.Timeout.D())
	if telemetry.Enabled() {
		gctx, span := s.startGoalSpan(telemetry.WithTraceParent(ctx, traceParent), st)
		st.TraceParent = telemetry.TraceParent(gctx)
		defer func() {
			if err != nil {
				s.goalSpans.CompareAndDelete(st.GoalID, span)
				telemetry.Fail(span, err)
				span.End()
			}
		}()
	}
	if p := req.Parent; p != nil {
		parent, err := s.readGoal(ctx, p.GoalID)
		if err != nil {
			return st, err
		}
		// Membership first: a caller outside the team learns nothing of the
		// parent's state.
		if c := req.Submitter; c != "" && c != parent.Launcher && !slices.Contains(parent.Team, c) {
			return st, protocol.Errorf(protocol.ErrForbidden, "%s is not a member of the team of goal %s", c, parent.GoalID)
		}
		if protocol.GoalEnded(parent.Status) {
			return st, protocol.Errorf(protocol.ErrConflict, "parent goal %s has already ended (%s)", p.GoalID, parent.Status)
		}
		if parent.MaxDepth < 1 {
			return st, protocol.Errorf(protocol.ErrDepthExceeded, "goal %s is at depth %d and may not nest further (max_depth reached)", parent.GoalID, parent.Depth)
		}
		st.ParentGoalID, st.Parent = parent.GoalID, p
		st.Depth = parent.Depth + 1
		st.MaxDepth = min(st.MaxDepth, parent.MaxDepth-1)
		if req.MaxDepth == nil {
			st.MaxDepth = parent.MaxDepth - 1
		}
		if st.Deadline.After(parent.Deadline) {
			st.Deadline = parent.Deadline
		}
	}
	// The agents the goal names must be there now: refused here, before
	// anything is recorded, the goal would otherwise fail at its team-up.
	if err := s.checkNamed(ctx, st); err != nil {
		return st, err
	}
	// A goal this instance launches at once is recorded as forming: the
	// launch's own write of that status would be a second round trip in a
	// row on the submitter's path. One forwarded to the partition's owner
	// (or waiting for one) stays accepted until it is launched.
	if s.mine(st.GoalID) {
		st.Status = protocol.GoalForming
	}
	// Indexed first: a goal recorded is always found by a takeover.
	if err := s.markLive(ctx, st.GoalID); err != nil {
		return st, fmt.Errorf("orchestrator: index goal: %w", err)
	}
	data := bus.Encode(st)
	rev, err := s.settle(ctx, "goal record "+st.GoalID, func(ctx context.Context) (uint64, error) {
		return s.goals.Create(ctx, st.GoalID, data)
	}, kvStored(s.goals, st.GoalID, data))
	if err != nil {
		return st, fmt.Errorf("orchestrator: record goal: %w", err)
	}
	s.known.put(st.GoalID, st, data, rev)
	s.event(protocol.GoalEvent{GoalID: st.GoalID, Kind: protocol.EventAccepted})
	s.cfg.Metrics.GoalSubmitted()
	if st.ParentGoalID != "" {
		_, err := s.updateGoal(ctx, st.ParentGoalID, func(p *protocol.GoalStatus) error {
			p.Children = append(p.Children, st.GoalID)
			return nil
		})
		if err != nil {
			s.log.Warn("link child goal", "parent", st.ParentGoalID, "child", st.GoalID, "err", err)
		}
		s.event(protocol.GoalEvent{GoalID: st.ParentGoalID, Kind: protocol.EventSubgoal, Child: st.GoalID, CommID: st.Parent.CommID})
	}
	s.watchLaunch(st.GoalID)
	s.startLaunch(ctx, st)
	return st, nil
}

// namedAsk bounds each registry request of checkNamed.
const namedAsk = 2 * time.Second

// checkNamed refuses a goal that names an agent (in its team, or as its
// launcher) the registry does not know (not_found) or lists as offline
// (conflict). Expected agents (the coordinator, Config.Expect: this server's
// own) are not checked: one of them restarting is waited for by the team-up.
// A goal that names nobody else, the hot path, costs no request; an answer
// about an agent found online within cardFresh is taken again, and saves the
// team-up its own request. A registry that does not answer refuses nothing:
// the team-up asks again.
func (s *Service) checkNamed(ctx context.Context, st protocol.GoalStatus) error {
	var names []string
	for _, n := range dedupe(append(slices.Clone(st.Team), st.Launcher)) {
		if !s.expected[n] {
			names = append(names, n)
		}
	}
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Go(func() { errs[i] = s.checkAgent(ctx, n) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// checkAgent is checkNamed for one name.
func (s *Service) checkAgent(ctx context.Context, name string) error {
	a, err := s.lookupAgent(ctx, name, namedAsk)
	if err != nil {
		s.log.Debug("submit: registry did not answer about a named agent; the team-up checks it", "agent", name, "err", err)
		return nil
	}
	switch {
	case !a.registered:
		return protocol.Errorf(protocol.ErrNotFound, "no agent named %q is registered", name)
	case !a.info.Online && !a.info.LastSeen.IsZero():
		return protocol.Errorf(protocol.ErrConflict, "agent %q is registered but offline (last seen %s, %s ago)", name,
			a.info.LastSeen.UTC().Format(time.RFC3339), time.Since(a.info.LastSeen).Round(time.Second))
	case !a.info.Online:
		return protocol.Errorf(protocol.ErrConflict, "agent %q is registered but offline", name)
	}
	return nil
}

// launch asks the launcher to form the team. The team-up request it makes
// back to the orchestrator starts the chat and marks the goal running.
func (s *Service) launch(ctx context.Context, st protocol.GoalStatus) {
	// st was read or written just before (a goal recorded as forming at
	// submit, or one resumed after a takeover); an accepted one is marked.
	if st.Status != protocol.GoalForming {
		if _, err := s.updateGoal(ctx, st.GoalID, func(g *protocol.GoalStatus) error {
			if g.Status != protocol.GoalAccepted && g.Status != protocol.GoalForming {
				return errSkip
			}
			g.Status = protocol.GoalForming
			return nil
		}); err != nil {
			if !errors.Is(err, errSkip) {
				// Left as it is, the goal would wait in accepted for ever.
				s.finishOrRetry(ctx, st.GoalID, protocol.GoalFailed, "", "could not start the goal: "+err.Error(), nil)
			}
			return
		}
	}
	subject, err := s.subj.AgentLaunchSubject(st.Launcher)
	if err != nil {
		s.finishOrRetry(ctx, st.GoalID, protocol.GoalFailed, "", "bad launcher: "+err.Error(), nil)
		return
	}
	lctx, cancel := context.WithTimeout(ctx, s.cfg.LaunchTimeout)
	defer cancel()
	req := protocol.LaunchRequest{GoalID: st.GoalID, Goal: st.Goal, Team: st.Team, MaxTurns: st.MaxTurns, Depth: st.MaxDepth}
	// A busy launcher (429) is asked again until the launch timeout; one
	// nobody answers for (restarting, or reconnecting to another node) for
	// launcherGrace.
	// An expected launcher (the coordinator, a name in Config.Expect) may
	// still be starting: it is waited for up to Config.ExpectTimeout.
	grace := launcherGrace
	if s.expected[st.Launcher] {
		grace = max(grace, s.cfg.ExpectTimeout)
	}
	pace, start := backoff.New(20*time.Millisecond, time.Second), time.Now()
	for {
		// The reply's body is the launcher's business (docs/protocol.md):
		// whether the team formed is read from the goal's record below.
		actx, acancel := context.WithTimeout(lctx, launchAttempt)
		err = bus.RequestHeader(actx, s.nc, subject, telemetry.HeaderOf(st.TraceParent), req, nil)
		acancel()
		// An attempt that gets no answer at all is sent again: a request
		// or its reply is lost when the launcher's or this connection
		// moves to another server. Team-up is idempotent per goal.
		lost := errors.Is(err, context.DeadlineExceeded) && lctx.Err() == nil
		// 503 is transient too, and asked again until the launch timeout: a
		// replica of the coordinator that is stopping gives up the team-up
		// it was forming, and a team-up sent while the partitions' leases
		// move (a NATS node lost) waits up to two lease TTLs for an owner
		// before it answers 503, so a grace counted from the first attempt
		// would already be spent. Team-up is idempotent per goal.
		// (No responders matches 503 too, and has only the grace.)
		absent := errors.Is(err, bus.ErrNoResponders)
		retry := errors.Is(err, protocol.ErrRateLimited) || lost ||
			(errors.Is(err, protocol.ErrUnavailable) && !absent) || (absent && time.Since(start) < grace)
		if err == nil || !retry || !pace.Wait(lctx) {
			break
		}
	}
	teamupErr := ""
	if v, ok := s.teamupFailed.LoadAndDelete(st.GoalID); ok {
		teamupErr = "; its team-up was refused: " + v.(string)
	}
	if err != nil {
		// An earlier attempt whose answer was lost may have formed the team.
		if g, gerr := s.readGoal(ctx, st.GoalID); gerr == nil && (g.CommID != "" || protocol.GoalEnded(g.Status)) {
			return
		}
		reason := fmt.Sprintf("launcher %s could not form a team: %v", st.Launcher, err)
		if errors.Is(err, bus.ErrNoResponders) {
			reason = fmt.Sprintf("launcher %s is not running (no agent answers on %s)", st.Launcher, subject)
		}
		s.finishOrRetry(ctx, st.GoalID, protocol.GoalFailed, "", reason, nil)
		return
	}
	// A launcher that answers without having formed a team would leave the
	// goal forming forever. The copy this instance kept says so without a
	// read when the team-up was formed here (almost always); only a copy
	// without a chat is checked against the record.
	if g, _, ok := s.known.get(st.GoalID); ok && (g.CommID != "" || protocol.GoalEnded(g.Status)) {
		return
	}
	if g, err := s.readGoal(ctx, st.GoalID); err == nil && g.CommID == "" && !protocol.GoalEnded(g.Status) {
		s.finishOrRetry(ctx, st.GoalID, protocol.GoalFailed, "", fmt.Sprintf("launcher %s answered without forming a team%s", st.Launcher, teamupErr), nil)
	}
}

var errSkip = errors.New("skip")

// launcherGrace is how long a launcher that no one answers for is waited
// for: long enough for an agent process to reconnect, short enough that a
// misspelt launcher fails fast.
const launcherGrace = 3 * time.Second

// launchAttempt bounds one launch request within the launch timeout; a
// team-up with its invitations (inviteTimeout) fits in it.
const launchAttempt = 12 * time.Second

func (s *Service) getGoal(ctx context.Context, id string) (protocol.GoalStatus, uint64, error) {
	var st protocol.GoalStatus
	if !protocol.ValidID(id) {
		return st, 0, protocol.Errorf(protocol.ErrInvalid, "goal_id %q is not a valid id", id)
	}
	e, err := s.goals.Get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return st, 0, protocol.Errorf(protocol.ErrNotFound, "no goal %s", id)
	}
	if err != nil {
		return st, 0, protocol.Errorf(protocol.ErrUnavailable, "read goal %s: %v", id, err)
	}
	if err := json.Unmarshal(e.Value(), &st); err != nil {
		return st, 0, fmt.Errorf("goal %s record: %w", id, err)
	}
	return st, e.Revision(), nil
}

// readGoal is getGoal for work that must not fail while the bucket elects
// a leader: an unavailable read is tried again, for up to settleFor.
func (s *Service) readGoal(ctx context.Context, id string) (protocol.GoalStatus, error) {
	pace, t0 := backoff.New(settlePause, settleMaxWait), time.Now()
	for {
		st, _, err := s.getGoal(ctx, id)
		if !errors.Is(err, protocol.ErrUnavailable) || time.Since(t0) > settleFor || !pace.Wait(ctx) {
			return st, err
		}
	}
}

// updateGoal applies fn to the goal's record with compare-and-set, retrying
// on conflicts. fn returning errSkip leaves the record alone. A write whose
// answer is lost is settled by reading the record back (settle); a read that
// fails as unavailable (a cluster electing the bucket's leader) is retried
// too, with a growing pause, for goalUpdateFor in all.
func (s *Service) updateGoal(ctx context.Context, id string, fn func(*protocol.GoalStatus) error) (protocol.GoalStatus, error) {
	// The owner of a goal wrote its record last, almost always: the copy it
	// kept is tried first, and compare-and-set tells when it is not the
	// latest. Only a write that succeeds counts; anything else (fn refusing
	// the kept state included) reads the record as below.
	if st, rev, ok := s.known.get(id); ok && fn(&st) == nil {
		st.UpdatedAt = time.Now().UTC()
		data := bus.Encode(st)
		if nrev, err := s.settle(ctx, "goal record "+id, func(ctx context.Context) (uint64, error) {
			return s.goals.Update(ctx, id, data, rev)
		}, kvStored(s.goals, id, data)); err == nil {
			s.known.put(id, st, data, nrev)
			return st, nil
		}
		s.known.drop(id)
	}
	pace, t0 := backoff.New(10*time.Millisecond, 500*time.Millisecond), time.Now()
	for {
		st, rev, err := s.getGoal(ctx, id)
		if err != nil && !errors.Is(err, protocol.ErrUnavailable) {
			return st, err
		}
		if err == nil {
			if err := fn(&st); err != nil {
				return st, err
			}
			st.UpdatedAt = time.Now().UTC()
			data := bus.Encode(st)
			var nrev uint64
			if nrev, err = s.settle(ctx, "goal record "+id, func(ctx context.Context) (uint64, error) {
				return s.goals.Update(ctx, id, data, rev)
			}, kvStored(s.goals, id, data)); err == nil {
				s.known.put(id, st, data, nrev)
				return st, nil
			}
		}
		if time.Since(t0) > goalUpdateFor || !pace.Wait(ctx) {
			return st, fmt.Errorf("update goal %s: %w", id, err)
		}
	}
}

// goalUpdateFor is how long updateGoal keeps trying: longer than a
// cluster takes to elect a bucket's leader.
const goalUpdateFor = 30 * time.Second

// chatSum is what a goal's result takes from its chat.
type chatSum struct {
	Usage protocol.Usage
	Turns int
	Chat  *protocol.Chat // its final state: the tasks and the parts nobody could do
}

// finishGoal records how a goal ended, publishes its result (which answers
// the submitters that wait), and ends its subtree. It does nothing for a
// goal that has already ended. It returns an error only when the goal's
// record could not be written: the goal has not ended then.
func (s *Service) finishGoal(ctx context.Context, id, status, conclusion, reason string, sum *chatSum) error {
	var ended, awaiting bool
	var outcome string
	var nested map[string]*protocol.GoalResult
	var nestedOf int // the number of children nested was read from
	st, err := s.updateGoal(ctx, id, func(g *protocol.GoalStatus) error {
		// fn runs again on a newer record when a write is refused: what
		// an earlier run found must not outlive it.
		ended, awaiting, outcome = false, false, ""
		if protocol.GoalEnded(g.Status) {
			ended = true
			return errSkip
		}
		// A team's conclusion (sum is its chat) waits for the goal's
		// approver, if it names one: see approval.go.
		if sum != nil && g.Status == protocol.GoalAwaitingApproval {
			awaiting = true
			return errSkip // the chat's end seen again
		}
		if sum != nil && len(g.Children) > 0 && len(g.Children) != nestedOf {
			nested, nestedOf = s.nestedResults(ctx, g), len(g.Children)
		}
		if sum != nil && status == protocol.GoalConcluded && g.ApproveBy != "" {
			g.Result = resultOf(g, status, conclusion, reason, sum, nested)
			g.Status, awaiting = protocol.GoalAwaitingApproval, true
			return nil
		}
		g.Result = resultOf(g, status, conclusion, reason, sum, nested)
		g.Status, g.Outcome, outcome = status, g.Result.Outcome, g.Result.Outcome
		return nil
	})
	if err == nil || errors.Is(err, errSkip) {
		s.unwatchLaunch(id) // ended, or waiting for approval with its chat
		// Why a team-up was refused is kept for the launch's reason, and
		// the launch drops it when it returns; one refused after that (a
		// late retry) would stay until the process ends.
		s.teamupFailed.Delete(id)
	}
	if err == nil && sum != nil {
		s.unlearnDoneInPart(st.CommID, sum.Chat, nested)
	}
	switch {
	case awaiting && err == nil:
		s.approvalRequested(st)
		return nil
	case awaiting && errors.Is(err, errSkip):
		return nil
	case ended || errors.Is(err, errSkip):
		s.unmarkLive(ctx, id)
		return nil
	case err != nil:
		s.log.Warn("finish goal", "goal", id, "err", err)
		return err
	}
	res := *st.Result
	// The goal's span ends before anyone hears of the end: a sub-goal's
	// span must be in its parent's trace by the time the parent's task, which
	// waited on it, ends (a CI run exported the parent's task span first).
	s.endGoalSpan(st)
	// The end event goes out first, on the connection the answer takes, so
	// the stream holds it before anything the answer causes: a sub-goal's
	// end before its parent's task result, for a follower of the goal's
	// tree. It costs no round trip (its acknowledgement is asynchronous).
	kind := map[string]string{
		protocol.GoalConcluded: protocol.EventConcluded, protocol.GoalFailed: protocol.EventFailed,
		protocol.GoalCancelled: protocol.EventCancelled, protocol.GoalTimedOut: protocol.EventTimedOut,
	}[status]
	s.event(protocol.GoalEvent{GoalID: id, Kind: kind, CommID: st.CommID, Result: &res, Usage: &res.Usage, Outcome: res.Outcome})
	// The record is the truth and now says ended: the submitter that waits,
	// wherever its submission was taken, is answered before the rest (the
	// live index and the result stream each cost a round trip, and a
	// restart finds the goal ended in its record).
	if st.ReplyTo != "" {
		_ = bus.RespondLater(s.nc, st.ReplyTo, res)
	}
	s.cfg.Metrics.GoalEnded(status, outcome, time.Since(st.CreatedAt))
	if subject, err := s.subj.GoalResult(id); err == nil {
		if err := s.publishOnce(ctx, s.goalStream, subject, bus.Encode(res), "result."+id); err != nil {
			s.log.Warn("publish goal result", "goal", id, "err", err)
		}
	}
	s.unmarkLive(ctx, id)
	s.log.Info("goal ended", "goal", id, "status", status, "outcome", outcome, "reason", res.Reason, "turns", res.Turns, "elapsed", res.Elapsed)
	// A chat still open (a failed launch racing its team-up) is ended by its
	// referee; children serving this goal's tasks are no longer needed.
	if st.CommID != "" {
		s.endChat(ctx, st.CommID, status, reason, nil)
	}
	for _, child := range st.Children {
		s.wg.Go(func() { s.cancelGoal(ctx, child, protocol.GoalCancelled, "parent goal "+id+" ended") })
	}
	return nil
}

// unlearnDoneInPart records as failed, in the registry's outcomes, each task
// of the chat that its assignee completed through a nested team that did
// only part of it. The referee recorded the task as completed when its
// result was logged, before anyone knew; with the same task id this entry
// replaces that one, and a failure teaches the registry nothing but takes
// back the credit (registry/search: a trip planner whose nested team could
// not write a haiku must not be found for haikus).
func (s *Service) unlearnDoneInPart(comm string, c *protocol.Chat, nested map[string]*protocol.GoalResult) {
	if c == nil || len(nested) == 0 {
		return
	}
	for _, t := range c.Tasks {
		if sub := nested[t.TaskID]; sub != nil && sub.Outcome == protocol.OutcomePartial && t.Status == protocol.TaskCompleted {
			s.recordOutcome(comm, t.Task, protocol.TaskFailed)
		}
	}
}

// nestedResults reads the results of the goal's children that served its
// chat's tasks, by task id (the latest child of a task, when it was tried
// again), so that a task a nested team did only in part makes the goal
// partial. A child that cannot be read is left out: its task counts as the
// chat logged it.
func (s *Service) nestedResults(ctx context.Context, g *protocol.GoalStatus) map[string]*protocol.GoalResult {
	out := map[string]*protocol.GoalResult{}
	for _, id := range g.Children {
		child, err := s.readGoal(ctx, id)
		if err != nil {
			s.log.Warn("read nested goal for the outcome", "goal", g.GoalID, "child", id, "err", err)
			continue
		}
		if p := child.Parent; p != nil && p.CommID == g.CommID && child.Result != nil {
			out[p.TaskID] = child.Result
		}
	}
	return out
}

// finishRetry is how often the sweep tries again to record the end of a
// goal whose record could not be written.
const finishRetry = 5 * time.Second

// pendingEnd is a goal end that could not be recorded yet.
type pendingEnd struct {
	status, reason string
	next           time.Time
	busy           bool
}

// finishOrRetry is finishGoal for goals without a chat under the sweep (a
// failed launch, a cancel, a timeout found at resume): an end that cannot
// be recorded now is kept, and the sweep tries again every finishRetry
// until it is, so the goal ends whatever happens underneath.
func (s *Service) finishOrRetry(ctx context.Context, id, status, conclusion, reason string, sum *chatSum) {
	if err := s.finishGoal(ctx, id, status, conclusion, reason, sum); err != nil {
		s.mu.Lock()
		s.pending[id] = &pendingEnd{status: status, reason: reason, next: time.Now().Add(finishRetry)}
		s.mu.Unlock()
	}
}

// retryEnds runs, from the sweep, the pending goal ends that are due.
func (s *Service) retryEnds(ctx context.Context) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, p := range s.pending {
		if p.busy || now.Before(p.next) {
			continue
		}
		p.busy = true
		s.wg.Go(func() {
			err := s.finishGoal(ctx, id, p.status, "", p.reason, nil)
			s.mu.Lock()
			defer s.mu.Unlock()
			if err == nil {
				delete(s.pending, id)
				return
			}
			p.busy, p.next = false, time.Now().Add(finishRetry)
		})
	}
}

// cancelGoal ends a goal and its subtree with status (cancelled or
// timed_out). A goal with a chat ends through its chat, so the result
// carries the chat's turns and usage.
func (s *Service) cancelGoal(ctx context.Context, id, status, reason string) {
	st, err := s.readGoal(ctx, id)
	if err != nil || protocol.GoalEnded(st.Status) {
		return
	}
	if st.CommID != "" {
		done := make(chan struct{})
		s.endChat(ctx, st.CommID, status, reason, done)
		select {
		case <-done:
		case <-ctx.Done():
		}
	}
	s.finishOrRetry(ctx, id, status, "", reason, nil)
}

// ownGoal reads a goal for the caller of an identity-bound goal endpoint:
// another caller's goal is not found, so no one learns what others run.
func (s *Service) ownGoal(ctx context.Context, r micro.Request, endpoint, goalID string) (protocol.GoalStatus, error) {
	caller, err := bus.Caller(s.subj.Goal(endpoint), r.Subject())
	if err != nil {
		return protocol.GoalStatus{}, err
	}
	st, _, err := s.getGoal(ctx, goalID)
	if err != nil {
		return st, err
	}
	if caller != "" && st.Submitter != caller {
		return protocol.GoalStatus{}, protocol.Errorf(protocol.ErrNotFound, "no goal %s", goalID) // word for word as for an unknown id
	}
	st.ReplyTo = ""
	return st, nil
}

func (s *Service) handleGet(ctx context.Context, r micro.Request, req *protocol.GoalIDRequest) (*protocol.GoalStatus, error) {
	st, err := s.ownGoal(ctx, r, bus.GoalGet, req.GoalID)
	if err != nil {
		return nil, err
	}
	return &st, nil
}

func (s *Service) handleCancel(ctx context.Context, r micro.Request, req *protocol.GoalIDRequest) (*protocol.GoalStatus, error) {
	if _, err := s.ownGoal(ctx, r, bus.GoalCancel, req.GoalID); err != nil {
		return nil, err
	}
	s.cancelGoal(ctx, req.GoalID, protocol.GoalCancelled, "cancelled by request")
	st, _, err := s.getGoal(ctx, req.GoalID)
	if err != nil {
		return nil, err
	}
	st.ReplyTo = ""
	return &st, nil
}

func (s *Service) handleList(ctx context.Context, r micro.Request, req *protocol.GoalListRequest) (*protocol.GoalListReply, error) {
	caller, err := bus.Caller(s.subj.Goal(bus.GoalList), r.Subject())
	if err != nil {
		return nil, err
	}
	switch req.Status {
	case "", "all", "running", "ended":
	default:
		return nil, protocol.Errorf(protocol.ErrInvalid, "status %q is not running, ended or all", req.Status)
	}
	if req.Limit < 0 || req.Limit > 1000 {
		return nil, protocol.Errorf(protocol.ErrInvalid, "limit %d is not between 1 and 1000", req.Limit)
	}
	limit := req.Limit
	if limit == 0 {
		limit = 100
	}
	var ids []string
	if req.Status == "running" {
		if ids, err = s.liveGoals(ctx); err != nil {
			return nil, protocol.Errorf(protocol.ErrUnavailable, "list goals: %v", err)
		}
	} else {
		if ids, err = s.goalIDs(ctx); err != nil {
			return nil, protocol.Errorf(protocol.ErrUnavailable, "list goals: %v", err)
		}
	}
	out := protocol.GoalListReply{Goals: []protocol.GoalStatus{}}
	for _, key := range ids {
		st, _, err := s.getGoal(ctx, key)
		if err != nil {
			continue
		}
		st.ReplyTo = ""
		ended := protocol.GoalEnded(st.Status)
		if (req.Status == "running" && ended) || (req.Status == "ended" && !ended) || (caller != "" && st.Submitter != caller) {
			continue
		}
		out.Goals = append(out.Goals, st)
	}
	slices.SortFunc(out.Goals, func(a, b protocol.GoalStatus) int { return b.CreatedAt.Compare(a.CreatedAt) })
	if len(out.Goals) > limit {
		out.Goals = out.Goals[:limit]
	}
	return &out, nil
}

// event publishes a goal event that only the IOA_GOALS stream holds (the
// goal's steps: accepted, team formed, subgoal, approval, its end): stored
// with an acknowledgement, and sent again if it was not.
func (s *Service) event(ev protocol.GoalEvent) {
	s.publishEvent(ev.GoalID, encodeEvent(ev))
}

// encodeEvent encodes ev, stamped now unless it has a time already.
func encodeEvent(ev protocol.GoalEvent) []byte {
	if ev.At.IsZero() {
		ev.At = time.Now().UTC()
	}
	return bus.Encode(ev)
}

// restate publishes a goal event that restates a logged chat entry
// (message, task_assigned, task_done) without asking for an
// acknowledgement: the entry itself was acknowledged in IOA_CHATS, so an
// event lost while IOA_GOALS has no leader loses nothing the chat's log
// does not hold. The acknowledgement cost as much as storing the event:
// about a tenth of a turn's CPU and latency on two cores.
func (s *Service) restate(ev protocol.GoalEvent) {
	s.restateEncoded(ev.GoalID, encodeEvent(ev))
}

// restateEncoded is restate for an event already encoded.
func (s *Service) restateEncoded(goal string, data []byte) {
	subject, err := s.subj.GoalEvents(goal)
	if err != nil {
		return
	}
	// A plain publish: JetStream stores it and answers nothing. It goes out
	// on the connection the chat's entry and the acknowledged events use,
	// so the stream gets them in the order they were published.
	if err := s.nc.Publish(subject, data); err != nil {
		s.log.Warn("publish goal event", "goal", goal, "err", err)
	}
}

// publishEvent stores an encoded goal event of goal, asynchronously, with
// an acknowledgement (see eventFailed).
func (s *Service) publishEvent(goal string, data []byte) {
	subject, err := s.subj.GoalEvents(goal)
	if err != nil {
		return
	}
	// A message id of its own makes sending it again after a lost ack safe.
	msg := nats.NewMsg(subject)
	msg.Data = data
	msg.Header.Set(jetstream.MsgIDHeader, newID("e"))
	if _, err := s.js.PublishMsgAsync(msg); err != nil {
		s.log.Warn("publish goal event", "goal", goal, "err", err)
	}
}

// eventRetries is how often a goal event that JetStream did not store is
// sent again (after 0.5, 1, 2, 4, 8 s: longer than a leader election).
const eventRetries = 5

// eventFailed sends an event again that was not stored (IOA_GOALS had no
// leader, the ack was lost), with the same message id, until eventRetries.
// A resent event may be stored after a later one: events carry their time.
func (s *Service) eventFailed(m *nats.Msg, err error) {
	id := m.Header.Get(jetstream.MsgIDHeader)
	n := 0
	if v, ok := s.eventTries.Load(id); ok {
		n = v.(int)
	}
	if id == "" || n >= eventRetries || s.closing.Load() {
		s.eventTries.Delete(id)
		s.log.Warn("goal event not stored", "subject", m.Subject, "attempts", n+1, "err", err)
		return
	}
	s.eventTries.Store(id, n+1)
	time.AfterFunc(time.Duration(500<<n)*time.Millisecond, func() {
		if s.closing.Load() {
			s.eventTries.Delete(id)
			return
		}
		msg := nats.NewMsg(m.Subject)
		msg.Data, msg.Header = m.Data, m.Header
		f, err := s.js.PublishMsgAsync(msg)
		if err != nil {
			s.eventFailed(msg, err)
			return
		}
		go func() {
			select {
			case <-f.Ok():
				s.eventTries.Delete(id) // stored at last
			case <-f.Err(): // the error handler has it
			}
		}()
	})
}

func (s *Service) recoverTo(r micro.Request) {
	if p := recover(); p != nil {
		s.log.Error("handler panic", "subject", r.Subject(), "panic", p)
		_ = bus.RespondError(r, protocol.Errorf(protocol.ErrInternal, "internal error: %v", p))
	}
}

func dedupe(names []string) []string {
	var out []string
	for _, n := range names {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// Bounds on requests in flight that each hold a goroutine: a submission
// (one with wait:true until its goal ends) and a history read.
const (
	maxSubmits          = 4096
	maxSubmitsPerCaller = 512
	maxHistory          = 1024
	maxHistoryPerAgent  = 64
	maxWaits            = 4096
)

// inflight counts requests in flight, per caller ("" is the admin, who is
// bounded only by the total) and in all.
type inflight struct {
	total, perCaller int

	mu       sync.Mutex
	n        int
	byCaller map[string]int
}

func (f *inflight) acquire(caller string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.byCaller == nil {
		f.byCaller = map[string]int{}
	}
	if f.n >= f.total || (caller != "" && f.byCaller[caller] >= f.perCaller) {
		return false
	}
	f.n++
	f.byCaller[caller]++
	return true
}

func (f *inflight) release(caller string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n--
	if f.byCaller[caller]--; f.byCaller[caller] <= 0 {
		delete(f.byCaller, caller)
	}
}
