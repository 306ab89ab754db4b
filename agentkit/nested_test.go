package agentkit_test

import (
	"context"
	"testing"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/agentkit/rules"
)

// scripted is a launcher that assigns one sync task to a member and
// concludes with its result.
type scripted struct {
	assignee, desc string
}

func (s scripted) TeamUp(_ context.Context, req agentkit.TeamUpRequest) (agentkit.TeamUpDecision, error) {
	return agentkit.TeamUpDecision{Members: req.Team}, nil
}

func (s scripted) NextMessage(_ context.Context, t agentkit.Turn) (protocol.AgentMessage, error) {
	if len(t.Chat.Tasks) == 0 {
		return protocol.AgentMessage{Type: protocol.MsgSyncTaskAssign, Tasks: []protocol.Task{{TaskID: "t1", Assignee: s.assignee, TaskDesc: s.desc}}}, nil
	}
	return protocol.AgentMessage{Type: protocol.MsgConclusion, Content: agentkit.TaskReport(t.Chat.Tasks)}, nil
}

func (s scripted) NeedsTeam(context.Context, agentkit.TeamCheck) (string, error) { return "", nil }

func TestNestedTeam(t *testing.T) {
	const desc = "get the weather in Oslo, and then write the report about it"
	for _, tc := range []struct {
		name       string
		sub        protocol.GoalResult
		status     string
		conclusion string
	}{
		{"concluded", protocol.GoalResult{GoalID: "g9", Status: protocol.GoalConcluded, Conclusion: "Oslo: rain; report written"},
			protocol.TaskCompleted, "Oslo: rain; report written"},
		{"failed", protocol.GoalResult{GoalID: "g9", Status: protocol.GoalFailed, Reason: "turn_limit"},
			protocol.TaskFailed, "nested team goal g9 ended failed: turn_limit"},
		{"concluded, outcome failed", protocol.GoalResult{GoalID: "g9", Status: protocol.GoalConcluded, Outcome: protocol.OutcomeFailed,
			Conclusion: "weather: FAILED", Reason: "0 of 1 parts done; t1 (sky) failed: no such city"},
			protocol.TaskFailed, "nested team goal g9 concluded but did nothing it was asked: 0 of 1 parts done; t1 (sky) failed: no such city"},
		{"concluded, outcome partial", protocol.GoalResult{GoalID: "g9", Status: protocol.GoalConcluded, Outcome: protocol.OutcomePartial,
			Conclusion: "Oslo: rain", Reason: "1 of 2 parts done; t2 (writer) failed: disk full"},
			protocol.TaskCompleted, "Partly done (1 of 2 parts done; t2 (writer) failed: disk full):\nOslo: rain"},
		{"concluded, outcome succeeded", protocol.GoalResult{GoalID: "g9", Status: protocol.GoalConcluded, Outcome: protocol.OutcomeSucceeded, Conclusion: "Oslo: rain"},
			protocol.TaskCompleted, "Oslo: rain"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeNet(t)
			f.subResult = func(protocol.GoalRequest) protocol.GoalResult { return tc.sub }
			never := agentkit.WorkerFunc(func(context.Context, agentkit.Task) (agentkit.Result, error) {
				t.Error("the worker ran a task meant for a nested team")
				return agentkit.Result{}, errNoMove
			})
			f.start([]agentkit.Agent{
				{Card: protocol.AgentCard{Name: "boss", Description: "Coordinates"}, Worker: never, Policy: scripted{assignee: "planner", desc: desc}},
				{Card: protocol.AgentCard{Name: "planner", Description: "Writes the report", NestedTeams: true}, Worker: never, Policy: rules.New(rules.Config{})},
				{Card: protocol.AgentCard{Name: "sky", Description: "Weather in any city", Capabilities: []string{"weather"}}, Worker: never, Policy: rules.New(rules.Config{})},
			})
			comm := f.launch("boss", protocol.LaunchRequest{GoalID: "g3", Goal: "a report on Oslo", Team: []string{"planner"}, MaxTurns: 5, Depth: 1})
			log := f.waitLog(comm, "the conclusion", hasType(protocol.MsgConclusion))

			f.mu.Lock()
			subs := f.submitted
			f.mu.Unlock()
			if len(subs) != 1 {
				t.Fatalf("%d sub-goals submitted, want 1", len(subs))
			}
			s := subs[0]
			if s.Goal != "- get the weather in Oslo\n- write the report about it" || !s.Wait || s.MaxDepth == nil || *s.MaxDepth != 0 || s.Timeout <= 0 ||
				s.Parent == nil || *s.Parent != (protocol.ParentRef{GoalID: "g3", CommID: comm, TaskID: "t1"}) {
				t.Errorf("sub-goal request %+v (parent %+v)", s, s.Parent)
			}
			// Keyed by the task's attempt: sent again, it is the same goal.
			if want := "subgoal/g3/" + comm + "/t1/1"; s.IdempotencyKey != want {
				t.Errorf("sub-goal idempotency_key %q, want %q", s.IdempotencyKey, want)
			}
			var res *protocol.AgentMessage
			for i := range log {
				if log[i].Type == protocol.MsgTaskResult {
					res = &log[i]
				}
			}
			if res == nil || res.Sender != "planner" || res.TaskStatus != tc.status || res.TaskConclusion != tc.conclusion {
				t.Fatalf("task_result %+v, want %s %q from planner", res, tc.status, tc.conclusion)
			}
		})
	}
}
