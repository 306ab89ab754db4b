package orchestrator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"golang.org/x/time/rate"
)

// handleOutbox referees one message an agent sends to its outbox.
func (s *Service) handleOutbox(ctx context.Context, r micro.Request) {
	defer s.recoverTo(r)
	s.outbox(ctx, r.Subject(), r.Data(), r.Reply(), 0)
}

// outbox referees a message sent on subject (an outbox), here if this
// instance owns its chat, else at the owner (route). hops counts the times
// it was forwarded already.
func (s *Service) outbox(ctx context.Context, subject string, data []byte, replyTo string, hops int) {
	// ParseAgent's errors say what is wrong, the referee's own name
	// (forbidden) included: the sender is the subject's name.
	as, err := s.subj.ParseAgent(subject)
	if err == nil && (as.Kind != bus.AgentOut || as.CommID == "") {
		err = protocol.Errorf(protocol.ErrInvalid, "bad outbox subject %q", subject)
	}
	if err != nil {
		s.refuse(replyTo, err)
		return
	}
	again := func(h int) { s.outbox(ctx, subject, data, replyTo, h) }
	if !s.mine(as.CommID) {
		s.route(ctx, as.CommID, subject, data, replyTo, hops, again)
		return
	}
	var m protocol.AgentMessage
	if err := s.codec.Decode(data, &m); err != nil {
		s.refuse(replyTo, err)
		return
	}
	if err := checkAgentMessage(&m); err != nil {
		s.refuse(replyTo, err)
		return
	}
	// The limit is per agent and chat: a launcher leading many chats at once
	// is busy, not flooding.
	if !s.limits.allow(as.Name + "/" + as.CommID) {
		s.refuse(replyTo, protocol.Errorf(protocol.ErrRateLimited, "agent %s sends faster than %.0f messages/s to chat %s", as.Name, s.cfg.AgentRate, as.CommID))
		return
	}
	// The sender is the name in the subject, never what the body claims.
	m.Sender = as.Name
	queued := s.tryShard(as.CommID, func() {
		defer func() {
			if p := recover(); p != nil {
				s.log.Error("referee panic", "comm", as.CommID, "panic", p)
				s.refuse(replyTo, protocol.Errorf(protocol.ErrInternal, "internal error: %v", p))
			}
		}()
		// The partition may have moved while the message was queued.
		if !s.mine(as.CommID) {
			s.route(ctx, as.CommID, subject, data, replyTo, hops, again)
			return
		}
		_, err := s.submitMessage(ctx, as.CommID, m, func(reply protocol.SendReply) {
			_ = bus.RespondLater(s.nc, replyTo, reply)
		})
		if err != nil {
			s.refuse(replyTo, err)
		}
	})
	if !queued {
		// The sender sends again with the same message id (503 is safe to
		// retry); the handler moves on to other chats' messages.
		_ = bus.RespondErrorLater(s.nc, replyTo, protocol.Errorf(protocol.ErrUnavailable,
			"chat %s: the referee's queue for it is full (%d messages); send again", as.CommID, shardQueue))
	}
}

// timeUp ends chat comm (c as the referee holds it) because its goal ran
// out of time.
func (s *Service) timeUp(ctx context.Context, comm string, c protocol.Chat) error {
	return s.system(ctx, comm, protocol.AgentMessage{
		Type: protocol.MsgSystem, Event: protocol.EventEnd, Status: protocol.GoalTimedOut,
		Reason: "goal_timeout", Content: summarize(c, "the goal's time ran out"),
	})
}

// refuse answers an outbox message with err and counts the refusal.
func (s *Service) refuse(replyTo string, err error) {
	s.cfg.Metrics.Refused(err)
	_ = bus.RespondErrorLater(s.nc, replyTo, err)
}

// checkAgentMessage rejects what no agent may send, before any state is read.
func checkAgentMessage(m *protocol.AgentMessage) error {
	if err := protocol.CheckID("id", m.ID); err != nil {
		return err
	}
	switch m.Type {
	case protocol.MsgSystem:
		return protocol.Errorf(protocol.ErrForbidden, "only the referee sends system messages")
	case protocol.MsgDiscussion, protocol.MsgSyncTaskAssign, protocol.MsgAsyncAssign, protocol.MsgPause,
		protocol.MsgConclusion, protocol.MsgTaskProgress, protocol.MsgTaskResult:
	default:
		return protocol.Errorf(protocol.ErrInvalid, "unknown message type %q", m.Type)
	}
	if m.V != 0 && m.V != protocol.Version {
		return protocol.Errorf(protocol.ErrInvalid, "protocol version %d is not supported (want %d)", m.V, protocol.Version)
	}
	// Fields only the referee sets are cleared rather than trusted.
	m.Event, m.Status, m.Reason, m.Team, m.Launcher, m.Goal, m.Attempt = "", "", "", nil, "", "", 0
	return nil
}

// submitMessage runs on the chat's shard: dedupe, stamp, check with Apply,
// append, fan out.
func (s *Service) submitMessage(ctx context.Context, comm string, m protocol.AgentMessage, reply func(protocol.SendReply)) (protocol.SendReply, error) {
	rec, err := s.chatFor(ctx, comm)
	if errors.Is(err, protocol.ErrNotFound) {
		if _, ok := s.starting.Load(comm); ok {
			return protocol.SendReply{}, protocol.Errorf(protocol.ErrUnavailable, "chat %s is starting; send again", comm)
		}
	}
	if err != nil {
		return protocol.SendReply{}, err
	}
	if prev, ok := rec.Seen[seenKey(m.Sender, m.ID)]; ok {
		r := protocol.SendReply{Seq: prev.Seq, State: prev.State}
		reply(r)
		return r, nil
	}
	if !rec.Chat.Ended() && !rec.Chat.IsMember(m.Sender) {
		return protocol.SendReply{}, protocol.Errorf(protocol.ErrNotMember, "%s is not a member of chat %s", m.Sender, comm)
	}
	// A goal's time is up when it runs out, not at the sweep's next tick: a
	// message that comes later ends the chat as the sweep would, and is
	// refused, so it cannot change the goal's outcome.
	if !rec.Chat.Ended() && !rec.Deadline.IsZero() && time.Now().After(rec.Deadline) {
		if err := s.timeUp(ctx, comm, rec.Chat); err != nil {
			return protocol.SendReply{}, err
		}
		return protocol.SendReply{}, protocol.Errorf(protocol.ErrIllegalTransition,
			"goal %s ran out of time at %s: chat %s ended timed_out (goal_timeout); no more messages",
			rec.Chat.GoalID, rec.Deadline.UTC().Format(time.RFC3339Nano), comm)
	}
	// A full chat can still end: task results (one per task assigned, which
	// the quota bounded) and the conclusion (one) pass it, so a member that
	// filled the chat cannot keep the launcher from concluding.
	if int(rec.Chat.LastSeq) >= s.cfg.MaxChatMessages && m.Type != protocol.MsgConclusion && m.Type != protocol.MsgTaskResult {
		return protocol.SendReply{}, protocol.Errorf(protocol.ErrQuotaExceeded, "chat %s reached its limit of %d messages", comm, s.cfg.MaxChatMessages)
	}
	// Progress reports are the one kind an assignee may send at will while
	// its task runs: bounded per task, so that one task cannot fill the chat.
	if m.Type == protocol.MsgTaskProgress && rec.progress[m.TaskID] >= s.cfg.MaxTaskProgress {
		return protocol.SendReply{}, protocol.Errorf(protocol.ErrQuotaExceeded,
			"task %s has reported progress %d times, the limit for one attempt; send its task_result", m.TaskID, s.cfg.MaxTaskProgress)
	}
	return s.appendMsg(ctx, comm, rec, m, reply)
}

// appendMsg stamps, applies and logs m, delivers it, answers the sender
// (reply, if not nil) and then does the bookkeeping that is off the
// sender's path: the KV record and the effects. It runs on the chat's shard.
func (s *Service) appendMsg(ctx context.Context, comm string, rec *chatRecord, m protocol.AgentMessage, reply func(protocol.SendReply)) (protocol.SendReply, error) {
	now := time.Now().UTC()
	m.V, m.CommID, m.GoalID = protocol.Version, comm, rec.Chat.GoalID
	m.Seq, m.TS = rec.Chat.LastSeq+1, now
	if m.Type == protocol.MsgSyncTaskAssign || m.Type == protocol.MsgAsyncAssign {
		assignTaskIDs(&rec.Chat, m.Tasks)
	}
	next, err := protocol.Apply(rec.Chat, m)
	if err != nil && m.Sender != protocol.SystemSender && s.behind(ctx, comm, rec) {
		// A copy behind the log (another instance wrote while this one
		// took the partition over) never refuses a move: the move is
		// judged again on the chat rebuilt from the log.
		s.forgetChat(comm)
		return s.submitMessage(ctx, comm, m, reply)
	}
	if err != nil {
		return protocol.SendReply{}, err
	}
	m.State, m.Turn = next.State, next.Turn
	if m.Type == protocol.MsgTaskResult {
		if t, ok := next.Task(m.TaskID); ok {
			m.Attempt = t.Attempt
		}
	}
	data := bus.Encode(m) // logged and delivered as the same bytes
	streamSeq, err := s.appendLog(ctx, comm, rec.StreamSeq, m.Seq, data)
	if err != nil {
		// Another instance appended first, or our copy is behind: rebuild
		// from the log before the next use. The sender may send again
		// unchanged (503), and its message id keeps that safe.
		s.invalidate(comm)
		if conflict(err) {
			return protocol.SendReply{}, protocol.Errorf(protocol.ErrUnavailable, "chat %s moved on meanwhile; send again", comm)
		}
		return protocol.SendReply{}, protocol.Errorf(protocol.ErrUnavailable, "append to chat %s: %v", comm, err)
	}
	prev := rec.Chat
	rec.Chat, rec.StreamSeq = next, streamSeq
	rec.over.Store(next.Ended())
	rec.due.Store(0) // its deadlines moved: the sweep looks at it next tick
	if rec.FirstStreamSeq == 0 {
		rec.FirstStreamSeq = streamSeq
	}
	s.measure(rec, prev, m, now)
	rec.note(prev, m, now)
	// Events first: a member may act on the message at once (submit a
	// sub-goal for its task), and followers of the goal must see the
	// message before what it causes. Both go out on this connection, in order.
	s.announce(comm, rec.Chat.GoalID, m, data)
	s.fanOut(rec, data)
	r := protocol.SendReply{Seq: m.Seq, State: m.State}
	if reply != nil {
		reply(r)
	}
	// The log is the truth and the KV record a summary of it, so chats save
	// it at most once per sweep tick (a short chat only at its end); an end
	// is saved by endGoal, after the goal's record and before the chat is
	// retired.
	rec.dirty = true
	s.effects(ctx, comm, rec, prev, m)
	return r, nil
}

// measure observes, before note moves the clocks on, how long the turn
// that m ends took and how long the task whose result m is ran.
func (s *Service) measure(rec *chatRecord, prev protocol.Chat, m protocol.AgentMessage, now time.Time) {
	if s.cfg.Metrics == nil {
		return
	}
	if rec.Chat.Turn > prev.Turn && !rec.TurnSince.IsZero() {
		s.cfg.Metrics.Turn(now.Sub(rec.TurnSince))
	}
	if m.Type == protocol.MsgTaskResult {
		if since, ok := rec.TaskSince[m.TaskID]; ok {
			s.cfg.Metrics.TaskDone(m.TaskStatus, now.Sub(since))
		}
	}
}

// behind reports whether the chat's log has entries after rec's last one.
// It costs one read and is asked only before a move is refused.
func (s *Service) behind(ctx context.Context, comm string, rec *chatRecord) bool {
	subject, err := s.subj.Chat(comm)
	if err != nil || rec.StreamSeq == 0 {
		return false
	}
	last, err := s.chats.GetLastMsgForSubject(ctx, subject)
	return err == nil && last.Sequence != rec.StreamSeq
}

// saveRecord writes a dirty record to KV; on a conflict (another instance
// wrote it) the record is dropped from memory and rebuilt from the log when
// next needed.
func (s *Service) saveRecord(ctx context.Context, comm string, rec *chatRecord) {
	if !rec.dirty {
		return
	}
	if err := s.save(ctx, comm, rec); err != nil {
		s.log.Warn("save chat record", "comm", comm, "err", err)
		if s.activeChat(comm) == rec {
			s.invalidate(comm)
		}
		return
	}
	rec.dirty = false
}

// appendLog writes one entry of comm's log, with its mark, message id
// <comm>.<seq> and the stream sequence of the subject's last entry it
// expects (after), and returns the entry's stream sequence. A lost
// acknowledgement is settled by reading back the subject after `after`:
// this entry there is success; another instance's entry is a conflict;
// foreign entries only are reported and stepped over, and the entry goes
// after them (with a message id of its own if a foreign entry took it).
func (s *Service) appendLog(ctx context.Context, comm string, after, seq uint64, data []byte) (uint64, error) {
	subject, err := s.subj.Chat(comm)
	if err != nil {
		return 0, err
	}
	msg := s.logMsg(subject, data)
	msgID := entryMsgID(comm, seq)
	var dupAt uint64 // where JetStream says an entry with msgID is
	ours := func(raw *jetstream.RawStreamMsg) bool {
		return bytes.Equal(raw.Data, data) && raw.Header.Get(MarkHeader) == msg.Header.Get(MarkHeader)
	}
	return s.settle(ctx, "chat log "+comm, func(ctx context.Context) (uint64, error) {
		msg.Header.Set(jetstream.MsgIDHeader, msgID)
		msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(after, 10))
		ack, err := bus.PublishAcked(ctx, s.nc, msg)
		if err != nil {
			return 0, err
		}
		if ack.Duplicate {
			dupAt = ack.Sequence
			return 0, errDuplicate
		}
		return ack.Sequence, nil
	}, func(ctx context.Context) (uint64, bool, error) {
		if dupAt != 0 {
			raw, err := s.chats.GetMsg(ctx, dupAt)
			if err != nil {
				return 0, false, err
			}
			if raw.Subject == subject && ours(raw) {
				return raw.Sequence, true, nil
			}
			if _, why := s.verify(comm, raw); why != "" {
				s.foreign(comm, raw, why)
				msgID, dupAt = fmt.Sprintf("%s.%d", entryMsgID(comm, seq), raw.Sequence), 0
				return 0, false, errWriteAgain
			}
			return 0, false, nil
		}
		var stepped uint64
		for from := after + 1; ; {
			raw, err := s.chats.GetMsg(ctx, from, jetstream.WithGetMsgSubject(subject))
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				break
			}
			if err != nil {
				return 0, false, err
			}
			if ours(raw) {
				return raw.Sequence, true, nil
			}
			_, why := s.verify(comm, raw)
			if why == "" {
				return 0, false, nil // another instance's entry
			}
			s.foreign(comm, raw, why)
			if raw.Header.Get(jetstream.MsgIDHeader) == msgID {
				msgID = fmt.Sprintf("%s.%d", entryMsgID(comm, seq), raw.Sequence)
			}
			stepped, from = raw.Sequence, raw.Sequence+1
		}
		if stepped != 0 {
			after = stepped
			return 0, false, errWriteAgain
		}
		return 0, false, nil
	})
}

// assignTaskIDs gives an id to every task that came without one.
func assignTaskIDs(c *protocol.Chat, tasks []protocol.Task) {
	n := len(c.Tasks)
	for i := range tasks {
		if tasks[i].TaskID != "" {
			continue
		}
		for {
			n++
			id := fmt.Sprintf("t%d", n)
			if _, used := c.Task(id); !used && !taskListHas(tasks, id) {
				tasks[i].TaskID = id
				break
			}
		}
	}
}

func taskListHas(ts []protocol.Task, id string) bool {
	for _, t := range ts {
		if t.TaskID == id {
			return true
		}
	}
	return false
}

// fanOut delivers a logged message to every member's inbox.
func (s *Service) fanOut(rec *chatRecord, data []byte) {
	rec.last, rec.nudged = data, 0
	for i, name := range rec.Chat.Members {
		// The members' inbox subjects are built (and their names checked)
		// once per chat, not on every message.
		if i >= len(rec.inboxes) || rec.inboxes[i].name != name {
			subject, _ := s.subj.Inbox(name, rec.Chat.CommID) // "" for a bad name: skipped
			rec.inboxes = append(rec.inboxes[:i], inboxOf{name, subject})
		}
		subject := rec.inboxes[i].subject
		if subject == "" {
			continue
		}
		var err error
		if rec.trace == "" {
			err = s.nc.Publish(subject, data)
		} else {
			err = s.nc.PublishMsg(inboxMsg(subject, data, rec.trace))
		}
		if err != nil {
			s.log.Warn("deliver to inbox", "member", name, "err", err)
		}
	}
}

// nudge delivers the chat's last message again to the members the chat
// waits on (the speaker, or the assignees of running tasks). Inbox delivery
// is at most once; a member that missed a message sees the gap in seq and
// reads the history, instead of waiting for its own periodic resync.
func (s *Service) nudge(rec *chatRecord) {
	if rec.last == nil {
		return
	}
	rec.nudged++
	s.redeliver(rec)
}

// redeliver sends the chat's last message to its speaker and each running
// task's assignment to its assignee again; members ignore what they have.
func (s *Service) redeliver(rec *chatRecord) {
	if rec.last == nil {
		return
	}
	// The speaker gets the message that gave it the turn; each running
	// assignee the assignment that carries its task (a stateless member
	// can act on either without reading the history).
	send := func(name string, msg []byte) {
		if subject, err := s.subj.Inbox(name, rec.Chat.CommID); err == nil && msg != nil {
			_ = s.nc.PublishMsg(inboxMsg(subject, msg, rec.trace))
		}
	}
	if rec.Chat.Speaker != "" {
		send(rec.Chat.Speaker, rec.last)
	}
	// Tasks of one assignment share its encoded message: one copy each.
	type copyTo struct {
		name string
		msg  *byte
	}
	sent := map[copyTo]bool{}
	for _, id := range rec.Chat.RunningTasks() {
		t, ok := rec.Chat.Task(id)
		if !ok {
			continue
		}
		msg := rec.assigns[id]
		if msg == nil {
			msg = rec.last
		}
		if k := (copyTo{t.Assignee, &msg[0]}); !sent[k] {
			sent[k] = true
			send(t.Assignee, msg)
		}
	}
}

// announce publishes the goal events of a logged message.
// data is m as logged: the message event carries those bytes rather than
// encoding m a second time.
func (s *Service) announce(comm, goal string, m protocol.AgentMessage, data []byte) {
	s.restateEncoded(goal, withMessage(bus.Encode(protocol.GoalEvent{GoalID: goal, Kind: protocol.EventMessage, CommID: comm, At: time.Now().UTC()}), data))
	for i := range m.Tasks {
		s.restate(protocol.GoalEvent{GoalID: goal, Kind: protocol.EventTaskAssigned, CommID: comm, Task: &m.Tasks[i]})
	}
}

// withMessage adds "message": msg (encoded JSON) to an encoded event that
// has none; an event's JSON object ends with its closing brace.
func withMessage(event, msg []byte) []byte {
	out := make([]byte, 0, len(event)+len(msg)+12)
	out = append(out, event[:len(event)-1]...)
	out = append(out, `,"message":`...)
	out = append(out, msg...)
	return append(out, '}')
}

// effects publishes what a logged message means outside the chat: task
// results for triggers and their events, the end of the goal, the turn limit.
func (s *Service) effects(ctx context.Context, comm string, rec *chatRecord, prev protocol.Chat, m protocol.AgentMessage) {
	goal := rec.Chat.GoalID
	if m.Type == protocol.MsgTaskResult {
		t, _ := rec.Chat.Task(m.TaskID)
		if subject, err := s.subj.Task(comm, m.TaskID); err == nil {
			msgID := fmt.Sprintf("%s.%s.%d", comm, m.TaskID, max(t.Attempt, 1))
			if err := s.publishOnce(ctx, s.tasks, subject, bus.Encode(m), msgID); err != nil {
				s.log.Warn("publish task result", "comm", comm, "task", m.TaskID, "err", err)
			}
		}
		s.restate(protocol.GoalEvent{GoalID: goal, Kind: protocol.EventTaskDone, CommID: comm, Task: &t.Task, Message: &m})
		s.recordOutcome(comm, t.Task, m.TaskStatus)
	}
	c := rec.Chat
	switch {
	case c.Ended():
		s.endGoal(ctx, comm, rec)
	case c.State == protocol.StateDiscussion && c.Turn >= c.MaxTurns && !c.FinalTurn:
		_, err := s.appendMsg(ctx, comm, rec, protocol.AgentMessage{
			Type: protocol.MsgSystem, Sender: protocol.SystemSender, Event: protocol.EventTurnLimit,
			ID: fmt.Sprintf("sys-%d", c.LastSeq+1), NextSpeaker: []string{c.Launcher},
			Content: fmt.Sprintf("Turn limit of %d reached: %s, conclude now with what is known.", c.MaxTurns, c.Launcher),
		}, nil)
		if err != nil {
			s.log.Warn("turn limit message", "comm", comm, "err", err)
		}
	}
}

// endGoal records the end of an ended chat's goal, then retires the chat.
// A goal record that cannot be written now leaves the chat under the sweep,
// which calls endGoal again at its next check.
func (s *Service) endGoal(ctx context.Context, comm string, rec *chatRecord) {
	c := rec.Chat
	status, reason, text := c.Outcome, c.Reason, c.Conclusion
	if status == protocol.GoalConcluded && c.Reason == "turn_limit" {
		reason = "turn_limit: concluded in the launcher's last turn"
	}
	err := s.finishGoal(ctx, c.GoalID, status, text, reason, &chatSum{Usage: rec.Usage, Turns: c.Turn, Chat: &c})
	// The goal's record first: it answers a waiting submitter, and the
	// chat's summary can follow (the log already holds the end, and a
	// takeover rebuilds from it).
	s.saveRecord(ctx, comm, rec)
	if err != nil {
		s.log.Warn("goal of an ended chat not recorded yet; trying again", "goal", c.GoalID, "comm", comm, "err", err)
		if s.activeChat(comm) == nil {
			s.setActive(comm, rec)
		}
		return
	}
	s.retire(comm, rec)
}

// publishOnce publishes data with a message id until JetStream has stored
// it: a duplicate is the same message stored before (an attempt whose ack
// was lost).
func (s *Service) publishOnce(ctx context.Context, stream jetstream.Stream, subject string, data []byte, msgID string) error {
	_, err := s.settle(ctx, subject, func(ctx context.Context) (uint64, error) {
		msg := nats.NewMsg(subject)
		msg.Data = data
		msg.Header.Set(jetstream.MsgIDHeader, msgID)
		ack, err := bus.PublishAcked(ctx, s.nc, msg)
		if err != nil {
			return 0, err
		}
		return ack.Sequence, nil
	}, func(ctx context.Context) (uint64, bool, error) {
		raw, err := stream.GetLastMsgForSubject(ctx, subject)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return 0, false, nil
		}
		if err != nil {
			return 0, false, err
		}
		return raw.Sequence, bytes.Equal(raw.Data, data), nil
	})
	return err
}

// system appends a referee message to a chat; it runs on the chat's shard.
func (s *Service) system(ctx context.Context, comm string, m protocol.AgentMessage) error {
	rec, err := s.chatFor(ctx, comm)
	if err != nil {
		return err
	}
	if rec.Chat.Ended() {
		return nil
	}
	m.Sender = protocol.SystemSender
	if m.ID == "" {
		m.ID = fmt.Sprintf("sys-%d", rec.Chat.LastSeq+1)
	}
	_, err = s.appendMsg(ctx, comm, rec, m, nil)
	return err
}

// endChat ends a chat that is still open (cancel, timeout, failure); done,
// if not nil, is closed once it has.
func (s *Service) endChat(ctx context.Context, comm, status, reason string, done chan struct{}) {
	s.endChatHops(ctx, comm, status, reason, done, 0)
}

// endChatHops is endChat at the chat's owner: here, or the one it asks.
func (s *Service) endChatHops(ctx context.Context, comm, status, reason string, done chan struct{}, hops int) {
	if !s.mine(comm) {
		s.wg.Go(func() {
			if done != nil {
				defer close(done)
			}
			// While a takeover is under way the partition has no owner:
			// wait for one, up to two lease TTLs.
			p := partitionOf(comm, s.cfg.Partitions)
			owner := s.lease.ownerOf(p)
			for deadline := time.Now().Add(2 * s.cfg.LeaseTTL); owner == "" && time.Now().Before(deadline); owner = s.lease.ownerOf(p) {
				select {
				case <-ctx.Done():
					return
				case <-time.After(25 * time.Millisecond):
				}
			}
			if owner == s.id {
				s.endChatHops(ctx, comm, status, reason, nil, hops+1)
				return
			}
			ref, err := s.subj.Ref(owner)
			if owner == "" || err != nil || hops >= maxHops {
				s.log.Warn("end chat: no owner to end it now", "comm", comm)
				return
			}
			m := nats.NewMsg(ref)
			m.Data = bus.Encode(endChatRequest{CommID: comm, Status: status, Reason: reason})
			m.Header.Set(HeaderOp, opEndChat)
			m.Header.Set(HeaderHops, strconv.Itoa(hops+1))
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if _, err := s.nc.RequestMsgWithContext(rctx, m); err != nil {
				s.log.Warn("end chat at its owner", "comm", comm, "owner", owner, "err", err)
			}
		})
		return
	}
	s.onShardAsync(ctx, comm, func() {
		if done != nil {
			defer close(done)
		}
		rec, err := s.chatFor(ctx, comm)
		if err != nil || rec.Chat.Ended() {
			return
		}
		err = s.system(ctx, comm, protocol.AgentMessage{
			Type: protocol.MsgSystem, Event: protocol.EventEnd, Status: status, Reason: reason,
			Content: summarize(rec.Chat, reason),
		})
		if err != nil {
			s.log.Warn("end chat", "comm", comm, "err", err)
		}
	})
}

// onShardAsync queues job without blocking the caller, which may itself be
// a shard job.
func (s *Service) onShardAsync(ctx context.Context, key string, job func()) {
	s.wg.Go(func() { s.onShard(ctx, key, job) })
}

// summarize assembles a conclusion from the task results so far, for chats
// the referee has to end itself.
func summarize(c protocol.Chat, reason string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Ended by the referee: %s.", reason)
	for _, t := range c.Tasks {
		label := t.TaskAbstract
		if label == "" {
			label = t.TaskDesc
		}
		switch t.Status {
		case protocol.TaskCompleted:
			fmt.Fprintf(&b, "\n- %s (%s): %s", label, t.Assignee, t.Result)
		default:
			fmt.Fprintf(&b, "\n- %s (%s): %s", label, t.Assignee, t.Status)
		}
	}
	return b.String()
}

// handleHistory answers a member's catch-up request. Reading a log takes a
// request per message, so it runs beside the endpoint, not in it.
func (s *Service) handleHistory(ctx context.Context, r micro.Request) {
	subject, data, replyTo := r.Subject(), r.Data(), r.Reply()
	as, err := s.subj.ParseAgent(subject)
	if err != nil {
		_ = bus.RespondError(r, err)
		return
	}
	if !s.reads.acquire(as.Name) {
		_ = bus.RespondError(r, protocol.Errorf(protocol.ErrRateLimited, "too many history reads in flight for %s (at most %d); retry shortly", as.Name, maxHistoryPerAgent))
		return
	}
	s.wg.Go(func() {
		defer s.reads.release(as.Name)
		s.history(ctx, subject, data, replyTo)
	})
}

func (s *Service) history(ctx context.Context, subject string, data []byte, replyTo string) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("history panic", "subject", subject, "panic", p)
			_ = bus.RespondErrorLater(s.nc, replyTo, protocol.Errorf(protocol.ErrInternal, "internal error: %v", p))
		}
	}()
	fail := func(err error) { _ = bus.RespondErrorLater(s.nc, replyTo, err) }
	as, err := s.subj.ParseAgent(subject)
	if err != nil || as.Kind != bus.AgentHistory || as.CommID == "" {
		fail(protocol.Errorf(protocol.ErrInvalid, "bad history subject %q", subject))
		return
	}
	var req protocol.HistoryRequest
	if err := s.codec.DecodeOptional(data, &req); err != nil {
		fail(err)
		return
	}
	if req.Limit < 0 || req.Limit > 1000 {
		fail(protocol.Errorf(protocol.ErrInvalid, "limit %d is not between 1 and 1000", req.Limit))
		return
	}
	if req.Limit == 0 {
		req.Limit = 1000
	}
	// The start message says who the members are; then only the asked-for
	// page is read.
	start, _, _, err := s.readChat(ctx, as.CommID, 0, 1)
	if err != nil {
		fail(err)
		return
	}
	if len(start) == 0 {
		fail(protocol.Errorf(protocol.ErrNotFound, "no chat %s", as.CommID))
		return
	}
	if !memberOf(start[0], as.Name) {
		fail(protocol.Errorf(protocol.ErrNotMember, "%s is not a member of chat %s", as.Name, as.CommID))
		return
	}
	msgs, sizes, tail, err := s.readChat(ctx, as.CommID, req.AfterSeq, req.Limit)
	if err != nil {
		fail(err)
		return
	}
	out := protocol.HistoryReply{Messages: fitPage(msgs, sizes, int(s.nc.MaxPayload())-historySlack), LastSeq: tail.Seq}
	if out.Messages == nil {
		out.Messages = []protocol.AgentMessage{}
	}
	_ = bus.RespondLater(s.nc, replyTo, out)
}

// historySlack is room in a history reply for what is not a message: the
// JSON around them, last_seq and the reply's headers.
const historySlack = 4 << 10

// fitPage keeps the first messages of a history page whose encoding fits
// in budget bytes, and at least one: a page over the connection's max
// payload was never sent, and the member asking waited for nothing. The
// member reads on from the last message it got (last_seq says there is
// more). sizes[i] is the length of msgs[i]'s encoding: its logged bytes
// (readChat), so no message is encoded again to be measured.
func fitPage(msgs []protocol.AgentMessage, sizes []int, budget int) []protocol.AgentMessage {
	size := 0
	for i := range msgs {
		size += sizes[i] + 1
		if size > budget && i > 0 {
			return msgs[:i]
		}
	}
	return msgs
}

// handleOpenChats lists the open chats an agent is a member of, from the
// chats every live instance referees (after a restart, every running
// chat). Asking the others waits, so it runs beside the endpoint.
func (s *Service) handleOpenChats(ctx context.Context, r micro.Request) {
	as, err := s.subj.ParseAgent(r.Subject())
	if err == nil && as.Kind != bus.AgentChats {
		err = protocol.Errorf(protocol.ErrInvalid, "bad subject %q", r.Subject())
	}
	if err != nil {
		_ = bus.RespondError(r, err)
		return
	}
	if !s.reads.acquire(as.Name) {
		_ = bus.RespondError(r, protocol.Errorf(protocol.ErrRateLimited, "too many reads in flight for %s; retry shortly", as.Name))
		return
	}
	replyTo := r.Reply()
	s.wg.Go(func() {
		defer s.reads.release(as.Name)
		_ = bus.RespondLater(s.nc, replyTo, protocol.OpenChatsReply{Chats: s.openChatsEverywhere(ctx, as.Name)})
	})
}

func memberOf(start protocol.AgentMessage, name string) bool {
	for _, c := range start.Team {
		if c.Name == name {
			return true
		}
	}
	return false
}

// rateLimits keeps one token bucket per sending agent.
type rateLimits struct {
	mu    sync.Mutex
	r     rate.Limit
	burst int
	byKey map[string]*rate.Limiter
}

func newRateLimits(perSecond float64, burst int) *rateLimits {
	return &rateLimits{r: rate.Limit(perSecond), burst: burst, byKey: map[string]*rate.Limiter{}}
}

func (l *rateLimits) allow(key string) bool {
	l.mu.Lock()
	lim, ok := l.byKey[key]
	if !ok {
		if len(l.byKey) > 100_000 {
			clear(l.byKey) // bound memory; a reset bucket only forgives
		}
		lim = rate.NewLimiter(l.r, l.burst)
		l.byKey[key] = lim
	}
	l.mu.Unlock()
	return lim.Allow()
}

// forget drops the limiters of a chat that has ended.
func (l *rateLimits) forget(comm string, members []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range members {
		delete(l.byKey, m+"/"+comm)
	}
}
