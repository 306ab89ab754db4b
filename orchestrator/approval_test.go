package orchestrator_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/internal/stacktest"
	"github.com/ioa-nats/ioa/orchestrator"
)

// A goal with approve_by concludes only when that person approves the
// result its team proposed; a rejection fails it, silence times it out, and
// the wait is in the goal record, so it survives the orchestrator.
func TestGoalNeedsAPersonsApproval(t *testing.T) {
	b := startBusAndRegistry(t)
	first := startInstance(t, b, orchestrator.Config{}, nil)
	st := &stacktest.Stack{Bus: b, URL: b.ClientURL()}
	st.RunAgents(t, nil,
		funcAgent("stepper", "Does the numbered steps of jobs.", []string{"steps"}, func(task agentkit.Task) (string, error) {
			return "done: " + task.TaskDesc, nil
		}),
		agentkit.Agent{Card: protocol.AgentCard{Name: "alice", Description: "A person who approves results.", Type: protocol.TypeHuman}},
	)
	st.WaitOnline(t, "coordinator", "stepper", "alice")
	nc := b.Conn()
	subj := b.Subjects()
	submit := func(req protocol.GoalRequest) (string, error) {
		var r protocol.SubmitReply
		err := bus.Request(t.Context(), nc, subj.Goal(bus.GoalSubmit), req, &r)
		return r.GoalID, err
	}
	get := func(id string) protocol.GoalStatus {
		var g protocol.GoalStatus
		if err := bus.Request(t.Context(), nc, subj.Goal(bus.GoalGet), protocol.GoalIDRequest{GoalID: id}, &g); err != nil {
			t.Fatal(err)
		}
		return g
	}
	answer := func(as string, req protocol.ApproveRequest) (protocol.GoalStatus, error) {
		var g protocol.GoalStatus
		err := bus.Request(t.Context(), nc, subj.Goal(bus.GoalApprove)+"."+as, req, &g)
		return g, err
	}
	awaiting := func(id string) protocol.GoalStatus {
		var g protocol.GoalStatus
		waitFor(t, "goal "+id+" to await approval", func() bool {
			g = get(id)
			return g.Status == protocol.GoalAwaitingApproval
		})
		return g
	}

	if _, err := submit(protocol.GoalRequest{Goal: "Do step one of job 1.", Team: []string{"stepper"}, ApproveBy: "stepper"}); !errors.Is(err, protocol.ErrInvalid) {
		t.Errorf("approve_by an agent that is not a person: %v, want invalid", err)
	}
	approved, err := submit(protocol.GoalRequest{Goal: "Do step one of job 1.", Team: []string{"stepper"}, ApproveBy: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	g := awaiting(approved)
	if g.Result == nil || !strings.Contains(g.Result.Conclusion, "done: Do step one of job 1") {
		t.Fatalf("proposed result %+v", g.Result)
	}
	// The wait is in the record: another instance answers it.
	first.orch.Kill()
	first.stop()
	<-first.done
	startInstance(t, b, orchestrator.Config{}, nil)
	if _, err := answer("mallory", protocol.ApproveRequest{GoalID: approved, Approve: true}); !errors.Is(err, protocol.ErrForbidden) {
		t.Errorf("approval by someone else: %v, want forbidden", err)
	}
	// An answer that says neither yes nor no is no rejection.
	if err := bus.Request(t.Context(), nc, subj.Goal(bus.GoalApprove)+".alice", []byte(`{"goal_id":"`+approved+`"}`), nil); !errors.Is(err, protocol.ErrInvalid) {
		t.Errorf("an answer without approve: %v, want invalid", err)
	}
	// An admin answers for the person the goal waits on, not for another.
	if err := bus.Request(t.Context(), nc, subj.Goal(bus.GoalApprove), protocol.ApproveRequest{GoalID: approved, Approve: true, By: "nobody"}, nil); !errors.Is(err, protocol.ErrForbidden) {
		t.Errorf("an admin's approval by nobody: %v, want forbidden", err)
	}
	if g := get(approved); g.Status != protocol.GoalAwaitingApproval {
		t.Fatalf("after refused answers the goal is %s", g.Status)
	}
	var done protocol.GoalStatus
	waitFor(t, "alice's approval to be taken", func() bool {
		done, err = answer("alice", protocol.ApproveRequest{GoalID: approved, Approve: true, Note: "looks right"})
		return err == nil
	})
	if done.Status != protocol.GoalConcluded || done.Result == nil || done.Result.Outcome != protocol.OutcomeSucceeded ||
		!strings.Contains(done.Result.Reason, "approved by alice: looks right") || done.Result.Conclusion != g.Result.Conclusion {
		t.Errorf("approved goal: %s %+v", done.Status, done.Result)
	}
	if _, err := answer("alice", protocol.ApproveRequest{GoalID: approved, Approve: false}); !errors.Is(err, protocol.ErrConflict) {
		t.Errorf("a second answer: %v, want conflict", err)
	}

	rejected, err := submit(protocol.GoalRequest{Goal: "Do step two of job 2.", Team: []string{"stepper"}, ApproveBy: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	awaiting(rejected)
	if done, err = answer("alice", protocol.ApproveRequest{GoalID: rejected, Note: "wrong job"}); err != nil {
		t.Fatal(err)
	}
	if done.Status != protocol.GoalFailed || done.Result == nil || !strings.Contains(done.Result.Reason, "rejected by alice: wrong job") {
		t.Errorf("rejected goal: %s %+v", done.Status, done.Result)
	}

	silent, err := submit(protocol.GoalRequest{Goal: "Do step three of job 3.", Team: []string{"stepper"}, ApproveBy: "alice", Timeout: protocol.Duration(3 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	awaiting(silent)
	waitFor(t, "the unanswered goal to time out", func() bool { return protocol.GoalEnded(get(silent).Status) })
	if g := get(silent); g.Status != protocol.GoalTimedOut || g.Result == nil || !strings.Contains(g.Result.Reason, "approval_timeout") {
		t.Errorf("unanswered goal: %s %+v", g.Status, g.Result)
	}
}
