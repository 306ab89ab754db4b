package orchestrator

import (
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
)

// A submission whose reply is lost (a request or answer dropped while a
// cluster's routes reconnect) leaves its sender not knowing whether the
// goal exists. With an idempotency key it may simply send again: the goal's
// id is derived from the submitter and the key, so the second submission
// finds the record the first one created instead of creating another goal.

// keyedGoalID is the goal id of a submission with an idempotency key: the
// same for the same submitter and key.
func keyedGoalID(submitter, key string) string {
	sum := sha256.Sum256([]byte(submitter + "\x00" + key))
	return idFrom("g", sum[:])
}

// resubmitted answers a submission whose idempotency key names a goal that
// already exists, and reports whether it did (false: no such goal yet, so
// the submission creates it). wait is the reply subject of a waiting
// submitter: it replaces the one the record keeps, so the goal's end
// answers this request, or is answered now when the goal has ended.
func (s *Service) resubmitted(ctx context.Context, req protocol.GoalRequest, wait, replyTo string) (bool, error) {
	id := keyedGoalID(req.Submitter, req.IdempotencyKey)
	prior, err := s.readGoal(ctx, id)
	if errors.Is(err, protocol.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return true, err
	}
	if prior.Submitter != req.Submitter || prior.Goal != req.Goal {
		return true, protocol.Errorf(protocol.ErrConflict, "idempotency_key %q was already used for another goal (%s); use a new key for a new goal", req.IdempotencyKey, id)
	}
	// A waiting copy is sent again routinely (every 30 s by ioa goal and
	// agentkit); a copy without wait means an answer was lost.
	level := slog.LevelInfo
	if wait != "" {
		level = slog.LevelDebug
	}
	s.log.Log(ctx, level, "goal submitted again with its idempotency key", "goal", id, "status", prior.Status, "wait", wait != "")
	if wait == "" {
		return true, bus.RespondLater(s.nc, replyTo, protocol.SubmitReply{GoalID: id, Status: prior.Status, Timeout: prior.Timeout})
	}
	if !protocol.GoalEnded(prior.Status) {
		st, err := s.updateGoal(ctx, id, func(g *protocol.GoalStatus) error {
			if protocol.GoalEnded(g.Status) {
				return errSkip
			}
			g.ReplyTo = wait
			return nil
		})
		switch {
		case err == nil:
			return true, nil // the goal's end answers wait
		case !errors.Is(err, errSkip):
			return true, err
		}
		prior = st
	}
	if prior.Result == nil {
		return true, protocol.Errorf(protocol.ErrInternal, "goal %s has ended (%s) but its record holds no result", id, prior.Status)
	}
	return true, bus.RespondLater(s.nc, wait, *prior.Result)
}
