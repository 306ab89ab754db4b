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
		// Created, never rewritten: a listing of the index (liveGoals)
		// relies on that.
		rev, err := s.goals.Create(ctx, liveKey(goalID), nil)
		if errors.Is(err, jetstream.ErrKeyExists) {
			return 0, nil // indexed already (or an earlier attempt's ack was lost)
		}
		return rev, err
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
	// Index keys are written once and purged, never rewritten, so the key
	// lister's early end (see goalIDs) cannot miss one; a purged key's
	// marker would keep it in a listing of subjects.
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

// goalIDs lists the id of every goal record, from one snapshot of the
// bucket's subjects: a goal id is one token of the key, the index's keys
// are two. A KV key lister (ListKeys) is not used for this: when keys it
// has yet to deliver are written while it lists, it ends early and misses
// them (179 listings of 200 under writes, measured), and goal records are
// rewritten all the time.
func (s *Service) goalIDs(ctx context.Context) ([]string, error) {
	prefix := "$KV." + s.goals.Bucket() + "."
	st, err := s.js.Stream(ctx, "KV_"+s.goals.Bucket())
	if err != nil {
		return nil, err
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(prefix+"*"))
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(info.State.Subjects))
	for subject := range info.State.Subjects {
		if id := strings.TrimPrefix(subject, prefix); protocol.ValidID(id) { // not a reserved key
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// buildLiveIndex indexes every goal not ended, then marks the index complete.
func (s *Service) buildLiveIndex(ctx context.Context) error {
	ids, err := s.goalIDs(ctx)
	if err != nil {
		return err
	}
	n := 0
	for _, id := range ids {
		st, err := s.readGoal(ctx, id)
		if err != nil || protocol.GoalEnded(st.Status) {
			continue
		}
		if err := s.markLive(ctx, id); err != nil {
			return err
		}
		n++
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
