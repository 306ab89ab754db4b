package orchestrator

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
)

// newID returns a short random id that is valid in subjects.
func newID(prefix string) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return prefix + string(b)
}

// parseGoalRequest accepts a GoalRequest object or a plain-text goal.
func (s *Service) parseGoalRequest(data []byte) (protocol.GoalRequest, error) {
	var req protocol.GoalRequest
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return req, protocol.Errorf(protocol.ErrInvalid, "empty goal: send the goal as text or as {\"goal\":\"...\"}")
	}
	if bytes.Equal(trimmed, []byte("null")) {
		// PROTOCOL.md: a JSON null body is rejected, not taken as a goal.
		return req, protocol.Errorf(protocol.ErrInvalid, "body is null: send the goal as text or as {\"goal\":\"...\"}")
	}
	if trimmed[0] == '{' {
		if err := s.codec.Decode(data, &req); err != nil {
			return req, err
		}
	} else {
		if len(data) > s.b.Config().MaxMessageBytes {
			return req, protocol.Errorf(protocol.ErrTooLarge, "goal of %d bytes is over the limit of %d", len(data), s.b.Config().MaxMessageBytes)
		}
		if !utf8.Valid(trimmed) {
			return req, protocol.Errorf(protocol.ErrInvalid, "goal is not valid UTF-8")
		}
		req.Goal = string(trimmed)
	}
	req.Goal = strings.TrimSpace(req.Goal)
	return req, req.Validate()
}

// handleSubmit takes a goal beside the endpoint: recording it waits on KV,
// and submissions must not queue behind each other.
func (s *Service) handleSubmit(ctx context.Context, r micro.Request) {
	data, replyTo := r.Data(), r.Reply()
	s.wg.Go(func() { s.submit(ctx, data, replyTo) })
}

func (s *Service) submit(ctx context.Context, data []byte, replyTo string) {
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
	// A waiting submitter is answered from the goal's result subject, so
	// whichever orchestrator instance ends the goal, the reply goes out.
	var (
		results chan *nats.Msg
		sub     *nats.Subscription
	)
	st, err := s.createGoal(ctx, req, func(id string) error {
		if !req.Wait || replyTo == "" {
			return nil
		}
		subject, err := s.subj.GoalResult(id)
		if err != nil {
			return err
		}
		results = make(chan *nats.Msg, 1)
		sub, err = s.nc.ChanSubscribe(subject, results)
		return err
	})
	if err != nil {
		if sub != nil {
			_ = sub.Unsubscribe()
		}
		_ = bus.RespondErrorLater(s.nc, replyTo, err)
		return
	}
	if sub == nil {
		_ = bus.RespondLater(s.nc, replyTo, protocol.SubmitReply{GoalID: st.GoalID, Status: protocol.GoalAccepted})
		return
	}
	// The reply is sent when the goal ends.
	defer sub.Unsubscribe()
	select {
	case m := <-results:
		_ = bus.RespondLater(s.nc, replyTo, m.Data)
	case <-ctx.Done():
		_ = bus.RespondErrorLater(s.nc, replyTo, protocol.Errorf(protocol.ErrUnavailable, "orchestrator shutting down; goal %s goes on: ask goal.get later", st.GoalID))
	}
}

// createGoal validates budgets, records the goal and starts it.
func (s *Service) createGoal(ctx context.Context, req protocol.GoalRequest, beforeStart func(id string) error) (protocol.GoalStatus, error) {
	now := time.Now().UTC()
	st := protocol.GoalStatus{
		GoalID: newID("g"), Status: protocol.GoalAccepted, Goal: req.Goal,
		Launcher: req.Launcher, Team: slices.Clone(req.Team), CreatedAt: now, UpdatedAt: now,
		MaxTurns: s.cfg.MaxTurns, MaxDepth: s.cfg.MaxDepth, Timeout: protocol.Duration(s.cfg.GoalTimeout),
		Children: []string{},
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
	st.Deadline = now.Add(st.Timeout.D())
	if p := req.Parent; p != nil {
		parent, _, err := s.getGoal(ctx, p.GoalID)
		if err != nil {
			return st, err
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
	if beforeStart != nil {
		if err := beforeStart(st.GoalID); err != nil {
			return st, err
		}
	}
	if _, err := s.goals.Create(ctx, st.GoalID, bus.Encode(st)); err != nil {
		return st, fmt.Errorf("orchestrator: record goal: %w", err)
	}
	s.event(protocol.GoalEvent{GoalID: st.GoalID, Kind: protocol.EventAccepted})
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
	s.wg.Go(func() { s.launch(ctx, st) })
	return st, nil
}

// launch asks the launcher to form the team. The team-up request it makes
// back to the orchestrator starts the chat and marks the goal running.
func (s *Service) launch(ctx context.Context, st protocol.GoalStatus) {
	if _, err := s.updateGoal(ctx, st.GoalID, func(g *protocol.GoalStatus) error {
		if g.Status != protocol.GoalAccepted && g.Status != protocol.GoalForming {
			return errSkip
		}
		g.Status = protocol.GoalForming
		return nil
	}); err != nil {
		if !errors.Is(err, errSkip) {
			// Left as it is, the goal would wait in accepted for ever.
			s.finishGoal(ctx, st.GoalID, protocol.GoalFailed, "", "could not start the goal: "+err.Error(), nil)
		}
		return
	}
	subject, err := s.subj.AgentLaunchSubject(st.Launcher)
	if err != nil {
		s.finishGoal(ctx, st.GoalID, protocol.GoalFailed, "", "bad launcher: "+err.Error(), nil)
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
	backoff, start := 20*time.Millisecond, time.Now()
	for {
		var reply protocol.LaunchReply
		err = bus.Request(lctx, s.nc, subject, req, &reply)
		retry := errors.Is(err, protocol.ErrRateLimited) ||
			(errors.Is(err, bus.ErrNoResponders) && time.Since(start) < grace)
		if err == nil || !retry || lctx.Err() != nil {
			break
		}
		select {
		case <-lctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
	if err != nil {
		reason := fmt.Sprintf("launcher %s could not form a team: %v", st.Launcher, err)
		if errors.Is(err, bus.ErrNoResponders) {
			reason = fmt.Sprintf("launcher %s is not running (no agent answers on %s)", st.Launcher, subject)
		}
		s.finishGoal(ctx, st.GoalID, protocol.GoalFailed, "", reason, nil)
		return
	}
	// A launcher that answers without having formed a team would leave the
	// goal forming forever.
	if g, _, err := s.getGoal(ctx, st.GoalID); err == nil && g.CommID == "" && !protocol.GoalEnded(g.Status) {
		s.finishGoal(ctx, st.GoalID, protocol.GoalFailed, "", fmt.Sprintf("launcher %s answered without forming a team", st.Launcher), nil)
	}
}

var errSkip = errors.New("skip")

// launcherGrace is how long a launcher that no one answers for is waited
// for: long enough for an agent process to reconnect, short enough that a
// misspelt launcher fails fast.
const launcherGrace = 3 * time.Second

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

// updateGoal applies fn to the goal's record with compare-and-set, retrying
// on conflicts. fn returning errSkip leaves the record alone.
// A read that fails as unavailable (a cluster electing the bucket's leader)
// is retried too, with a growing pause, for about ten seconds in all.
func (s *Service) updateGoal(ctx context.Context, id string, fn func(*protocol.GoalStatus) error) (protocol.GoalStatus, error) {
	pause := 10 * time.Millisecond
	for attempt := 0; ; attempt++ {
		st, rev, err := s.getGoal(ctx, id)
		if err != nil && !errors.Is(err, protocol.ErrUnavailable) {
			return st, err
		}
		if err == nil {
			if err := fn(&st); err != nil {
				return st, err
			}
			st.UpdatedAt = time.Now().UTC()
			if _, err = s.goals.Update(ctx, id, bus.Encode(st), rev); err == nil {
				return st, nil
			}
		}
		if attempt >= 25 || ctx.Err() != nil {
			return st, fmt.Errorf("update goal %s: %w", id, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
		pause = min(2*pause, 500*time.Millisecond)
	}
}

// chatSum is what a goal's result takes from its chat.
type chatSum struct {
	Usage protocol.Usage
	Turns int
	Chat  *protocol.Chat // its final state: the tasks and the parts nobody could do
}

// finishGoal records how a goal ended, publishes its result (which answers
// the submitters that wait), and ends its subtree. It does nothing for a
// goal that has already ended.
func (s *Service) finishGoal(ctx context.Context, id, status, conclusion, reason string, sum *chatSum) {
	var usage protocol.Usage
	var turns int
	var chat *protocol.Chat
	if sum != nil {
		usage, turns, chat = sum.Usage, sum.Turns, sum.Chat
	}
	outcome, why, undone := protocol.GoalOutcome(status, chat)
	if why != "" {
		if reason != "" {
			reason += "; "
		}
		reason += why
	}
	var ended bool
	st, err := s.updateGoal(ctx, id, func(g *protocol.GoalStatus) error {
		if protocol.GoalEnded(g.Status) {
			ended = true
			return errSkip
		}
		g.Status = status
		g.Result = &protocol.GoalResult{
			GoalID: g.GoalID, Status: status, Conclusion: conclusion, Reason: reason, CommID: g.CommID,
			Turns: turns, Usage: usage, Elapsed: protocol.Duration(time.Since(g.CreatedAt).Round(time.Millisecond)),
			Outcome: outcome, Undone: undone,
		}
		g.Outcome = outcome
		return nil
	})
	if ended || err != nil {
		if err != nil && !errors.Is(err, errSkip) {
			s.log.Warn("finish goal", "goal", id, "err", err)
		}
		return
	}
	res := *st.Result
	kind := map[string]string{
		protocol.GoalConcluded: protocol.EventConcluded, protocol.GoalFailed: protocol.EventFailed,
		protocol.GoalCancelled: protocol.EventCancelled, protocol.GoalTimedOut: protocol.EventTimedOut,
	}[status]
	s.event(protocol.GoalEvent{GoalID: id, Kind: kind, CommID: st.CommID, Result: &res, Usage: &res.Usage, Outcome: res.Outcome})
	if subject, err := s.subj.GoalResult(id); err == nil {
		if _, err := s.js.Publish(ctx, subject, bus.Encode(res), jetstream.WithMsgID("result."+id)); err != nil {
			s.log.Warn("publish goal result", "goal", id, "err", err)
		}
	}
	s.log.Info("goal ended", "goal", id, "status", status, "outcome", outcome, "reason", reason, "turns", res.Turns, "elapsed", res.Elapsed)
	// A chat still open (a failed launch racing its team-up) is ended by its
	// referee; children serving this goal's tasks are no longer needed.
	if st.CommID != "" {
		s.endChat(ctx, st.CommID, status, reason, nil)
	}
	for _, child := range st.Children {
		s.wg.Go(func() { s.cancelGoal(ctx, child, protocol.GoalCancelled, "parent goal "+id+" ended") })
	}
}

// cancelGoal ends a goal and its subtree with status (cancelled or
// timed_out). A goal with a chat ends through its chat, so the result
// carries the chat's turns and usage.
func (s *Service) cancelGoal(ctx context.Context, id, status, reason string) {
	st, _, err := s.getGoal(ctx, id)
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
	s.finishGoal(ctx, id, status, "", reason, nil)
}

func (s *Service) handleGet(ctx context.Context, _ micro.Request, req *protocol.GoalIDRequest) (*protocol.GoalStatus, error) {
	st, _, err := s.getGoal(ctx, req.GoalID)
	if err != nil {
		return nil, err
	}
	return &st, nil
}

func (s *Service) handleCancel(ctx context.Context, _ micro.Request, req *protocol.GoalIDRequest) (*protocol.GoalStatus, error) {
	if _, _, err := s.getGoal(ctx, req.GoalID); err != nil {
		return nil, err
	}
	s.cancelGoal(ctx, req.GoalID, protocol.GoalCancelled, "cancelled by request")
	st, _, err := s.getGoal(ctx, req.GoalID)
	if err != nil {
		return nil, err
	}
	return &st, nil
}

func (s *Service) handleList(ctx context.Context, _ micro.Request, req *protocol.GoalListRequest) (*protocol.GoalListReply, error) {
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
	keys, err := s.goals.ListKeys(ctx)
	if err != nil {
		return nil, protocol.Errorf(protocol.ErrUnavailable, "list goals: %v", err)
	}
	out := protocol.GoalListReply{Goals: []protocol.GoalStatus{}}
	for key := range keys.Keys() {
		st, _, err := s.getGoal(ctx, key)
		if err != nil {
			continue
		}
		ended := protocol.GoalEnded(st.Status)
		if (req.Status == "running" && ended) || (req.Status == "ended" && !ended) {
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

// event publishes a goal event; the IOA_GOALS stream keeps it for late readers.
func (s *Service) event(ev protocol.GoalEvent) {
	if ev.At.IsZero() {
		ev.At = time.Now().UTC()
	}
	subject, err := s.subj.GoalEvents(ev.GoalID)
	if err != nil {
		return
	}
	if _, err := s.js.PublishAsync(subject, bus.Encode(ev)); err != nil {
		s.log.Warn("publish goal event", "goal", ev.GoalID, "kind", ev.Kind, "err", err)
	}
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
