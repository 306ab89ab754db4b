package agentkit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"time"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/internal/backoff"
	"github.com/ioa-nats/ioa/telemetry"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

const (
	sendAttempts = 5
	sendBackoff  = 100 * time.Millisecond
)

// send puts m in the agent's outbox for the chat. Transport failures and
// the referee's transient refusals are retried with the same message id, so
// the referee logs the message at most once.
func (a *agentState) send(ctx context.Context, goalID, comm string, m protocol.AgentMessage) error {
	subj, err := a.rt.subj.Outbox(a.Card.Name, comm)
	if err != nil {
		return err
	}
	m.V, m.CommID, m.GoalID, m.Sender = protocol.Version, comm, goalID, a.Card.Name
	if u := a.takeUsage(goalID); u != (protocol.Usage{}) {
		if m.Usage != nil {
			u = u.Add(*m.Usage)
		}
		m.Usage = &u
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attribute.String("ioa.message.type", m.Type))
		if m.Usage != nil {
			span.SetAttributes(telemetry.AttrInputTokens.Int(m.Usage.PromptTokens), telemetry.AttrOutputTokens.Int(m.Usage.CompletionTokens))
		}
	}
	hdr := telemetry.Inject(ctx, nil)
	pace := backoff.New(sendBackoff, 16*sendBackoff)
	for attempt := 1; ; attempt++ {
		rctx, cancel := context.WithTimeout(ctx, a.rt.opts.requestTimeout)
		var out protocol.SendReply
		err = bus.RequestHeader(rctx, a.rt.nc, subj, hdr, m, &out)
		cancel()
		if err == nil || !transient(err) || attempt == sendAttempts || !pace.Wait(ctx) {
			return err
		}
	}
}

// takeUsage collects what the agent's policy and worker spent for the goal.
// A value that is both policy and worker is asked twice; the second take
// finds nothing left.
func (a *agentState) takeUsage(goalID string) protocol.Usage {
	var u protocol.Usage
	if m, ok := a.Policy.(UsageMeter); ok {
		u = u.Add(m.TakeUsage(a.Card.Name, goalID))
	}
	if m, ok := a.Worker.(UsageMeter); ok {
		u = u.Add(m.TakeUsage(a.Card.Name, goalID))
	}
	return u
}

// transient reports whether a request may succeed if sent again unchanged.
func transient(err error) bool {
	if !isProtocolError(err) {
		return true
	}
	return errors.Is(err, protocol.ErrUnavailable) || errors.Is(err, protocol.ErrRateLimited) || errors.Is(err, protocol.ErrTimeout)
}

// msgID builds a message id from what identifies the move, so that a retry,
// even by a restarted agent, carries the same id. Readable when it fits the
// id syntax, a hash otherwise.
// MessageID is the message id agentkit builds from parts (joined by "-"),
// so that a retry reuses it: <agent>-<comm>-s<seq>-a<attempt> for a move,
// <agent>-<comm>-<task>-<attempt>-r for a task's result. An id that would
// not fit the id pattern is "m" plus a SHA-256 prefix.
func MessageID(parts ...string) string { return msgID(parts...) }

func msgID(parts ...string) string {
	id := strings.Join(parts, "-")
	if protocol.ValidID(id) {
		return id
	}
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return "m" + hex.EncodeToString(sum[:20])
}
