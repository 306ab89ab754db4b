package orchestrator

import (
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit/protocol"
)

// The sweep visits a chat only when nextCheck says something is due; each
// case is the deadline that must come first, so a wrong one fails.
func TestNextCheckIsTheFirstDeadline(t *testing.T) {
	s := &Service{cfg: Config{SpeakerTimeout: 3 * time.Second, TaskTimeout: 1500 * time.Millisecond}}
	now := time.Now()
	speaking := protocol.Chat{State: protocol.StateDiscussion, Speaker: "a"}
	paused := protocol.Chat{State: protocol.StatePause, Tasks: []protocol.TaskState{
		{Task: protocol.Task{TaskID: "t1", Assignee: "b"}, Status: protocol.TaskRunning},
		{Task: protocol.Task{TaskID: "t2", Assignee: "c"}, Status: protocol.TaskCompleted},
	}}
	cases := []struct {
		name string
		rec  *chatRecord
		want time.Time
	}{
		{"first nudge", &chatRecord{Chat: speaking, TurnSince: now.Add(-500 * time.Millisecond)}, now.Add(500 * time.Millisecond)},
		{"second nudge", &chatRecord{Chat: speaking, TurnSince: now.Add(-1500 * time.Millisecond), nudged: 1}, now.Add(500 * time.Millisecond)},
		{"speaker timeout", &chatRecord{Chat: speaking, TurnSince: now.Add(-1500 * time.Millisecond), nudged: 2}, now.Add(1500 * time.Millisecond)},
		{"goal deadline", &chatRecord{Chat: speaking, TurnSince: now, nudged: 2, Deadline: now.Add(300 * time.Millisecond)}, now.Add(300 * time.Millisecond)},
		{"nothing soon: at most maxCheckEvery", &chatRecord{Chat: protocol.Chat{State: protocol.StatePause}, nudged: 2}, now.Add(maxCheckEvery)},
		{"not saved yet", &chatRecord{Chat: speaking, TurnSince: now, dirty: true}, now},
		{"running task timeout (a done one counts not)", &chatRecord{Chat: paused, nudged: 2,
			TaskSince: map[string]time.Time{"t1": now.Add(-time.Second), "t2": now.Add(-1400 * time.Millisecond)}}, now.Add(500 * time.Millisecond)},
	}
	for _, c := range cases {
		if got := s.nextCheck(c.rec, now); !got.Equal(c.want) {
			t.Errorf("%s: next check in %v, want %v", c.name, got.Sub(now), c.want.Sub(now))
		}
	}
	// Waiting on a member longer than goneCheckAfter: asked about every
	// goneRecheck, not every tick.
	s.cfg.SpeakerTimeout, s.cfg.TaskTimeout = time.Hour, time.Hour
	long := &chatRecord{Chat: speaking, TurnSince: now.Add(-2 * goneCheckAfter), nudged: 2}
	if got := s.nextCheck(long, now); !got.Equal(now.Add(goneRecheck)) {
		t.Errorf("silent speaker past goneCheckAfter: next check in %v, want %v", got.Sub(now), goneRecheck)
	}
	fresh := &chatRecord{Chat: speaking, TurnSince: now.Add(-time.Second), nudged: 2}
	if got := s.nextCheck(fresh, now); !got.Equal(now.Add(goneCheckAfter - time.Second)) {
		t.Errorf("speaker 1s in: next check in %v, want its liveness check, %v away", got.Sub(now), goneCheckAfter-time.Second)
	}
	// An end not recorded yet, or a record to rebuild, is retried soon.
	for _, rec := range []*chatRecord{
		{Chat: protocol.Chat{State: protocol.StateConclusion}, nudged: 2},
		{Chat: protocol.Chat{State: protocol.StatePause}, nudged: 2, stale: true},
	} {
		if got := s.nextCheck(rec, now); !got.Equal(now.Add(retryCheckEvery)) {
			t.Errorf("state %s stale %v: next check in %v, want %v", rec.Chat.State, rec.stale, got.Sub(now), retryCheckEvery)
		}
	}
}
