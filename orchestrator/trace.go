package orchestrator

import (
	"context"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/telemetry"
)

// Goal spans: a goal is one trace. Its root span ("ioa.goal") starts when
// the goal is accepted and ends when its end is recorded; the instance that
// accepted it keeps the open span in goalSpans. The goal record keeps the
// span's traceparent, so whoever carries the goal on (the launcher, every
// member through the chat's inbox messages, another instance after a
// failover) continues the same trace.

// startGoalSpan starts a goal's root span under ctx's span, if any.
func (s *Service) startGoalSpan(ctx context.Context, st protocol.GoalStatus) (context.Context, trace.Span) {
	ctx, span := telemetry.Start(ctx, "ioa.goal", trace.SpanKindServer)
	if span.IsRecording() {
		span.SetAttributes(telemetry.AttrOperation.String(telemetry.OpInvokeAgent),
			telemetry.AttrAgentName.String(st.Launcher), telemetry.AttrGoalID.String(st.GoalID))
		s.goalSpans.Store(st.GoalID, span)
	}
	return ctx, span
}

// endGoalSpan ends the root span of a goal that has ended. A goal started
// by another instance (or before a restart) gets a short "ioa.goal.end"
// span in its trace instead.
func (s *Service) endGoalSpan(st protocol.GoalStatus) {
	var span trace.Span
	if v, ok := s.goalSpans.LoadAndDelete(st.GoalID); ok {
		span = v.(trace.Span)
	} else if st.TraceParent != "" && telemetry.Enabled() {
		_, span = telemetry.Start(telemetry.WithTraceParent(context.Background(), st.TraceParent), "ioa.goal.end", trace.SpanKindInternal)
		span.SetAttributes(telemetry.AttrGoalID.String(st.GoalID))
	} else {
		return
	}
	if r := st.Result; r != nil {
		span.SetAttributes(telemetry.AttrStatus.String(r.Status), telemetry.AttrOutcome.String(r.Outcome),
			telemetry.AttrInputTokens.Int(r.Usage.PromptTokens), telemetry.AttrOutputTokens.Int(r.Usage.CompletionTokens))
		if r.Status != protocol.GoalConcluded {
			span.SetStatus(codes.Error, r.Status+": "+r.Reason)
		}
	}
	if st.CommID != "" {
		span.SetAttributes(telemetry.AttrConversation.String(st.CommID))
	}
	span.End()
}

// endGoalSpans ends the spans of goals still open at shutdown: another
// instance will end the goals, in spans of their own.
func (s *Service) endGoalSpans() {
	s.goalSpans.Range(func(k, v any) bool {
		s.goalSpans.Delete(k)
		v.(trace.Span).End()
		return true
	})
}

// tracedBy is the traceparent a goal's chat sends with its messages: none
// while this instance does not trace.
func tracedBy(st protocol.GoalStatus) string {
	if !telemetry.Enabled() {
		return ""
	}
	return st.TraceParent
}

// inboxMsg is a message for a member's inbox, with the goal's traceparent
// header when the chat is traced.
func inboxMsg(subject string, data []byte, traceParent string) *nats.Msg {
	return &nats.Msg{Subject: subject, Data: data, Header: telemetry.HeaderOf(traceParent)}
}
