package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ioa-nats/ioa/agentkit/protocol"
)

// sweep checks deadlines: goal timeouts, silent speakers, overdue tasks.
// Nothing in a chat waits forever: each wait ends in a system message.
func (s *Service) sweep(ctx context.Context) {
	t := time.NewTicker(s.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now().UnixNano()
		s.mu.Lock()
		var due []string
		for comm, rec := range s.active {
			// A chat whose next deadline is ahead is not visited: an idle
			// chat costs this comparison per tick, not a check on its shard.
			if d := rec.due.Load(); d != 0 && now < d {
				continue
			}
			if !s.mine(comm) {
				// Its partition went elsewhere meanwhile.
				delete(s.active, comm)
				continue
			}
			if !rec.checking {
				rec.checking = true
				due = append(due, comm)
			}
		}
		s.mu.Unlock()
		// One job per shard, not per chat: with thousands of open chats,
		// a job per chat filled the shards' queues on every tick, and the
		// members' messages that came meanwhile were refused (503).
		batches := make([][]string, numShards)
		for _, comm := range due {
			i := shardIndex(comm)
			batches[i] = append(batches[i], comm)
		}
		for i, comms := range batches {
			if len(comms) == 0 {
				continue
			}
			select {
			case s.shards[i] <- func() {
				for _, comm := range comms {
					s.checkChat(ctx, comm)
				}
			}:
			case <-ctx.Done():
			}
		}
		s.retryEnds(ctx)
		s.recheckLaunches(ctx)
	}
}

// checkChat runs on the chat's shard.
func (s *Service) checkChat(ctx context.Context, comm string) {
	old := s.activeChat(comm)
	if old != nil {
		s.mu.Lock()
		old.checking = false
		s.mu.Unlock()
	}
	if !s.mine(comm) {
		return
	}
	rec, err := s.chatFor(ctx, comm)
	if err != nil {
		s.log.Warn("deadline check: chat unreadable", "comm", comm, "err", err)
		if old != nil {
			s.expireUnread(ctx, comm, old, err)
		}
		return
	}
	c := rec.Chat
	if c.Ended() {
		s.endGoal(ctx, comm, rec)
		return
	}
	s.saveRecord(ctx, comm, rec)
	now := time.Now()
	nudged := rec.nudged
	// A third and two thirds into the speaker's time, the chat's last
	// message goes again to whoever it waits on.
	if quiet := now.Sub(rec.TurnSince); rec.nudged < 2 && quiet > time.Duration(rec.nudged+1)*s.cfg.SpeakerTimeout/3 {
		s.nudge(rec)
	}
	acted := rec.nudged != nudged
	defer func() {
		// Checked again at the next tick after a move (the chat changed),
		// else when its next deadline comes.
		if !acted && err == nil {
			rec.due.Store(s.nextCheck(rec, now).UnixNano())
		}
	}()
	switch {
	case !rec.Deadline.IsZero() && now.After(rec.Deadline):
		acted = true
		err = s.timeUp(ctx, comm, c)
	case c.State == protocol.StateDiscussion && c.Speaker != "" && now.Sub(rec.TurnSince) > s.cfg.SpeakerTimeout:
		acted = true
		err = s.takeTurn(ctx, comm, c, fmt.Sprintf("did not speak within %s", s.cfg.SpeakerTimeout), "launcher_timeout")
	case c.State == protocol.StateDiscussion && c.Speaker != "" && now.Sub(rec.TurnSince) > goneCheckAfter && s.gone(ctx, c.Speaker):
		acted = true
		err = s.takeTurn(ctx, comm, c, "is offline (no heartbeat)", "launcher_gone")
	default:
		for _, t := range c.Tasks {
			since, ok := rec.TaskSince[t.TaskID]
			if t.Done() || !ok {
				continue
			}
			why, id := "", ""
			switch {
			case now.Sub(since) > s.cfg.TaskTimeout:
				why, id = fmt.Sprintf("no result within %s", s.cfg.TaskTimeout), "timeout-"+t.TaskID
			case now.Sub(since) > goneCheckAfter && s.gone(ctx, t.Assignee):
				why, id = fmt.Sprintf("%s left: it is offline (no heartbeat)", t.Assignee), "gone-"+t.TaskID
			default:
				continue
			}
			acted = true
			err = s.system(ctx, comm, protocol.AgentMessage{
				Type: protocol.MsgTaskResult, TaskID: t.TaskID, TaskStatus: protocol.TaskFailed,
				TaskConclusion: why, ID: id,
			})
			break
		}
	}
	if err != nil {
		s.log.Warn("deadline check", "comm", comm, "err", err)
	}
}

// goneRecheck is how often a chat waiting on a member for longer than
// goneCheckAfter asks whether the member is gone: the registry's answer is
// cached for livenessFresh, so asking more often only costs the check (at
// 10k idle chats, a check a second each was a fifth of a core).
// maxCheckEvery bounds the time between two checks of a chat whose next
// deadline nextCheck knows; unfinished business (an end not recorded yet, a
// record to rebuild from the log) is looked at every retryCheckEvery.
const (
	goneRecheck     = livenessFresh
	maxCheckEvery   = 10 * time.Second
	retryCheckEvery = 2 * time.Second
)

// nextCheck is when checkChat next has something to do for rec, checked at
// now without acting: a nudge, the goal's deadline, the speaker's or a
// task's timeout, or a liveness check. A record not saved yet is checked at
// the next tick.
func (s *Service) nextCheck(rec *chatRecord, now time.Time) time.Time {
	if rec.dirty {
		return now
	}
	next := now.Add(maxCheckEvery)
	at := func(t time.Time) {
		if t.After(now) && t.Before(next) {
			next = t
		}
	}
	if rec.Chat.Ended() || rec.stale {
		at(now.Add(retryCheckEvery))
	}
	waitOn := func(since time.Time, timeout time.Duration) {
		at(since.Add(timeout))
		if gone := since.Add(goneCheckAfter); gone.After(now) {
			at(gone)
		} else {
			at(now.Add(goneRecheck))
		}
	}
	if rec.nudged < 2 {
		at(rec.TurnSince.Add(time.Duration(rec.nudged+1) * s.cfg.SpeakerTimeout / 3))
	}
	if !rec.Deadline.IsZero() {
		at(rec.Deadline)
	}
	c := rec.Chat
	if c.State == protocol.StateDiscussion && c.Speaker != "" {
		waitOn(rec.TurnSince, s.cfg.SpeakerTimeout)
	}
	for _, t := range c.Tasks {
		if since, ok := rec.TaskSince[t.TaskID]; ok && !t.Done() {
			waitOn(since, s.cfg.TaskTimeout)
		}
	}
	return next
}

// unreadFor is how long after its goal's deadline a chat that cannot be
// read stays under the sweep: its goal has timed out, and the sweep goes on
// trying to log the chat's end for its members.
const unreadFor = 2 * time.Minute

// expireUnread keeps the goal timeout for a chat whose log cannot be read
// (its stream has no leader, or it is gone): past the deadline the goal
// times out without the chat, which gets its end message once it can be
// read again, or is let go unreadFor later.
func (s *Service) expireUnread(ctx context.Context, comm string, rec *chatRecord, cause error) {
	now := time.Now()
	if rec.Deadline.IsZero() || !now.After(rec.Deadline) || rec.Chat.GoalID == "" {
		return
	}
	if !rec.goalEnded {
		err := s.finishGoal(ctx, rec.Chat.GoalID, protocol.GoalTimedOut, "",
			"goal_timeout (its chat could not be read: "+cause.Error()+")", &chatSum{Usage: rec.Usage, Turns: rec.Chat.Turn})
		rec.goalEnded = err == nil
		return
	}
	if now.After(rec.Deadline.Add(unreadFor)) {
		s.log.Warn("chat still unreadable; no longer watched (its goal has timed out)", "comm", comm, "goal", rec.Chat.GoalID, "err", cause)
		s.mu.Lock()
		if s.active[comm] == rec {
			delete(s.active, comm)
		}
		s.mu.Unlock()
	}
}

// takeTurn ends a discussion turn the speaker will not take: a member's
// turn goes back to the launcher; the launcher's failure ends the goal
// (reason launcherReason, or turn_limit on its last turn).
func (s *Service) takeTurn(ctx context.Context, comm string, c protocol.Chat, what, launcherReason string) error {
	if c.Speaker != c.Launcher {
		return s.system(ctx, comm, protocol.AgentMessage{
			Type: protocol.MsgSystem, Event: protocol.EventSpeakerTimeout, NextSpeaker: []string{c.Launcher},
			Content: fmt.Sprintf("%s %s; the turn goes back to %s.", c.Speaker, what, c.Launcher),
		})
	}
	reason := launcherReason
	if c.FinalTurn {
		reason = "turn_limit"
	}
	return s.system(ctx, comm, protocol.AgentMessage{
		Type: protocol.MsgSystem, Event: protocol.EventEnd, Status: protocol.GoalFailed, Reason: reason,
		Content: summarize(c, fmt.Sprintf("the launcher %s %s", c.Launcher, what)),
	})
}

// resume picks up the goals of the partitions this instance has just
// taken (at start, or from an instance that stopped or died): their chats
// are rebuilt from the logs, goals still forming a team are launched again,
// and a chat whose goal says it started but whose log has no start message
// (its referee died in between) is started.
func (s *Service) resume(ctx context.Context, parts []int) {
	if len(parts) == 0 {
		return
	}
	in := map[int]bool{}
	for _, p := range parts {
		in[p] = true
	}
	ours := func(id string) bool { return in[partitionOf(id, s.cfg.Partitions)] && s.mine(id) }
	ids, err := s.liveGoals(ctx)
	if err != nil {
		s.log.Warn("resume: live goal index unreadable", "err", err)
		return
	}
	for _, id := range ids {
		st, err := s.readGoal(ctx, id)
		if (err == nil && protocol.GoalEnded(st.Status)) || (errors.Is(err, protocol.ErrNotFound) && s.indexedLongAgo(ctx, id)) {
			if in[partitionOf(id, s.cfg.Partitions)] {
				s.unmarkLive(ctx, id) // left behind by a stop after the end
			}
			continue
		}
		if err != nil {
			continue
		}
		if st.Status == protocol.GoalAwaitingApproval {
			if ours(id) {
				s.approvalDeadline(st)
			}
			continue
		}
		// A chat belongs to its own partition (the same as its goal's for
		// chats started by this version); a goal without one to the goal's.
		switch {
		case st.CommID != "":
			if !ours(st.CommID) || s.activeChat(st.CommID) != nil {
				continue
			}
			rec, err := s.rebuild(ctx, st.CommID)
			if errors.Is(err, protocol.ErrNotFound) {
				s.wg.Go(func() { s.restartChat(ctx, st) })
				continue
			}
			if err != nil {
				// Kept under the sweep, which rebuilds it when it can be
				// read, and times the goal out if it cannot by then.
				s.log.Warn("resume chat", "goal", id, "comm", st.CommID, "err", err)
				rec = &chatRecord{Chat: protocol.Chat{GoalID: id, CommID: st.CommID}, Deadline: st.Deadline, stale: true,
					Seen: map[string]sentReply{}, TaskSince: map[string]time.Time{}}
			}
			// An ended chat stays too: the sweep records its goal's end
			// (a crash between the last append and finishGoal).
			rec.TurnSince = time.Now().UTC() // whoever holds the turn gets a full timeout after the takeover
			// The dead owner may have logged a message it never delivered,
			// or delivered it to a replica that died with it (the built-in
			// coordinator runs beside it): whoever the chat waits on gets it
			// now rather than at the first nudge, a third of a timeout away.
			if !rec.stale && !rec.Chat.Ended() {
				s.redeliver(rec)
			}
			s.setActive(st.CommID, rec)
		case !ours(id):
		case time.Now().After(st.Deadline):
			s.wg.Go(func() { s.finishOrRetry(ctx, id, protocol.GoalTimedOut, "", "goal_timeout", nil) })
		default:
			s.watchLaunch(id)
			s.wg.Go(func() { s.launch(ctx, st) })
		}
	}
}

// restartChat logs the start message of a chat whose team was formed (the
// goal record has its comm id and team) but whose referee died before the
// start message was stored. The members accepted their invitations then.
func (s *Service) restartChat(ctx context.Context, st protocol.GoalStatus) {
	cards, err := s.memberCards(ctx, st.Launcher, st.Team)
	if err != nil {
		s.finishOrRetry(ctx, st.GoalID, protocol.GoalFailed, "", "could not start the chat after a takeover: "+err.Error(), nil)
		return
	}
	start := protocol.AgentMessage{
		Type: protocol.MsgSystem, Event: protocol.EventStart, ID: "start", Sender: protocol.SystemSender,
		GoalID: st.GoalID, Goal: st.Goal, Content: st.Goal, Launcher: st.Launcher, Team: cards,
		MaxTurns: st.MaxTurns, TeamUpDepth: st.MaxDepth, NextSpeaker: []string{st.Launcher},
	}
	s.log.Info("starting a chat whose referee stopped before its start message", "goal", st.GoalID, "comm", st.CommID)
	if err := s.startChat(ctx, st.CommID, st, start); err != nil {
		s.finishOrRetry(ctx, st.GoalID, protocol.GoalFailed, "", "could not start the chat: "+err.Error(), nil)
	}
}
