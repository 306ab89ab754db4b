package protocol_test

import (
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/internal/fuzzworker"
)

// Senders the fuzzer picks from: the three members, an outsider and the
// referee. Indices 5 to 7 mean "whoever the chat expects" (the speaker for
// a turn, the assignee for a task report), so that the fuzzer gets deep into
// the state machine instead of being refused at the door.
var (
	fuzzSenders = []string{alice, bob, carol, mallory, sys}
	fuzzTasks   = []string{"t1", "t2", "t3", "t4", "t9"}
)

// Ops of the first byte of each 4-byte step.
const (
	opDiscussion = iota
	opSyncAssign
	opAsyncAssign
	opPause
	opConclusion
	opProgress
	opResult
	opTurnLimit
	opSpeakerTimeout
	opEnd
	opNote
	opStart
	opUnknown
	numOps
)

// fuzzMessage decodes one step b (4 bytes) into a message for chat c.
func fuzzMessage(c protocol.Chat, b [4]byte) protocol.AgentMessage {
	who := func(expected string) string {
		if i := int(b[1] % 8); i < len(fuzzSenders) {
			return fuzzSenders[i]
		}
		return expected
	}
	var m protocol.AgentMessage
	switch op := b[0] % numOps; op {
	case opDiscussion:
		m = disc(who(c.Speaker))
		switch k := b[2] % 8; {
		case k < 5:
			m.NextSpeaker = []string{fuzzSenders[k]}
		case k == 5:
			m.NextSpeaker = []string{bob, carol}
		case k == 6:
			m.NextSpeaker = []string{""}
		}
	case opSyncAssign, opAsyncAssign:
		typ := protocol.MsgSyncTaskAssign
		if op == opAsyncAssign {
			typ = protocol.MsgAsyncAssign
		}
		m = protocol.AgentMessage{Type: typ, Sender: who(c.Speaker)}
		for i := range int(b[2] % 4) {
			t := task(fuzzTasks[(b[3]>>(2*i))&3], fuzzSenders[(int(b[2]>>2)+i)%4])
			if i == 0 && b[2]&0x80 != 0 {
				t.TaskDesc = ""
			}
			m.Tasks = append(m.Tasks, t)
		}
	case opPause:
		m = pause(who(c.Speaker))
		for i, id := range fuzzTasks {
			if b[2]&(1<<i) != 0 {
				m.Triggers = append(m.Triggers, id)
			}
		}
		if b[2]&0x80 != 0 && len(m.Triggers) > 0 {
			m.Triggers = append(m.Triggers, m.Triggers[0])
		}
	case opConclusion:
		m = conclude(who(c.Speaker), "answer")
		if b[2]&0x80 != 0 { // decided on an earlier entry, or on one not logged yet
			m.SeenSeq = max(c.LastSeq+1, uint64(b[2]&0x7f)) - uint64(b[2]&0x7f)
		}
	case opProgress, opResult:
		id := fuzzTasks[b[2]%5]
		ts, _ := c.Task(id)
		if op == opProgress {
			m = progress(who(ts.Assignee), id)
		} else {
			m = result(who(ts.Assignee), id, []string{completed, failed, failed, "bogus"}[b[3]%4])
		}
	case opTurnLimit, opSpeakerTimeout, opEnd, opNote, opStart:
		event := [...]string{
			protocol.EventTurnLimit, protocol.EventSpeakerTimeout, protocol.EventEnd, protocol.EventNote, protocol.EventStart,
		}[op-opTurnLimit]
		if event == protocol.EventStart {
			m = startMsg(3)
		} else {
			m = sysEvent(event)
		}
		if b[1]&0x80 != 0 { // mostly the referee, sometimes an impostor
			m.Sender = fuzzSenders[b[1]%5]
		}
		m.Status = []string{protocol.GoalFailed, protocol.GoalCancelled, "", protocol.GoalRunning}[b[2]%4]
		m.Reason = "why"
	case opUnknown:
		m = protocol.AgentMessage{Type: []string{"bogus", "", "Discussion"}[b[2]%3], Sender: who(c.Speaker)}
	}
	m.Seq = c.LastSeq + 1
	if b[3] == 0xff {
		m.Seq = c.LastSeq + uint64(b[2]%3) // a replay, the right seq, or a gap
	}
	if b[2]%16 == 15 {
		m.UpdatedPlan = "new plan"
	}
	return m
}

// checkChat asserts what holds of every chat reachable from a start.
func checkChat(t *testing.T, c protocol.Chat) {
	t.Helper()
	if c.Speaker != "" && !c.IsMember(c.Speaker) {
		t.Fatalf("speaker %q is not a member", c.Speaker)
	}
	if c.Turn > c.MaxTurns+1 {
		t.Fatalf("turn %d exceeds max_turns %d + 1", c.Turn, c.MaxTurns)
	}
	switch c.State {
	case protocol.StateDiscussion:
		if len(c.Waiting) != 0 || c.Speaker == "" || c.Resume != "" {
			t.Fatalf("discussion with waiting %v, speaker %q, resume %q", c.Waiting, c.Speaker, c.Resume)
		}
	case protocol.StateSyncTasks, protocol.StateAsyncTasks, protocol.StatePause:
		if len(c.Waiting) == 0 || c.Speaker != "" || !c.IsMember(c.Resume) {
			t.Fatalf("%s with waiting %v, speaker %q, resume %q", c.State, c.Waiting, c.Speaker, c.Resume)
		}
		for i, id := range c.Waiting {
			ts, ok := c.Task(id)
			if !ok || slices.Contains(c.Waiting[:i], id) {
				t.Fatalf("%s waits on unknown or repeated task %q", c.State, id)
			}
			if ts.Async != (c.State != protocol.StateSyncTasks) {
				t.Fatalf("%s waits on task %+v", c.State, ts)
			}
		}
	case protocol.StateConclusion:
		if c.Speaker != "" || len(c.Waiting) != 0 || len(c.RunningTasks()) != 0 || !protocol.GoalEnded(c.Outcome) {
			t.Fatalf("conclusion with speaker %q, waiting %v, running %v, outcome %q", c.Speaker, c.Waiting, c.RunningTasks(), c.Outcome)
		}
	default:
		t.Fatalf("unknown state %q", c.State)
	}
	for i, ts := range c.Tasks {
		if !c.IsMember(ts.Assignee) || !c.IsMember(ts.Assigner) || ts.Attempt < 1 {
			t.Fatalf("bad task %+v", ts)
		}
		if slices.ContainsFunc(c.Tasks[:i], func(o protocol.TaskState) bool { return o.TaskID == ts.TaskID }) {
			t.Fatalf("task %s recorded twice", ts.TaskID)
		}
		if ended := ts.Status == protocol.TaskCompleted || ts.Status == protocol.TaskFailed; ended != (ts.EndedSeq > 0) || ts.EndedSeq > c.LastSeq {
			t.Fatalf("task %s %s with ended_seq %d (last seq %d)", ts.TaskID, ts.Status, ts.EndedSeq, c.LastSeq)
		}
		switch ts.Status {
		case protocol.TaskRunning, protocol.TaskCompleted, protocol.TaskFailed:
		case protocol.TaskCancelled:
			if c.State != protocol.StateConclusion {
				t.Fatalf("task %s cancelled in %s", ts.TaskID, c.State)
			}
		default:
			t.Fatalf("task %s has status %q", ts.TaskID, ts.Status)
		}
	}
}

// checkStep asserts what holds of one Apply(before, m) = after, err.
func checkStep(t *testing.T, before protocol.Chat, m protocol.AgentMessage, after protocol.Chat, err error) {
	t.Helper()
	desc := func() string { return m.Type + "/" + m.Event + " from " + m.Sender }
	if err != nil {
		var pe *protocol.Error
		if !errors.As(err, &pe) || pe.Code == protocol.ErrInternal.Code {
			t.Fatalf("%s: error %v is not a protocol error", desc(), err)
		}
		if !reflect.DeepEqual(after, before) {
			t.Fatalf("%s: refused (%v) but the state changed", desc(), err)
		}
		if m.Seq != before.LastSeq+1 && !errors.Is(err, protocol.ErrInvalid) {
			t.Fatalf("%s: seq %d after %d refused with %v, want invalid", desc(), m.Seq, before.LastSeq, err)
		}
		if m.Seq == before.LastSeq+1 && before.Ended() && !errors.Is(err, protocol.ErrIllegalTransition) {
			t.Fatalf("%s after the conclusion refused with %v, want illegal_transition", desc(), err)
		}
		return
	}
	switch {
	case before.Ended():
		t.Fatalf("%s accepted after the conclusion", desc())
	case m.Seq != before.LastSeq+1:
		t.Fatalf("%s accepted with seq %d after %d", desc(), m.Seq, before.LastSeq)
	case after.LastSeq != before.LastSeq+1:
		t.Fatalf("%s: LastSeq %d -> %d", desc(), before.LastSeq, after.LastSeq)
	case m.Sender == sys:
		if m.Type != protocol.MsgSystem && !(m.Type == protocol.MsgTaskResult && m.TaskStatus == protocol.TaskFailed) {
			t.Fatalf("%s accepted from the referee", desc())
		}
	case !before.IsMember(m.Sender):
		t.Fatalf("%s accepted from a non-member", desc())
	case m.Type == protocol.MsgSystem:
		t.Fatalf("system message accepted from %q", m.Sender)
	}
	wantTurn := before.Turn
	if protocol.IsTurnMessage(m.Type) {
		wantTurn++
		if m.Sender != before.Speaker || before.State != protocol.StateDiscussion {
			t.Fatalf("%s accepted in %s while %q holds the turn", desc(), before.State, before.Speaker)
		}
		if m.Type != protocol.MsgConclusion && (before.FinalTurn || before.Turn >= before.MaxTurns) {
			t.Fatalf("%s accepted at turn %d of %d (final %v)", desc(), before.Turn, before.MaxTurns, before.FinalTurn)
		}
	}
	if after.Turn != wantTurn {
		t.Fatalf("%s: turn %d -> %d, want %d", desc(), before.Turn, after.Turn, wantTurn)
	}
	switch m.Type {
	case protocol.MsgPause:
		for _, id := range m.Triggers {
			ts, ok := before.Task(id)
			if !ok || !ts.Async || ts.Done() {
				t.Fatalf("pause accepted on trigger %q = %+v (known %v)", id, ts, ok)
			}
		}
	case protocol.MsgConclusion:
		for _, ts := range before.Tasks {
			if m.SeenSeq > 0 && ts.EndedSeq > m.SeenSeq {
				t.Fatalf("conclusion decided on seq %d accepted, but task %s ended at %d", m.SeenSeq, ts.TaskID, ts.EndedSeq)
			}
		}
		if m.SeenSeq > before.LastSeq {
			t.Fatalf("conclusion that saw seq %d accepted after %d", m.SeenSeq, before.LastSeq)
		}
	case protocol.MsgTaskProgress, protocol.MsgTaskResult:
		ts, _ := before.Task(m.TaskID)
		if m.Sender != ts.Assignee && m.Sender != sys {
			t.Fatalf("%s on %s accepted, but the assignee is %q", desc(), m.TaskID, ts.Assignee)
		}
		// A report never starts a wait and only ends one.
		if after.State != before.State && after.State != protocol.StateDiscussion {
			t.Fatalf("%s moved %s to %s", desc(), before.State, after.State)
		}
	}
}

func FuzzApply(f *testing.F) {
	fuzzworker.Capture(f)
	step := func(op, who, a, b byte) []byte { return []byte{op, who, a, b} }
	const right = 5 // the sender the chat expects
	// A discussion, a sync round, an async round with a pause, a conclusion,
	// then a message that must be refused.
	full := slices.Concat(
		step(opDiscussion, right, 1, 0),            // alice -> bob
		step(opSyncAssign, right, 2|1<<2, 0|1<<2),  // bob: t1 to bob, t2 to carol
		step(opResult, right, 0, 0),                // t1 completed
		step(opResult, right, 1, 1),                // t2 failed: bob speaks
		step(opAsyncAssign, right, 2|1<<2, 2|3<<2), // t3 bob, t4 carol
		step(opProgress, right, 2, 0),              // t3 progress
		step(opResult, right, 3, 0),                // t4 result: counts as progress
		step(opPause, right, 1<<2, 0),              // pause on t3
		step(opResult, 4, 2, 1),                    // the referee fails t3
		step(opSyncAssign, right, 1|2<<2, 1),       // t2 again (attempt 2) to carol
		step(opResult, right, 1, 0),                // done
		step(opConclusion, right, 0, 0),            // bob concludes
		step(opDiscussion, right, 1, 0),            // refused: terminal
		step(opResult, right, 2, 0),                // refused: terminal
		step(opNote, 0, 0, 0),                      // refused: terminal
		step(opTurnLimit, 0, 0, 0),                 // refused: terminal
		step(opEnd, 0, 0, 0),                       // refused: terminal
	)
	f.Add(uint8(7), full)
	// Run into the turn limit, then the launcher's last turn.
	f.Add(uint8(1), slices.Concat( // max_turns 2
		step(opDiscussion, right, 1, 0), step(opDiscussion, right, 0, 0),
		step(opDiscussion, right, 2, 0), // refused: limit
		step(opTurnLimit, 0, 0, 0),
		step(opSyncAssign, right, 1, 0), // refused: final turn
		step(opConclusion, right, 0, 0),
	))
	// Async tasks outliving their round, a speaker timeout, a referee end.
	f.Add(uint8(6), slices.Concat(
		step(opAsyncAssign, right, 2|1<<2, 0|1<<2),
		step(opProgress, right, 0, 0), step(opProgress, right, 1, 0),
		step(opDiscussion, right, 2, 0),
		step(opResult, right, 0, 0),
		step(opSpeakerTimeout, 0, 0, 0),
		step(opPause, right, 1<<1|0x80, 0), // refused: repeated trigger
		step(opPause, right, 1<<1, 0),
		step(opEnd, 0, 1, 0),
	))
	// A conclusion decided before a result (refused), then after it.
	f.Add(uint8(6), slices.Concat(
		step(opAsyncAssign, right, 2|1<<2, 0|1<<2),
		step(opProgress, right, 0, 0), step(opProgress, right, 1, 0),
		step(opResult, right, 0, 0),
		step(opConclusion, right, 0x82, 0), // refused: seen_seq before t1's result
		step(opConclusion, right, 0x80, 0), // refused: seen_seq not logged yet
		step(opConclusion, right, 0x81, 0),
	))
	// Impostors and outsiders.
	f.Add(uint8(4), slices.Concat(
		step(opNote, 0x80, 0, 0), step(opDiscussion, 3, 1, 0), step(opDiscussion, 1, 1, 0),
		step(opResult, 4, 0, 0), step(opUnknown, right, 0, 0),
	))

	f.Fuzz(func(t *testing.T, maxTurns uint8, data []byte) {
		// Five task ids and nine turns at most: longer logs only revisit
		// states, and huge inputs would stall the fuzzer.
		const maxSteps = 128
		if len(data) > 4*maxSteps {
			data = data[:4*maxSteps]
		}
		c := started(t, int(maxTurns%8)+1)
		for len(data) > 0 {
			var b [4]byte
			data = data[copy(b[:], data):]
			m := fuzzMessage(c, b)
			input := cloneChat(c)
			got, err := protocol.Apply(c, m)
			if !reflect.DeepEqual(c, input) {
				t.Fatalf("Apply mutated its input on %s from %s", m.Type, m.Sender)
			}
			checkStep(t, c, m, got, err)
			again, err2 := protocol.Apply(c, m)
			if !reflect.DeepEqual(got, again) || (err == nil) != (err2 == nil) {
				t.Fatalf("Apply is not deterministic on %s from %s", m.Type, m.Sender)
			}
			c = got
			checkChat(t, c)
		}
	})
}
