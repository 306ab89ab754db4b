package telemetry_test

import (
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/builtin"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/agentkit/rules"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/internal/stacktest"
	"github.com/ioa-nats/ioa/orchestrator"
	"github.com/ioa-nats/ioa/registry"
	"github.com/ioa-nats/ioa/telemetry"
)

// demoAgents are two of the demo team's agents, with built-in workers.
func demoAgents(t testing.TB) []agentkit.Agent {
	t.Helper()
	calc, err := builtin.New("calculator", builtin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	units, err := builtin.New("units", builtin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return []agentkit.Agent{
		{Card: protocol.AgentCard{Name: "calculator", Type: protocol.TypeTool,
			Description:  "Evaluates arithmetic expressions and computes exact numeric results.",
			Capabilities: []string{"arithmetic", "compute sums, products and percentages", "multiply, divide, add or subtract numbers", "calculator"}},
			Worker: calc, Policy: rules.New(rules.Config{})},
		{Card: protocol.AgentCard{Name: "unit-converter", Type: protocol.TypeTool,
			Description:  "Converts measurements between units of length, mass, volume, speed and temperature.",
			Capabilities: []string{"convert kilometres to miles", "convert kilograms to pounds", "celsius to fahrenheit", "unit conversion"}},
			Worker: units, Policy: rules.New(rules.Config{})},
	}
}

// TestMetricsOfARun runs a known set of goals on a real stack, then an
// illegal move, and checks that /metrics, parsed with the Prometheus text
// parser, says what happened.
func TestMetricsOfARun(t *testing.T) {
	m := telemetry.NewMetrics()
	s := stacktest.Start(t, stacktest.Options{Coordinator: true,
		Orchestrator: orchestrator.Config{Metrics: m}, Registry: registry.Config{Metrics: m}})
	s.RunAgents(t, nil, demoAgents(t)...)
	srv := httptest.NewServer(m.Handler())
	t.Cleanup(srv.Close)

	goals := []string{
		"Compute 6 * 7",
		"Convert 42 km to miles",
		"Compute 19.5 * 4. Then convert 10 miles to km.",
	}
	turns := 0
	outcomes := map[string]int{}
	var results []protocol.GoalResult
	for _, g := range goals {
		res := s.Submit(t, protocol.GoalRequest{Goal: g})
		if res.Status != protocol.GoalConcluded {
			t.Fatalf("goal %q: %s (%s)", g, res.Status, res.Reason)
		}
		turns += res.Turns
		outcomes[res.Outcome]++
		results = append(results, res)
	}
	ctx := t.Context()
	tasks, err := s.Bus.JetStream().Stream(ctx, bus.StreamTasks)
	if err != nil {
		t.Fatal(err)
	}
	info, err := tasks.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	taskResults := info.State.Msgs // one per task that ended

	before := scrape(t, srv.URL)
	n := float64(len(goals))
	if got := value(before, telemetry.MetricGoalsSubmitted); got != n {
		t.Errorf("%s = %v, want %v", telemetry.MetricGoalsSubmitted, got, n)
	}
	for outcome, k := range outcomes {
		if got := value(before, telemetry.MetricGoalsEnded, "status", "concluded", "outcome", outcome); got != float64(k) {
			t.Errorf("%s{concluded,%s} = %v, want %d", telemetry.MetricGoalsEnded, outcome, got, k)
		}
	}
	if got := sum(before, telemetry.MetricGoalsEnded); got != n {
		t.Errorf("goals ended in all = %v, want %v", got, n)
	}
	if got := value(before, telemetry.MetricGoalDuration, "status", "concluded"); got != n {
		t.Errorf("%s count = %v, want %v", telemetry.MetricGoalDuration, got, n)
	}
	// Every turn of every chat is one observation.
	if got := value(before, telemetry.MetricTurnDuration); got != float64(turns) || turns == 0 {
		t.Errorf("%s count = %v, want the %d turns of the results", telemetry.MetricTurnDuration, got, turns)
	}
	if got := sum(before, telemetry.MetricTaskDuration); got != float64(taskResults) || taskResults == 0 {
		t.Errorf("%s count = %v, want the %d task results in %s", telemetry.MetricTaskDuration, got, taskResults, bus.StreamTasks)
	}
	// The coordinator searched the registry for each goal's team.
	if got := value(before, telemetry.MetricSearchDuration); got < n {
		t.Errorf("%s count = %v, want at least %v", telemetry.MetricSearchDuration, got, n)
	}
	if got := value(before, telemetry.MetricIndexAgents); got != 3 {
		t.Errorf("%s = %v, want 3 (coordinator, calculator, unit-converter)", telemetry.MetricIndexAgents, got)
	}
	for _, conn := range []string{"ioa-orchestrator", registry.ServiceName} {
		if got := value(before, telemetry.MetricNATSConnected, "conn", conn); got != 1 {
			t.Errorf("%s{conn=%s} = %v, want 1", telemetry.MetricNATSConnected, conn, got)
		}
	}
	if sample(before, "go_goroutines") == nil || sample(before, "process_cpu_seconds_total") == nil {
		t.Errorf("the Go and process collectors are missing")
	}

	// A deliberately illegal move: the coordinator speaks in a chat that
	// has concluded.
	subject, err := s.Bus.Subjects().Outbox("coordinator", results[0].CommID)
	if err != nil {
		t.Fatal(err)
	}
	err = s.Request(t, subject, protocol.AgentMessage{ID: "late-1", Type: protocol.MsgDiscussion, Content: "one more thing"}, nil)
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code == "" {
		t.Fatalf("a move in a concluded chat: %v, want a refusal with a code", err)
	}
	after := scrape(t, srv.URL)
	if got, was := value(after, telemetry.MetricRefusals, "code", pe.Code), value(before, telemetry.MetricRefusals, "code", pe.Code); got != was+1 {
		t.Errorf("%s{code=%s} went from %v to %v, want one more", telemetry.MetricRefusals, pe.Code, was, got)
	}
	if got, was := sum(after, telemetry.MetricRefusals), sum(before, telemetry.MetricRefusals); got != was+1 {
		t.Errorf("refusals in all went from %v to %v, want one more", was, got)
	}
}
