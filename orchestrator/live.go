package orchestrator

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/nats-io/nats.go/jetstream"
)

// The index of live goals: a key live.<goal id> in the goals bucket for
// every goal that has not ended, written before the goal's record and
// deleted after its end is recorded. Start-up, takeover and
// `goal.list status=running` read it instead of every goal ever kept (a
// week of them by default). A key left behind (a crash after the end) is
// removed by the next reader that finds its goal ended or gone.
const (
	livePrefix = "live."
	// liveIndexKey marks a goals bucket whose index is complete: a bucket
	// written by a version without the index is scanned once to build it.
	liveIndexKey = "_ioa.live-index"
)

func liveKey(goalID string) string { return livePrefix + goalID }

// markLive adds a goal to the index.
func (s *Service) markLive(ctx context.Context, goalID string) error {
	_, err := s.settle(ctx, "live index "+goalID, func(ctx context.Context) (uint64, error) {
		return s.goals.Put(ctx, liveKey(goalID), nil)
	}, func(ctx context.Context) (uint64, bool, error) {
		e, err := s.goals.Get(ctx, liveKey(goalID))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return 0, false, nil
		}
		if err != nil {
			return 0, false, err
		}
		return e.Revision(), true, nil
	})
	return err
}

// unmarkLive removes an ended goal from the index; a failure leaves a key
// that the next reader removes.
func (s *Service) unmarkLive(ctx context.Context, goalID string) {
	if err := s.goals.Purge(ctx, liveKey(goalID)); err != nil && !errors.Is(err, context.Canceled) {
		s.log.Debug("live index: remove ended goal", "goal", goalID, "err", err)
	}
}

// liveGoals returns the ids of the goals that have not ended, by the index;
// the first call on a bucket without a complete index builds it from every
// goal record.
func (s *Service) liveGoals(ctx context.Context) ([]string, error) {
	if _, err := s.goals.Get(ctx, liveIndexKey); errors.Is(err, jetstream.ErrKeyNotFound) {
		if err := s.buildLiveIndex(ctx); err != nil {
			return nil, err
		}
	}
	keys, err := s.goals.ListKeysFiltered(ctx, livePrefix+"*")
	if err != nil {
		return nil, err
	}
	var ids []string
	for k := range keys.Keys() {
		ids = append(ids, strings.TrimPrefix(k, livePrefix))
	}
	return ids, nil
}

// buildLiveIndex indexes every goal not ended, then marks the index complete.
func (s *Service) buildLiveIndex(ctx context.Context) error {
	keys, err := s.goals.ListKeys(ctx)
	if err != nil && !errors.Is(err, jetstream.ErrNoKeysFound) {
		return err
	}
	n := 0
	if keys != nil {
		for id := range keys.Keys() {
			if !protocol.ValidID(id) { // the index, reserved keys
				continue
			}
			st, err := s.readGoal(ctx, id)
			if err != nil || protocol.GoalEnded(st.Status) {
				continue
			}
			if err := s.markLive(ctx, id); err != nil {
				return err
			}
			n++
		}
	}
	if _, err := s.goals.Put(ctx, liveIndexKey, []byte("1")); err != nil {
		return err
	}
	s.log.Info("live goal index built", "live", n)
	return nil
}

// indexedLongAgo reports whether a goal's index key is older than a goal
// takes to be recorded: a key without its goal is then a leftover, not a
// goal being created this moment.
func (s *Service) indexedLongAgo(ctx context.Context, goalID string) bool {
	e, err := s.goals.Get(ctx, liveKey(goalID))
	return err == nil && time.Since(e.Created()) > settleFor
}
