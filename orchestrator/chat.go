package orchestrator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/segmentio/encoding/json"
)

// chatRecord is the referee's view of a chat: the FSM state plus the
// bookkeeping that is not part of the protocol's pure state. Everything in
// it can be rebuilt from the chat's log and its goal record.
type chatRecord struct {
	Chat           protocol.Chat        `json:"chat"`
	StreamSeq      uint64               `json:"stream_seq"`       // stream sequence of the last logged message
	FirstStreamSeq uint64               `json:"first_stream_seq"` // of the start message: where reading the log begins
	Seen           map[string]sentReply `json:"seen"`             // "sender/id" -> the reply it got
	TurnSince      time.Time            `json:"turn_since"`       // when the current speaker got the turn
	TaskSince      map[string]time.Time `json:"task_since"`       // when each running task was assigned
	Usage          protocol.Usage       `json:"usage"`
	Deadline       time.Time            `json:"deadline"`

	rev      uint64            // KV revision this copy was read at or written as
	checking bool              // a deadline check is queued on the shard
	due      atomic.Int64      // unix ns before which the sweep has nothing to check (0: check at the next tick)
	over     atomic.Bool       // Chat.Ended(), readable off the chat's shard
	dirty    bool              // changed since last saved to KV
	stale    bool              // may be behind the log: rebuild before use
	members  []string          // the team, readable under Service.mu
	last     []byte            // the last logged message, encoded, for nudges
	nudged   int               // nudges sent since the last message
	assigns  map[string][]byte // running task id -> its logged assignment, encoded, for nudges and hand-backs
	inboxes  []inboxOf         // the members' inbox subjects, in member order (fanOut)
	progress map[string]int    // running task id -> task_progress reports logged for its attempt

	goalEnded bool // its goal timed out while the chat could not be read

	trace string // the goal's traceparent, sent with every inbox message ("" untraced)
}

type sentReply struct {
	Seq   uint64         `json:"seq"`
	State protocol.State `json:"state"`
}

// inboxOf is a member and its inbox subject in one chat.
type inboxOf struct{ name, subject string }

func seenKey(sender, id string) string { return sender + "/" + id }

func (s *Service) activeChat(comm string) *chatRecord {
	if comm == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.active[comm]
}

func (s *Service) setActive(comm string, rec *chatRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rec == nil {
		delete(s.active, comm)
		return
	}
	rec.members = slices.Clone(rec.Chat.Members)
	s.active[comm] = rec
}

// chatFor returns the record of a chat, from memory or rebuilt from its log.
// It runs on the chat's shard. A chat rebuilt as ended stays under the sweep
// until its goal is recorded as ended too (endGoal).
func (s *Service) chatFor(ctx context.Context, comm string) (*chatRecord, error) {
	old := s.activeChat(comm)
	if old != nil && !old.stale {
		return old, nil
	}
	if old == nil {
		s.mu.Lock()
		rec := s.ended[comm]
		s.mu.Unlock()
		if rec != nil {
			return rec, nil
		}
	}
	rec, err := s.rebuild(ctx, comm)
	if err != nil {
		return nil, err
	}
	// The chat stays in memory so the sweeper keeps its deadlines, or, if
	// it has ended, makes sure its goal has.
	s.setActive(comm, rec)
	return rec, nil
}

// maxEndedChats bounds the ended chats kept in memory to answer late
// messages (a result after the conclusion) without reading the log again.
const maxEndedChats = 1024

// retire moves an ended chat out of the swept set into a small cache.
func (s *Service) retire(comm string, rec *chatRecord) {
	s.limits.forget(comm, rec.Chat.Members)
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.active, comm)
	if _, ok := s.ended[comm]; !ok {
		s.endedOrder = append(s.endedOrder, comm)
		if len(s.endedOrder) > maxEndedChats {
			delete(s.ended, s.endedOrder[0])
			s.endedOrder = s.endedOrder[1:]
		}
	}
	s.ended[comm] = rec
}

// invalidate marks a chat's record as possibly behind its log (an append
// conflicted or failed). It stays in memory, so its deadlines are still
// watched, and is rebuilt from the log before its next use.
func (s *Service) invalidate(comm string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rec := s.active[comm]; rec != nil {
		rec.stale = true
	}
}

// forgetChat makes the next use of a chat rebuild it from the log.
func (s *Service) forgetChat(comm string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rec := s.active[comm]; rec != nil {
		rec.stale = true
	}
	delete(s.ended, comm)
}

// rebuild folds a chat's log into a fresh record: the log is the truth, so a
// record that is missing or behind in KV (a crash between append and save,
// another instance) is repaired here.
func (s *Service) rebuild(ctx context.Context, comm string) (*chatRecord, error) {
	msgs, _, last, err := s.readChat(ctx, comm, 0, 0)
	if err != nil {
		return nil, err
	}
	if len(msgs) == 0 {
		return nil, protocol.Errorf(protocol.ErrNotFound, "no chat %s", comm)
	}
	if msgs[0].Type != protocol.MsgSystem || msgs[0].Event != protocol.EventStart {
		return nil, protocol.Errorf(protocol.ErrNotFound, "no chat %s (its log does not begin with a start message)", comm)
	}
	// The next append follows the last entry on the subject, foreign or not.
	rec := &chatRecord{Seen: map[string]sentReply{}, TaskSince: map[string]time.Time{}, StreamSeq: last.StreamSeq}
	// Where the log begins: left at 0, the next append would take its own
	// sequence for it, and later reads would miss the start message.
	if subject, err := s.subj.Chat(comm); err == nil {
		if first, err := s.chats.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(subject)); err == nil {
			rec.FirstStreamSeq = first.Sequence
		}
	}
	now := time.Now().UTC()
	for _, m := range msgs {
		next, err := protocol.Apply(rec.Chat, m)
		if err != nil {
			// readChat has left out foreign entries: an own entry that does
			// not fold would be a referee bug. It is passed over, as the
			// members' replicas pass over it.
			s.log.Warn("chat log entry does not fold; skipped", "comm", comm, "seq", m.Seq, "err", err)
			continue
		}
		prev := rec.Chat
		rec.Chat = next
		rec.over.Store(next.Ended())
		rec.note(prev, m, now)
		rec.last = nil // encoded below, once: what nudges send
	}
	if rec.last == nil && len(msgs) > 0 {
		rec.last = bus.Encode(msgs[len(msgs)-1])
	}
	s.ensureTriggers(ctx, comm, msgs)
	var saved chatRecord
	if e, err := s.chatKV.Get(ctx, comm); err == nil {
		rec.rev = e.Revision()
		if json.Unmarshal(e.Value(), &saved) == nil && saved.Chat.LastSeq == rec.Chat.LastSeq {
			rec.TurnSince, rec.TaskSince = saved.TurnSince, saved.TaskSince
		}
	}
	// The goal's deadline; when its record cannot be read now, the one known
	// before, so that the goal timeout never gets lost.
	if st, _, err := s.getGoal(ctx, rec.Chat.GoalID); err == nil {
		rec.Deadline, rec.trace = st.Deadline, tracedBy(st)
	} else if old := s.activeChat(comm); old != nil && !old.Deadline.IsZero() {
		rec.Deadline = old.Deadline
	} else {
		rec.Deadline = saved.Deadline
	}
	return rec, nil
}

// note updates the bookkeeping after m moved the chat from prev to rec.Chat.
func (rec *chatRecord) note(prev protocol.Chat, m protocol.AgentMessage, now time.Time) {
	if m.ID != "" {
		rec.Seen[seenKey(m.Sender, m.ID)] = sentReply{Seq: m.Seq, State: m.State}
	}
	if m.Usage != nil {
		rec.Usage = rec.Usage.Add(*m.Usage)
	}
	// The speaker's clock starts when the turn reaches it.
	if rec.Chat.Speaker != prev.Speaker || protocol.IsTurnMessage(m.Type) || m.Type == protocol.MsgSystem {
		rec.TurnSince = now
	}
	if len(m.Tasks) > 0 {
		if rec.assigns == nil {
			rec.assigns = map[string][]byte{}
		}
		enc := bus.Encode(m)
		for _, t := range m.Tasks {
			rec.TaskSince[t.TaskID] = now
			rec.assigns[t.TaskID] = enc
			delete(rec.progress, t.TaskID) // a new attempt counts afresh
		}
	}
	switch m.Type {
	case protocol.MsgTaskProgress:
		if rec.progress == nil {
			rec.progress = map[string]int{}
		}
		rec.progress[m.TaskID]++
	case protocol.MsgTaskResult:
		delete(rec.TaskSince, m.TaskID)
		delete(rec.assigns, m.TaskID)
		delete(rec.progress, m.TaskID)
	}
	if rec.Chat.Ended() {
		clear(rec.TaskSince)
		clear(rec.assigns)
		clear(rec.progress)
	}
}

// savedResultBytes bounds each task result in the KV copy: the record is a
// summary for people and tools, and the log holds the full text.
const savedResultBytes = 1024

// save writes the record to KV with compare-and-set on its revision.
func (s *Service) save(ctx context.Context, comm string, rec *chatRecord) error {
	// Copy the saved fields only: the flags beside them belong to the sweeper.
	cp := chatRecord{
		Chat: rec.Chat, StreamSeq: rec.StreamSeq, FirstStreamSeq: rec.FirstStreamSeq,
		TurnSince: rec.TurnSince, TaskSince: rec.TaskSince, Usage: rec.Usage, Deadline: rec.Deadline,
	}
	cp.Chat.Tasks = make([]protocol.TaskState, len(rec.Chat.Tasks))
	for i, t := range rec.Chat.Tasks {
		if len(t.Result) > savedResultBytes {
			t.Result = t.Result[:savedResultBytes] + "…"
		}
		if len(t.TaskDesc) > savedResultBytes {
			t.TaskDesc = t.TaskDesc[:savedResultBytes] + "…"
		}
		cp.Chat.Tasks[i] = t
	}
	if len(cp.Chat.Conclusion) > 8*savedResultBytes {
		cp.Chat.Conclusion = cp.Chat.Conclusion[:8*savedResultBytes] + "…"
	}
	data := bus.Encode(&cp)
	known := rec.rev
	rev, err := s.settle(ctx, "chat record "+comm, func(ctx context.Context) (uint64, error) {
		if known == 0 {
			return s.chatKV.Create(ctx, comm, data)
		}
		return s.chatKV.Update(ctx, comm, data, known)
	}, kvStored(s.chatKV, comm, data))
	if err != nil {
		return err
	}
	rec.rev = rev
	return nil
}

// kvStored reads back a key for settle: found when it holds data.
func kvStored(kv jetstream.KeyValue, key string, data []byte) func(context.Context) (uint64, bool, error) {
	return func(ctx context.Context) (uint64, bool, error) {
		e, err := kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return 0, false, nil
		}
		if err != nil {
			return 0, false, err
		}
		return e.Revision(), bytes.Equal(e.Value(), data), nil
	}
}

// chatTail is where a chat's log ends: the stream sequence of the last
// entry on its subject (foreign or not: the next append follows it) and the
// chat seq of its last own entry (zero for a chat with no log).
type chatTail struct {
	StreamSeq, Seq uint64
}

// readChat returns the referee's own logged messages of a chat with seq >
// after (at most limit when limit > 0), the size of each one's logged
// bytes, and where the log ends. The referee logs a message as bus.Encode
// makes it, so the size is the message's size in a reply: a history page is
// cut by it without encoding the messages again. Foreign entries (see
// mark.go) are reported and left out. It walks the chat's subject with
// direct gets (next message by subject), which costs one request per
// message and creates no consumer.
func (s *Service) readChat(ctx context.Context, comm string, after uint64, limit int) ([]protocol.AgentMessage, []int, chatTail, error) {
	subject, err := s.subj.Chat(comm)
	if err != nil {
		return nil, nil, chatTail{}, err
	}
	last, err := s.chats.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil, chatTail{}, nil
	}
	if err != nil {
		return nil, nil, chatTail{}, protocol.Errorf(protocol.ErrUnavailable, "read chat %s: %v", comm, err)
	}
	tail := chatTail{StreamSeq: last.Sequence}
	// When the last entry is foreign, the last own one is found by reading
	// the whole log.
	lastMsg, why := s.verify(comm, last)
	tailKnown := why == ""
	if tailKnown {
		tail.Seq = lastMsg.Seq
		if after >= tail.Seq {
			return nil, nil, tail, nil
		}
	}
	seq := uint64(1)
	if rec := s.activeChat(comm); rec != nil && rec.FirstStreamSeq > 0 {
		seq = rec.FirstStreamSeq
	}
	if tailKnown && after >= seekAfter {
		if seq, err = s.seekChat(ctx, comm, subject, seq, last.Sequence, after); err != nil {
			return nil, nil, chatTail{}, err
		}
	}
	var (
		out   []protocol.AgentMessage
		sizes []int  // len of each out message's logged bytes
		prev  uint64 // seq of the last own entry read
	)
	for seq <= last.Sequence {
		raw, err := s.chats.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if err != nil {
			return nil, nil, chatTail{}, protocol.Errorf(protocol.ErrUnavailable, "read chat %s at %d: %v", comm, seq, err)
		}
		seq = raw.Sequence + 1
		am, why := s.verify(comm, raw)
		if why == "" && am.Seq <= prev {
			why = fmt.Sprintf("seq %d again after %d (a replayed entry)", am.Seq, prev)
		}
		if why != "" {
			s.foreign(comm, raw, why)
			continue
		}
		prev = am.Seq
		if !tailKnown {
			tail.Seq = am.Seq
		}
		if am.Seq > after && (limit <= 0 || len(out) < limit) {
			out = append(out, am)
			sizes = append(sizes, len(raw.Data))
		}
		if limit > 0 && len(out) >= limit && tailKnown {
			break
		}
	}
	return out, sizes, tail, nil
}

// seekAfter is the chat seq from which readChat looks for its starting point
// by bisection rather than reading the chat from its start: a member that
// catches up on a long chat costs O(log n + new messages), not O(n).
const seekAfter = 16

// seekChat returns a stream sequence at or before the first message of the
// chat (on subject, within [lo, hi]) whose chat seq is after `after`. Chat
// seqs grow with stream sequences, so a bisection over the stream's
// sequences, each probe a direct get of the next message on the subject,
// finds it. A foreign probe moves the search left: reading more is safe,
// skipping is not.
func (s *Service) seekChat(ctx context.Context, comm, subject string, lo, hi, after uint64) (uint64, error) {
	for lo < hi {
		mid := lo + (hi-lo)/2
		raw, err := s.chats.GetMsg(ctx, mid, jetstream.WithGetMsgSubject(subject))
		if err != nil {
			return 0, protocol.Errorf(protocol.ErrUnavailable, "read chat %s at %d: %v", comm, mid, err)
		}
		m, why := s.verify(comm, raw)
		if why != "" || m.Seq > after {
			hi = mid
		} else {
			lo = raw.Sequence + 1
		}
	}
	return lo, nil
}

// ensureTriggers publishes to IOA_TASKS the task results of a rebuilt log
// whose trigger is not there: an instance that stopped between appending a
// result and publishing it (effects) left a task finished in the log whose
// waiters would never hear of it. The stream is read first, so a trigger
// already stored is never written twice, whatever the dedupe window.
func (s *Service) ensureTriggers(ctx context.Context, comm string, msgs []protocol.AgentMessage) {
	last := map[string]protocol.AgentMessage{}
	for _, m := range msgs {
		if m.Type == protocol.MsgTaskResult {
			last[m.TaskID] = m
		}
	}
	for id, m := range last {
		subject, err := s.subj.Task(comm, id)
		if err != nil {
			continue
		}
		raw, err := s.tasks.GetLastMsgForSubject(ctx, subject)
		if err == nil {
			var stored protocol.AgentMessage
			if json.Unmarshal(raw.Data, &stored) == nil && stored.Seq >= m.Seq {
				continue
			}
		} else if !errors.Is(err, jetstream.ErrMsgNotFound) {
			s.log.Warn("check task trigger", "comm", comm, "task", id, "err", err)
			continue
		}
		msgID := fmt.Sprintf("%s.%s.%d", comm, id, max(m.Attempt, 1))
		if err := s.publishOnce(ctx, s.tasks, subject, bus.Encode(m), msgID); err != nil {
			s.log.Warn("republish task result", "comm", comm, "task", id, "err", err)
			continue
		}
		s.log.Info("task result published on takeover: its trigger was missing", "comm", comm, "task", id, "attempt", m.Attempt)
	}
}
