package orchestrator

import (
	"context"
	"errors"
	"time"

	"github.com/ioa-nats/ioa/agentkit/protocol"
)

// A goal is watched, by the instance that recorded it or took its partition
// over, from then until it has a chat or ends. Every path that launches a
// goal is meant to end with one or the other (a team, or the goal failed
// or timed out), but a launch that a race left undone leaves a goal
// waiting for a team with nobody to time it out: a CI run found one,
// forming for good after a rebalance (startLaunch). So a goal still without
// a chat a launch timeout (and a margin) after it was watched is read
// again: launched again while it has time left, timed out when it has not.

// launchStallMargin is what a launch may take beyond Config.LaunchTimeout
// (its last attempt, and the check that a team was formed) before its goal
// is looked at again.
const launchStallMargin = 10 * time.Second

func (s *Service) launchStall() time.Duration { return s.cfg.LaunchTimeout + launchStallMargin }

// watchLaunch starts watching goal id, or restarts its clock.
func (s *Service) watchLaunch(id string) {
	s.mu.Lock()
	s.launching[id] = time.Now().Add(s.launchStall())
	s.mu.Unlock()
}

// launchWatched reports whether goal id's launch is watched here: submitted
// here and its team not formed yet.
func (s *Service) launchWatched(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.launching[id]
	return ok
}

// unwatchLaunch stops watching goal id: team-up recorded its chat here, or
// finishGoal its end. A goal whose team formed on another instance is
// dropped at its one look (recheckLaunch).
func (s *Service) unwatchLaunch(id string) {
	s.mu.Lock()
	delete(s.launching, id)
	s.mu.Unlock()
}

// recheckLaunches runs from the sweep and looks again at the watched goals
// that are due.
func (s *Service) recheckLaunches(ctx context.Context) {
	now := time.Now()
	var due []string
	s.mu.Lock()
	for id, next := range s.launching {
		if now.After(next) {
			due = append(due, id)
			s.launching[id] = now.Add(s.launchStall()) // one look at a time
		}
	}
	s.mu.Unlock()
	for _, id := range due {
		s.wg.Go(func() { s.recheckLaunch(ctx, id) })
	}
}

// recheckLaunch reads a goal that has been waiting for a team longer than a
// launch may take, and launches it again (team-up is idempotent per goal)
// or times it out.
func (s *Service) recheckLaunch(ctx context.Context, id string) {
	s.mu.Lock()
	_, ending := s.pending[id]
	s.mu.Unlock()
	if ending {
		return // its end is decided, and being recorded (retryEnds)
	}
	st, err := s.readGoal(ctx, id)
	switch {
	case errors.Is(err, protocol.ErrNotFound) || (err == nil && (protocol.GoalEnded(st.Status) || st.CommID != "")):
		s.unwatchLaunch(id) // gone, ended, or its team formed elsewhere
		return
	case err != nil:
		return // looked at again after another launchStall
	case time.Now().After(st.Deadline):
		// finishGoal stops the watch once the end is recorded; until
		// then the end is pending and the watch leaves it alone.
		s.finishOrRetry(ctx, id, protocol.GoalTimedOut, "", "goal_timeout", nil)
		return
	}
	s.log.Warn("goal still has no team; launching it again", "goal", id, "status", st.Status, "created", st.CreatedAt)
	s.startLaunch(ctx, st)
}
