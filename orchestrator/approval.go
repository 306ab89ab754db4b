package orchestrator

import (
	"context"
	"encoding/json"
	"time"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/nats-io/nats.go/micro"
)

// A goal submitted with approve_by concludes only when that person says so.
// When its team concludes, the proposed result goes into the goal record
// with the status awaiting_approval, so the wait is state in KV: a restart
// of anything loses nothing, and whichever instance owns the goal's
// partition keeps its deadline. The person answers on goal.approve
// (console, `ioa chat join`, or any client with its identity): approved,
// the goal concludes with the proposed result; rejected, it fails; no
// answer by the deadline, it times out.

// resultOf is the result a goal ends with. A goal that waited for approval
// keeps the figures of the result its team proposed.
// nested holds the results of the nested teams that did the goal's tasks,
// by task id (nestedResults).
func resultOf(g *protocol.GoalStatus, status, conclusion, reason string, sum *chatSum, nested map[string]*protocol.GoalResult) *protocol.GoalResult {
	var usage protocol.Usage
	var turns int
	var chat *protocol.Chat
	if sum != nil {
		usage, turns, chat = sum.Usage, sum.Turns, sum.Chat
	}
	outcome, why, undone := protocol.GoalOutcome(status, chat, nested)
	if prev := g.Result; prev != nil && g.Status == protocol.GoalAwaitingApproval && sum == nil {
		usage, turns, undone = prev.Usage, prev.Turns, prev.Undone
		if conclusion == "" {
			conclusion = prev.Conclusion
		}
		if status == protocol.GoalConcluded {
			outcome = prev.Outcome
		}
		if prev.Reason != "" {
			reason = prev.Reason + "; " + reason
		}
	}
	if why != "" {
		if reason != "" {
			reason += "; "
		}
		reason += why
	}
	return &protocol.GoalResult{
		GoalID: g.GoalID, Status: status, Conclusion: conclusion, Reason: reason, CommID: g.CommID,
		Turns: turns, Usage: usage, Elapsed: protocol.Duration(time.Since(g.CreatedAt).Round(time.Millisecond)),
		Outcome: outcome, Undone: undone,
	}
}

// approvalRequested announces a goal whose team concluded and which now
// waits for its approver (finishGoal recorded the proposed result).
func (s *Service) approvalRequested(st protocol.GoalStatus) {
	res := *st.Result
	s.event(protocol.GoalEvent{GoalID: st.GoalID, Kind: protocol.EventApprovalRequested, CommID: st.CommID, Result: &res})
	s.log.Info("goal waits for approval", "goal", st.GoalID, "approve_by", st.ApproveBy, "deadline", st.Deadline)
	s.approvalDeadline(st)
}

// approvalDeadline times a goal awaiting approval out at its deadline. The
// timer is this instance's; a takeover arms it again (resume).
func (s *Service) approvalDeadline(st protocol.GoalStatus) {
	id := st.GoalID
	time.AfterFunc(time.Until(st.Deadline), func() {
		ctx := s.runCtx
		if s.closing.Load() || ctx.Err() != nil || !s.mine(id) {
			return
		}
		g, err := s.readGoal(ctx, id)
		if err != nil || g.Status != protocol.GoalAwaitingApproval {
			return
		}
		s.finishOrRetry(ctx, id, protocol.GoalTimedOut, "", "approval_timeout: "+g.ApproveBy+" did not answer by the deadline", nil)
	})
}

// handleApprove answers goal.approve: the person named in the goal's
// approve_by approves or rejects the result its team proposed.
func (s *Service) handleApprove(ctx context.Context, r micro.Request, req *protocol.ApproveRequest) (*protocol.GoalStatus, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	// A missing "approve" would read as false, a rejection nobody meant.
	var given struct {
		Approve *bool `json:"approve"`
	}
	if json.Unmarshal(r.Data(), &given) == nil && given.Approve == nil {
		return nil, protocol.Errorf(protocol.ErrInvalid, `approve is required: true to approve the goal, false to reject it`)
	}
	caller, err := bus.Caller(s.subj.Goal(bus.GoalApprove), r.Subject())
	if err != nil {
		return nil, err
	}
	st, err := s.readGoal(ctx, req.GoalID)
	if err != nil {
		return nil, err
	}
	by := caller
	if by == "" { // an admin connection (the console) names the person
		by = req.By
	}
	switch {
	case st.Status != protocol.GoalAwaitingApproval:
		return nil, protocol.Errorf(protocol.ErrConflict, "goal %s is %s, not awaiting approval", st.GoalID, st.Status)
	case by != "" && by != st.ApproveBy:
		// An admin answers for the person the goal names, never another.
		return nil, protocol.Errorf(protocol.ErrForbidden, "goal %s waits for the approval of %s, not %s", st.GoalID, st.ApproveBy, by)
	case by == "":
		by = st.ApproveBy
	}
	status, reason := protocol.GoalConcluded, "approved by "+by
	if !req.Approve {
		status, reason = protocol.GoalFailed, "rejected by "+by
	}
	if req.Note != "" {
		reason += ": " + req.Note
	}
	if err := s.finishGoal(ctx, st.GoalID, status, "", reason, nil); err != nil {
		return nil, protocol.Errorf(protocol.ErrUnavailable, "record the answer: %v", err)
	}
	st, _, err = s.getGoal(ctx, st.GoalID)
	if err != nil {
		return nil, err
	}
	st.ReplyTo = ""
	return &st, nil
}
