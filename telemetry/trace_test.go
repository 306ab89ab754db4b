package telemetry_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/builtin"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/agentkit/rules"
	"github.com/ioa-nats/ioa/internal/stacktest"
	"github.com/ioa-nats/ioa/telemetry"
)

// traceInMemory turns tracing on for the test with an in-memory exporter
// (spans are exported as they end) and off again when it ends.
func traceInMemory(t *testing.T) *tracetest.InMemoryExporter {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	telemetry.SetTracerProvider(tp)
	t.Cleanup(func() {
		telemetry.SetTracerProvider(nil)
		_ = tp.Shutdown(context.Background())
	})
	return exp
}

// ended reports whether a span matching is exported (has ended). A goal's
// root span ends just before its waiting submitter is answered, and a
// task's span just after its result is sent, so a test reading spans waits
// for the ones it needs.
func ended(exp *tracetest.InMemoryExporter, matching func(tracetest.SpanStub) bool) bool {
	return slices.ContainsFunc(exp.GetSpans(), matching)
}

// goalSpan matches the root span of a goal.
func goalSpan(goal string) func(tracetest.SpanStub) bool {
	return func(sp tracetest.SpanStub) bool {
		return sp.Name == "ioa.goal" && attr(sp, telemetry.AttrGoalID) == goal
	}
}

func attr(s tracetest.SpanStub, key attribute.Key) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value.String()
		}
	}
	return ""
}

// TestHeaderCarrierIsCaseExact: the header is "traceparent", exactly.
func TestHeaderCarrierIsCaseExact(t *testing.T) {
	traceInMemory(t)
	ctx, span := telemetry.Start(context.Background(), "x", trace.SpanKindInternal)
	defer span.End()
	h := telemetry.Inject(ctx, nil)
	if len(h[telemetry.HeaderTraceParent]) != 1 || len(h["Traceparent"]) != 0 {
		t.Fatalf("header keys %v, want exactly traceparent", h)
	}
	want := span.SpanContext()
	got := trace.SpanContextFromContext(telemetry.Extract(context.Background(), h))
	if got.TraceID() != want.TraceID() || got.SpanID() != want.SpanID() || !got.IsRemote() {
		t.Fatalf("extracted %v, want remote %v", got, want)
	}
	// A key in net/http's canonical form is not the protocol's header.
	canon := nats.Header{"Traceparent": h[telemetry.HeaderTraceParent]}
	if trace.SpanContextFromContext(telemetry.Extract(context.Background(), canon)).IsValid() {
		t.Fatalf("extracted a span context from %v", canon)
	}
}

// TestOffIsFree: with tracing off, starting spans and propagating them
// allocate nothing, and so do the metrics of a nil *Metrics.
func TestOffIsFree(t *testing.T) {
	telemetry.SetTracerProvider(nil)
	ctx := context.Background()
	h := nats.Header{"traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}
	var m *telemetry.Metrics
	allocs := testing.AllocsPerRun(200, func() {
		c, span := telemetry.StartAgent(telemetry.Extract(ctx, h), telemetry.OpInvokeAgent, "a", "c")
		if span.IsRecording() {
			t.Fatal("recording while off")
		}
		_ = telemetry.Inject(c, nil)
		_ = telemetry.TraceParent(c)
		_ = telemetry.WithTraceParent(c, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
		span.End()
		m.Turn(1)
		m.GoalEnded("concluded", "succeeded", 1)
		m.Refused(nil)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per turn's telemetry while off, want 0", allocs)
	}
}

// TestOneTracePerGoal runs goals on a real stack with tracing on and checks
// that each goal is one trace: its root span, and under it the team-up
// (with the registry search below it), the turns and the tasks, each with
// the GenAI attributes.
func TestOneTracePerGoal(t *testing.T) {
	exp := traceInMemory(t)
	s := stacktest.Start(t, stacktest.Options{Coordinator: true})
	s.RunAgents(t, nil, demoAgents(t)...)
	goals := []string{"Compute 6 * 7", "Convert 42 km to miles"}
	var results []protocol.GoalResult
	for _, g := range goals {
		res := s.Submit(t, protocol.GoalRequest{Goal: g})
		if res.Status != protocol.GoalConcluded {
			t.Fatalf("goal %q: %s (%s)", g, res.Status, res.Reason)
		}
		results = append(results, res)
	}
	// The last turn span ends when its sender has the referee's answer,
	// which may come after the goal's result.
	turnSpans := func(comm string) int {
		n := 0
		for _, sp := range exp.GetSpans() {
			if attr(sp, telemetry.AttrOperation) == telemetry.OpInvokeAgent && attr(sp, telemetry.AttrConversation) == comm && strings.HasPrefix(sp.Name, "invoke_agent ") {
				n++
			}
		}
		return n
	}
	// A task's span ends just after its result is sent, which may also be
	// after the goal's result (a contended run read the spans without it).
	taskSpan := func(comm string) func(tracetest.SpanStub) bool {
		return func(sp tracetest.SpanStub) bool {
			return strings.HasPrefix(sp.Name, "execute_tool ") && attr(sp, telemetry.AttrConversation) == comm
		}
	}
	for _, res := range results {
		stacktest.WaitFor(t, "the turn spans of "+res.GoalID, func() bool { return turnSpans(res.CommID) >= res.Turns })
		stacktest.WaitFor(t, "the root span of "+res.GoalID, func() bool { return ended(exp, goalSpan(res.GoalID)) })
		stacktest.WaitFor(t, "the task span of "+res.GoalID, func() bool { return ended(exp, taskSpan(res.CommID)) })
	}
	spans := exp.GetSpans()
	byID := map[trace.SpanID]tracetest.SpanStub{}
	for _, sp := range spans {
		byID[sp.SpanContext.SpanID()] = sp
	}
	traces := map[trace.TraceID]string{} // trace -> goal
	for _, res := range results {
		var root *tracetest.SpanStub
		for i, sp := range spans {
			if sp.Name == "ioa.goal" && attr(sp, telemetry.AttrGoalID) == res.GoalID {
				if root != nil {
					t.Fatalf("goal %s has two root spans", res.GoalID)
				}
				root = &spans[i]
			}
		}
		if root == nil {
			t.Fatalf("goal %s has no root span", res.GoalID)
		}
		if root.Parent.IsValid() {
			t.Errorf("goal %s: root span has a parent %v", res.GoalID, root.Parent)
		}
		if got := attr(*root, telemetry.AttrConversation); got != res.CommID {
			t.Errorf("goal %s: root span's %s = %q, want %q", res.GoalID, telemetry.AttrConversation, got, res.CommID)
		}
		if g, dup := traces[root.SpanContext.TraceID()]; dup {
			t.Fatalf("goals %s and %s share a trace", g, res.GoalID)
		}
		tid := root.SpanContext.TraceID()
		traces[tid] = res.GoalID
		count := map[string]int{}
		for _, sp := range spans {
			if sp.SpanContext.TraceID() != tid || sp.SpanContext.SpanID() == root.SpanContext.SpanID() {
				// Nothing of this goal's chat is in another trace.
				if c := attr(sp, telemetry.AttrConversation); c == res.CommID && sp.SpanContext.TraceID() != tid {
					t.Errorf("span %q of chat %s is in trace %s, not the goal's %s", sp.Name, c, sp.SpanContext.TraceID(), tid)
				}
				continue
			}
			parent, ok := byID[sp.Parent.SpanID()]
			if !ok {
				t.Errorf("span %q: parent %s not among the spans", sp.Name, sp.Parent.SpanID())
				continue
			}
			kind := strings.Fields(sp.Name)[0]
			count[kind]++
			switch kind {
			case "team_up", "invoke_agent", "execute_tool":
				// The launcher's team-up, each turn and each task hang
				// from the goal's span.
				if parent.SpanContext.SpanID() != root.SpanContext.SpanID() {
					t.Errorf("span %q: parent %q, want the goal's span", sp.Name, parent.Name)
				}
				if attr(sp, telemetry.AttrAgentName) == "" {
					t.Errorf("span %q has no %s", sp.Name, telemetry.AttrAgentName)
				}
				if kind != "team_up" && attr(sp, telemetry.AttrConversation) != res.CommID {
					t.Errorf("span %q: %s = %q, want %s", sp.Name, telemetry.AttrConversation, attr(sp, telemetry.AttrConversation), res.CommID)
				}
			case "registry.search":
				// The coordinator searches while it forms the team.
				if !strings.HasPrefix(parent.Name, "team_up ") && !strings.HasPrefix(parent.Name, "invoke_agent ") {
					t.Errorf("registry.search under %q, want under the team-up or a turn", parent.Name)
				}
			default:
				t.Errorf("unexpected span %q in the goal's trace", sp.Name)
			}
		}
		if count["team_up"] != 1 || count["registry.search"] < 1 || count["invoke_agent"] < res.Turns || count["execute_tool"] < 1 {
			t.Errorf("goal %s (%d turns): spans %v, want 1 team_up, a registry.search, a turn span per turn and a task", res.GoalID, res.Turns, count)
		}
		t.Logf("goal %s: trace %s: %s", res.GoalID, tid, fmt.Sprint(count))
	}
}

// TestNestedGoalInItsParentsTrace: a sub-goal that a member submits for its
// task is in the parent goal's trace, its root span a child of the
// member's task span.
func TestNestedGoalInItsParentsTrace(t *testing.T) {
	exp := traceInMemory(t)
	s := stacktest.Start(t, stacktest.Options{Coordinator: true})
	planner, err := builtin.New("calculator", builtin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	agents := append(demoAgents(t), agentkit.Agent{Card: protocol.AgentCard{Name: "trip-planner", Type: protocol.TypeTool, NestedTeams: true,
		Description:  "Prepares travel and packing budgets by teaming up with agents that convert units and compute costs.",
		Capabilities: []string{"packing budget", "trip budget", "travel planning"}},
		Worker: planner, Policy: rules.New(rules.Config{})})
	s.RunAgents(t, nil, agents...)
	res := s.Submit(t, protocol.GoalRequest{Goal: "Prepare a packing budget: convert 20 kg to pounds and compute 3 * 45."})
	if res.Status != protocol.GoalConcluded || !strings.Contains(res.Conclusion, "135") {
		t.Fatalf("goal: %s (%s):\n%s", res.Status, res.Reason, res.Conclusion)
	}
	stacktest.WaitFor(t, "the goal's root span and the trip planner's task span", func() bool {
		return ended(exp, goalSpan(res.GoalID)) && ended(exp, func(sp tracetest.SpanStub) bool { return sp.Name == "execute_tool trip-planner" })
	})
	spans := exp.GetSpans()
	byID := map[trace.SpanID]tracetest.SpanStub{}
	var root tracetest.SpanStub
	for _, sp := range spans {
		byID[sp.SpanContext.SpanID()] = sp
		if sp.Name == "ioa.goal" && attr(sp, telemetry.AttrGoalID) == res.GoalID {
			root = sp
		}
	}
	if !root.SpanContext.IsValid() || root.Parent.IsValid() {
		t.Fatalf("goal %s: root span %+v", res.GoalID, root.SpanContext)
	}
	var subs []tracetest.SpanStub
	for _, sp := range spans {
		if sp.Name == "ioa.goal" && attr(sp, telemetry.AttrGoalID) != res.GoalID {
			subs = append(subs, sp)
		}
	}
	if len(subs) != 1 {
		t.Fatalf("%d other goal spans, want the one sub-goal's", len(subs))
	}
	sub := subs[0]
	if sub.SpanContext.TraceID() != root.SpanContext.TraceID() {
		t.Fatalf("the sub-goal is in trace %s, not its parent's %s", sub.SpanContext.TraceID(), root.SpanContext.TraceID())
	}
	task, ok := byID[sub.Parent.SpanID()]
	if !ok || task.Name != "execute_tool trip-planner" || task.Parent.SpanID() != root.SpanContext.SpanID() {
		t.Fatalf("the sub-goal's span hangs from %q (parent %s), want the trip planner's task span under the goal's span", task.Name, task.Parent.SpanID())
	}
	// The sub-goal's own chat is in the same trace, under its span.
	subComm := attr(sub, telemetry.AttrConversation)
	turns := 0
	for _, sp := range spans {
		if attr(sp, telemetry.AttrConversation) != subComm || sp.SpanContext.SpanID() == sub.SpanContext.SpanID() {
			continue
		}
		if sp.SpanContext.TraceID() != root.SpanContext.TraceID() {
			t.Errorf("span %q of the sub-goal's chat is in another trace", sp.Name)
		}
		if strings.HasPrefix(sp.Name, "invoke_agent ") {
			turns++
			if sp.Parent.SpanID() != sub.SpanContext.SpanID() {
				t.Errorf("turn span %q of the sub-goal's chat is not under the sub-goal's span", sp.Name)
			}
		}
	}
	if subComm == "" || turns == 0 {
		t.Errorf("no turn spans of the sub-goal's chat %q", subComm)
	}
}
