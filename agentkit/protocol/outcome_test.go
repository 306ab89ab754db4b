package protocol

import (
	"slices"
	"strings"
	"testing"
)

func TestGoalOutcome(t *testing.T) {
	task := func(id, who, status, result string) TaskState {
		return TaskState{Task: Task{TaskID: id, Assignee: who, TaskAbstract: "do " + id}, Status: status, Result: result}
	}
	tests := []struct {
		name, status string
		chat         *Chat
		nested       map[string]*GoalResult
		outcome      string
		reason       []string // parts of the reason
		undone       []string
	}{
		{"every task done", GoalConcluded, &Chat{Tasks: []TaskState{task("t1", "a", TaskCompleted, "ok"), task("t2", "b", TaskCompleted, "ok")}},
			nil, OutcomeSucceeded, nil, nil},
		{"no tasks, nothing undone", GoalConcluded, &Chat{}, nil, OutcomeSucceeded, nil, nil},
		{"one of two failed", GoalConcluded, &Chat{Tasks: []TaskState{task("t1", "a", TaskCompleted, "ok"), task("t2", "b", TaskFailed, "disk full\nmore")}},
			nil, OutcomePartial, []string{"1 of 2 parts done", "t2 (b) failed: disk full"}, []string{"do t2"}},
		{"all failed", GoalConcluded, &Chat{Tasks: []TaskState{task("t1", "a", TaskFailed, "")}},
			nil, OutcomeFailed, []string{"0 of 1 parts done", "t1 (a) failed"}, []string{"do t1"}},
		{"nobody could do it", GoalConcluded, &Chat{Undone: []string{"write a haiku"}},
			nil, OutcomeFailed, []string{"0 of 1 parts done", `no registered agent can do "write a haiku"`}, []string{"write a haiku"}},
		{"done, unfinished and undone", GoalConcluded, &Chat{Tasks: []TaskState{task("t1", "a", TaskCompleted, "ok"), task("t2", "b", TaskCancelled, "")}, Undone: []string{"x"}},
			nil, OutcomePartial, []string{"1 of 3 parts done", "t2 (b) did not finish", `no registered agent can do "x"`}, []string{"do t2", "x"}},
		{"the chat ended before a part was assigned", GoalConcluded, &Chat{Tasks: []TaskState{task("t1", "a", TaskCompleted, "ok")}, NotStarted: []string{"write a report"}},
			nil, OutcomePartial, []string{"1 of 2 parts done", `"write a report" was not started before the chat ended`}, []string{"write a report"}},
		{"timed out after some work", GoalTimedOut, &Chat{Tasks: []TaskState{task("t1", "a", TaskCompleted, "ok"), task("t2", "b", TaskCancelled, "")}},
			nil, OutcomePartial, []string{"1 of 2 parts done"}, []string{"do t2"}},
		{"failed before a chat", GoalFailed, nil, nil, OutcomeFailed, nil, nil},
		{"cancelled, nothing done", GoalCancelled, &Chat{}, nil, OutcomeFailed, nil, nil},
		{"a nested team did part of the only task", GoalConcluded, &Chat{Tasks: []TaskState{task("t1", "a", TaskCompleted, "Partly done")}},
			map[string]*GoalResult{"t1": {GoalID: "g2", Outcome: OutcomePartial, Reason: "1 of 2 parts done; x failed", Undone: []string{"x"}}},
			OutcomePartial, []string{"0 of 1 parts done (1 more in part)", "t1 (a) done in part by nested goal g2: 1 of 2 parts done; x failed"}, []string{"x"}},
		{"a nested team did all of its task", GoalConcluded, &Chat{Tasks: []TaskState{task("t1", "a", TaskCompleted, "ok"), task("t2", "b", TaskCompleted, "ok")}},
			map[string]*GoalResult{"t1": {GoalID: "g2", Outcome: OutcomeSucceeded}, "t3": {GoalID: "g3", Outcome: OutcomePartial}},
			OutcomeSucceeded, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			outcome, reason, undone := GoalOutcome(tt.status, tt.chat, tt.nested)
			if outcome != tt.outcome || !slices.Equal(undone, tt.undone) {
				t.Errorf("got %s %v (%q), want %s %v", outcome, undone, reason, tt.outcome, tt.undone)
			}
			for _, part := range tt.reason {
				if !strings.Contains(reason, part) {
					t.Errorf("reason %q lacks %q", reason, part)
				}
			}
			if tt.reason == nil && reason != "" {
				t.Errorf("reason %q, want none", reason)
			}
		})
	}
}

func TestUndoneOnlyInAConclusion(t *testing.T) {
	c := Chat{CommID: "c1", Launcher: "lead", Members: []string{"lead"}, State: StateDiscussion, Speaker: "lead", MaxTurns: 5, LastSeq: 1}
	_, err := Apply(c, AgentMessage{Type: MsgDiscussion, Sender: "lead", Seq: 2, Content: "hm", NextSpeaker: []string{"lead"}, Undone: []string{"x"}})
	if err == nil || !strings.Contains(err.Error(), "undone belongs in a conclusion") {
		t.Fatalf("undone in a discussion: err = %v", err)
	}
	if _, err := Apply(c, AgentMessage{Type: MsgConclusion, Sender: "lead", Seq: 2, Undone: []string{" "}}); err == nil {
		t.Fatal("an empty undone part was accepted")
	}
	if _, err := Apply(c, AgentMessage{Type: MsgDiscussion, Sender: "lead", Seq: 2, Content: "hm", NextSpeaker: []string{"lead"}, NotStarted: []string{"x"}}); err == nil ||
		!strings.Contains(err.Error(), "not_started belongs in a conclusion") {
		t.Fatalf("not_started in a discussion: err = %v", err)
	}
	if _, err := Apply(c, AgentMessage{Type: MsgConclusion, Sender: "lead", Seq: 2, NotStarted: []string{""}}); err == nil {
		t.Fatal("an empty not_started part was accepted")
	}
	n, err := Apply(c, AgentMessage{Type: MsgConclusion, Sender: "lead", Seq: 2, Content: "done", Undone: []string{"x"}, NotStarted: []string{"y"}})
	if err != nil || !slices.Equal(n.Undone, []string{"x"}) || !slices.Equal(n.NotStarted, []string{"y"}) || n.Outcome != GoalConcluded {
		t.Fatalf("conclusion with undone and not_started: %+v, %v", n, err)
	}
}
