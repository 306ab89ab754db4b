package agentkit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/telemetry"
	"go.opentelemetry.io/otel/attribute"
)

// speak makes the agent's move: it asks the policy, checks the answer
// against the replica, and sends it. A move the FSM or the referee refuses
// goes back to the policy with the reason, a bounded number of times; then
// the runtime makes a safe fallback move, so a chat never stalls on a bad
// policy.
func (l *chatLoop) speak(ctx context.Context) {
	ctx, span := telemetry.StartAgent(l.traced(ctx), telemetry.OpInvokeAgent, l.a.Card.Name, l.comm)
	defer span.End()
	if span.IsRecording() {
		span.SetAttributes(telemetry.AttrGoalID.String(l.chat.GoalID), attribute.Int("ioa.turn", l.chat.Turn+1))
	}
	seq := l.chat.LastSeq
	settle := func() { l.spoken, l.spokeSeq = true, seq }
	var lastErr error
	for attempt := 0; attempt <= l.a.rt.opts.policyRetries; attempt++ {
		msg, err := l.ask(ctx, attempt, lastErr)
		if err == nil {
			if msg.Type == protocol.MsgConclusion {
				// The referee refuses a conclusion that missed a task's
				// result; the refusal makes this loop decide again.
				msg.SeenSeq = seq
			}
			err = l.precheck(msg)
		}
		if err == nil {
			msg.ID = msgID(l.a.Card.Name, l.comm, "s"+strconv.FormatUint(seq, 10), "a"+strconv.Itoa(attempt))
			err = l.a.send(ctx, l.chat.GoalID, l.comm, msg)
			switch {
			case err == nil:
				l.log.Debug("spoke", "type", msg.Type, "after_seq", seq)
				settle()
				return
			case errors.Is(err, protocol.ErrNotYourTurn):
				// The chat moved on while we decided; the messages that
				// moved it are on their way.
				l.log.Info("move no longer our turn", "type", msg.Type, "err", err)
				settle()
				return
			case transient(err):
				// Try again on the next resync, with the same id.
				if ctx.Err() == nil {
					l.log.Warn("could not reach the referee", "err", err)
				}
				return
			}
			// The referee refused what our replica allowed: the chat has
			// probably moved on (a task ended meanwhile). Decide again on
			// the current state; that is not the policy's fault.
			l.refresh(ctx)
			if l.chat.LastSeq != seq {
				l.log.Info("move refused on a stale state; deciding again", "type", msg.Type, "err", err)
				return
			}
		}
		if ctx.Err() != nil {
			return
		}
		var pe *PanicError
		if errors.As(err, &pe) {
			l.log.Error("policy panicked", "panic", pe.Value, "stack", string(pe.Stack))
		}
		l.log.Warn("move refused; asking the policy again", "attempt", attempt, "err", err)
		lastErr = err
	}
	fb := l.fallback(lastErr)
	fb.ID = msgID(l.a.Card.Name, l.comm, "s"+strconv.FormatUint(seq, 10), "fallback")
	err := l.a.send(ctx, l.chat.GoalID, l.comm, fb)
	switch {
	case err == nil:
		l.log.Warn("made a fallback move", "type", fb.Type, "cause", lastErr)
	case transient(err):
		return
	default:
		l.log.Error("fallback move refused; the referee's speaker timeout will move the chat on", "err", err)
	}
	settle()
}

func (l *chatLoop) ask(ctx context.Context, attempt int, lastErr error) (protocol.AgentMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, l.a.rt.opts.policyTimeout)
	defer cancel()
	turn := Turn{
		Self:      l.a.Card,
		Chat:      l.snapshot(),
		Team:      slices.Clone(l.team),
		Recent:    l.recentMessages(),
		Attempt:   attempt,
		LastError: lastErr,
		Registry:  l.a.searcher,
	}
	return safely(func() (protocol.AgentMessage, error) { return l.a.Policy.NextMessage(ctx, turn) })
}

// precheck applies the move to a copy of the replica, so that a move the
// referee would refuse is caught without a round trip. Task ids left empty
// for the referee to fill get placeholders.
func (l *chatLoop) precheck(m protocol.AgentMessage) error {
	if !protocol.IsTurnMessage(m.Type) {
		return protocol.Errorf(protocol.ErrInvalid, "a move must be a discussion, a task assignment, a pause or a conclusion, not %q", m.Type)
	}
	m.Sender, m.Seq = l.a.Card.Name, l.chat.LastSeq+1
	m.Tasks = slices.Clone(m.Tasks)
	for i := range m.Tasks {
		if m.Tasks[i].TaskID == "" {
			m.Tasks[i].TaskID = "precheck-" + strconv.Itoa(i)
		}
	}
	_, err := protocol.Apply(l.chat, m)
	return err
}

// fallback is the safe move: the launcher concludes with what the tasks
// produced; anyone else hands the turn to the launcher, or concludes when
// the turn budget leaves nothing else legal.
func (l *chatLoop) fallback(cause error) protocol.AgentMessage {
	c := &l.chat
	self := l.a.Card.Name
	reason := "the policy gave no valid move"
	if cause != nil {
		reason = fmt.Sprintf("the policy gave no valid move: %v", cause)
	}
	if c.Launcher != self {
		m := protocol.AgentMessage{
			Type:        protocol.MsgDiscussion,
			Content:     fmt.Sprintf("%s: handing the turn back to %s (%s).", self, c.Launcher, reason),
			NextSpeaker: []string{c.Launcher},
		}
		if l.precheck(m) == nil {
			return m
		}
	}
	m := protocol.AgentMessage{
		Type:    protocol.MsgConclusion,
		Content: fmt.Sprintf("Concluded with what is known (%s).\n%s", reason, TaskReport(c.Tasks)),
	}
	if len(c.Tasks) == 0 {
		// Nothing was done: the goal itself was not started, and the
		// outcome must not read as succeeded.
		m.NotStarted = []string{shorten(c.Goal, 200)}
	}
	return m
}

// shorten cuts s to at most n bytes, at a rune boundary, marking the cut.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// TaskReport is one line per task, in assignment order: "<abstract>:
// <result>", with failed and unfinished tasks marked. The rules policy
// concludes with it and the runtime's fallback conclusion uses it.
func TaskReport(tasks []protocol.TaskState) string {
	if len(tasks) == 0 {
		return "No tasks were run."
	}
	var b []byte
	for i, t := range tasks {
		if i > 0 {
			b = append(b, '\n')
		}
		name := t.TaskAbstract
		if name == "" {
			name = t.TaskID
		}
		b = append(b, name...)
		switch t.Status {
		case protocol.TaskCompleted:
			b = append(b, ": "...)
			b = append(b, t.Result...)
		case protocol.TaskFailed:
			b = append(b, ": FAILED: "...)
			b = append(b, t.Result...)
		default:
			b = append(b, ": not finished ("...)
			b = append(b, t.Status...)
			b = append(b, ')')
		}
	}
	return string(b)
}

// recentMessages copies the recent messages for a policy, which may keep or
// change its Turn.
func (l *chatLoop) recentMessages() []protocol.AgentMessage {
	if len(l.recent) == 0 {
		return nil
	}
	out := make([]protocol.AgentMessage, len(l.recent))
	for i, m := range l.recent {
		out[i] = *m
	}
	return out
}
