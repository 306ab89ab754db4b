package agentkit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/internal/backoff"
	"github.com/ioa-nats/ioa/telemetry"
	"go.opentelemetry.io/otel/attribute"
)

// runTask does one assigned task and reports it: the task_result, and for
// an async task that is still running after progressAfter, a task_progress
// first (the chat waits for one or the other before the assigner speaks
// again, so a task that ends quickly is acknowledged by its result and the
// chat carries one message for it, not two). ctx ends with the chat; a task
// whose chat has ended reports nothing, since the referee refuses late
// results.
func (a *agentState) runTask(ctx context.Context, t Task, progress bool) {
	ctx, span := telemetry.StartAgent(ctx, telemetry.OpExecuteTool, a.Card.Name, t.CommID)
	defer span.End()
	if span.IsRecording() {
		span.SetAttributes(telemetry.AttrGoalID.String(t.GoalID), telemetry.AttrTaskID.String(t.TaskID),
			telemetry.AttrToolName.String(a.Card.Name), attribute.Int("ioa.task.attempt", t.Attempt))
	}
	log := a.log.With("comm_id", t.CommID, "task_id", t.TaskID, "attempt", t.Attempt)
	base := []string{a.Card.Name, t.CommID, t.TaskID, strconv.Itoa(t.Attempt)}
	id := func(kind string) string { return msgID(append(base[:4:4], kind)...) }
	report := func(ctx context.Context, m protocol.AgentMessage) error {
		m.TaskID = t.TaskID
		return a.send(ctx, t.GoalID, t.CommID, m)
	}
	// started is closed once the task_progress is logged (or refused); nil
	// when none is due or it was not sent.
	var started chan struct{}
	var startTimer *time.Timer
	if progress {
		started = make(chan struct{})
		sendStarted := func() {
			defer close(started)
			m := protocol.AgentMessage{ID: id("p0"), Type: protocol.MsgTaskProgress, Content: a.Card.Name + " started " + t.TaskID}
			if err := report(ctx, m); err != nil && ctx.Err() == nil {
				log.Warn("task_progress failed", "err", err)
			}
		}
		if after := a.rt.opts.progressAfter; after > 0 {
			startTimer = time.AfterFunc(after, sendStarted)
		} else {
			sendStarted()
		}
	}
	var notes atomic.Int64
	var refused atomic.Pointer[error] // the quota refusal, once the referee took no more
	t.Progress = func(pctx context.Context, note string) error {
		if err := refused.Load(); err != nil {
			return *err // the referee would refuse this one too: no round trip
		}
		n := notes.Add(1)
		err := report(pctx, protocol.AgentMessage{ID: id("p" + strconv.FormatInt(n, 10)), Type: protocol.MsgTaskProgress, Content: note})
		if errors.Is(err, protocol.ErrQuotaExceeded) {
			refused.Store(&err)
		}
		return err
	}

	select {
	case a.sem <- struct{}{}:
	case <-ctx.Done():
		return
	}
	start := time.Now()
	res, err := a.execute(ctx, t)
	<-a.sem
	if ctx.Err() != nil {
		log.Info("task abandoned: the chat ended or the agent is stopping")
		return
	}
	if startTimer != nil && startTimer.Stop() {
		started = nil // done before it was due: the result acknowledges the task
	}
	if started != nil {
		<-started // a progress already on its way is logged before the result
	}
	m := protocol.AgentMessage{ID: id("r"), Type: protocol.MsgTaskResult, TaskStatus: protocol.TaskCompleted, TaskConclusion: res.Conclusion}
	if err != nil {
		var pe *PanicError
		if errors.As(err, &pe) {
			log.Error("worker panicked", "panic", pe.Value, "stack", string(pe.Stack))
		}
		m.TaskStatus, m.TaskConclusion = protocol.TaskFailed, err.Error()
	}
	m.TaskConclusion = a.clip(m.TaskConclusion)
	telemetry.Fail(span, err)
	log.Info("task done", "status", m.TaskStatus, "elapsed", time.Since(start))
	// The chat waits for this result, so keep trying while the chat lasts;
	// the id makes resending safe.
	for pace := backoff.New(time.Second, 30*time.Second); ; {
		err := report(ctx, m)
		if err == nil || ctx.Err() != nil {
			return
		}
		if !transient(err) {
			log.Error("task_result refused", "err", err)
			return
		}
		log.Warn("task_result not delivered; retrying", "err", err, "in", pace.Pause())
		if !pace.Wait(ctx) {
			return
		}
	}
}

// execute runs the task on a nested team when the policy says it needs one,
// else on the worker; a panic becomes an error.
func (a *agentState) execute(ctx context.Context, t Task) (Result, error) {
	tctx, cancel := context.WithTimeout(ctx, a.rt.opts.taskTimeout)
	defer cancel()
	if a.Card.NestedTeams && t.TeamUpDepth > 0 {
		goal, err := safely(func() (string, error) {
			return a.Policy.NeedsTeam(tctx, TeamCheck{Self: a.Card, Task: t, Registry: a.searcher})
		})
		if err != nil {
			a.log.Warn("needs-team check failed; doing the task alone", "task_id", t.TaskID, "err", err)
		}
		if strings.TrimSpace(goal) != "" && err == nil {
			return a.subgoal(tctx, t, goal)
		}
	}
	res, err := safely(func() (Result, error) { return a.Worker.Run(tctx, t) })
	if err != nil && ctx.Err() == nil && errors.Is(tctx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("task timed out after %v: %w", a.rt.opts.taskTimeout, err)
	}
	return res, err
}

// subgoal hands the task to a nested team (docs/protocol.md section 11) and waits
// for its conclusion.
func (a *agentState) subgoal(ctx context.Context, t Task, text string) (Result, error) {
	depth := t.TeamUpDepth - 1
	req := protocol.GoalRequest{
		Goal:     text,
		Parent:   &protocol.ParentRef{GoalID: t.GoalID, CommID: t.CommID, TaskID: t.TaskID},
		MaxDepth: &depth,
		Wait:     true,
		// One nested team per attempt of a task: the same attempt run
		// again (after a restart) joins the goal it submitted; a new
		// attempt (the task assigned again) forms a new team.
		IdempotencyKey: "subgoal/" + t.GoalID + "/" + t.CommID + "/" + t.TaskID + "/" + strconv.Itoa(max(t.Attempt, 1)),
	}
	if dl, ok := ctx.Deadline(); ok {
		// The orchestrator should give up a little before we stop waiting,
		// so that its reason reaches us.
		req.Timeout = protocol.Duration(time.Until(dl) * 9 / 10)
	}
	a.log.Info("task needs a nested team", "task_id", t.TaskID, "max_depth", depth)
	var res protocol.GoalResult
	// The answer comes when the nested team ends; one lost on the way is
	// asked for again every waitResend (the key makes each copy the same
	// goal, and the latest copy is the one its end answers).
	if err := bus.RequestHeaderAgain(ctx, a.rt.nc, a.bound(a.rt.subj.Goal(bus.GoalSubmit)), telemetry.Inject(ctx, nil), waitResend, req, &res); err != nil {
		return Result{}, fmt.Errorf("nested team: %w", err)
	}
	if res.Status != protocol.GoalConcluded {
		reason := res.Reason
		if reason == "" {
			reason = "no reason given"
		}
		return Result{}, fmt.Errorf("nested team goal %s ended %s: %s", res.GoalID, res.Status, reason)
	}
	// A sub-goal that concluded having done nothing is a failed task; one
	// that did part of it says so at the top of its result.
	switch res.Outcome {
	case protocol.OutcomeFailed:
		return Result{}, fmt.Errorf("nested team goal %s concluded but did nothing it was asked: %s", res.GoalID, res.Reason)
	case protocol.OutcomePartial:
		return Result{Conclusion: fmt.Sprintf("Partly done (%s):\n%s", res.Reason, res.Conclusion)}, nil
	}
	return Result{Conclusion: res.Conclusion}, nil
}

// waitResend is how often a task waiting on its nested team sends its
// submission again, in case the answer was lost.
const waitResend = 30 * time.Second

// clip keeps a task conclusion, as JSON, well under the message size
// limit; a message the referee refuses as too large would leave the task
// running forever.
func (a *agentState) clip(s string) string {
	limit := a.rt.opts.codec.MaxBytes
	if limit <= 0 {
		limit = 64 << 10
	}
	limit = limit * 3 / 4
	const mark = "\n[truncated]"
	for {
		enc, _ := json.Marshal(s)
		over := len(enc) - limit
		if over <= 0 {
			return s
		}
		cut := max(len(s)-over-len(mark), 0)
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + mark
	}
}
