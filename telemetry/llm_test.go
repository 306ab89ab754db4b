package telemetry_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/llm"
	"github.com/ioa-nats/ioa/agentkit/llm/llmtest"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/telemetry"
)

// TestLLMCallsAndTokens: the llm policy's calls to a real HTTP server
// speaking the OpenAI API are counted by agent and model, with the tokens
// the server reported, and traced as "chat <model>" spans with the GenAI
// attributes.
func TestLLMCallsAndTokens(t *testing.T) {
	exp := traceInMemory(t)
	var fail atomic.Bool
	srv := llmtest.New(t, func(r llmtest.Request) llmtest.Response {
		if fail.Load() {
			return llmtest.Response{Status: http.StatusBadRequest, RawBody: []byte(`{"error":{"message":"bad request"}}`)}
		}
		return llmtest.Response{Content: `{"decision":"individual"}`, Usage: &llmtest.Usage{PromptTokens: 120, CompletionTokens: 7}}
	})
	model, err := llm.NewModel(llm.Config{BaseURL: srv.URL, Model: "test-model", Retries: -1})
	if err != nil {
		t.Fatal(err)
	}
	m := telemetry.NewMetrics()
	p := llm.New(model, llm.PolicyConfig{Metrics: m})
	check := agentkit.TeamCheck{
		Self: protocol.AgentCard{Name: "planner", Description: "Plans trips.", NestedTeams: true},
		Task: agentkit.Task{Task: protocol.Task{TaskID: "t1", TaskAbstract: "plan", TaskDesc: "Plan a trip."}, GoalID: "g1", TeamUpDepth: 1},
	}
	for range 2 {
		if _, err := p.NeedsTeam(t.Context(), check); err != nil {
			t.Fatal(err)
		}
	}
	fail.Store(true)
	_, _ = p.NeedsTeam(t.Context(), check) // a failed call: the policy does the task alone

	web := httptest.NewServer(m.Handler())
	t.Cleanup(web.Close)
	fams := scrape(t, web.URL)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{telemetry.MetricLLMCalls, []string{"agent", "planner", "model", "test-model", "result", "ok"}, 2},
		{telemetry.MetricLLMCalls, []string{"agent", "planner", "model", "test-model", "result", "error"}, 1},
		{telemetry.MetricLLMTokens, []string{"agent", "planner", "model", "test-model", "kind", "input"}, 240},
		{telemetry.MetricLLMTokens, []string{"agent", "planner", "model", "test-model", "kind", "output"}, 14},
		{telemetry.MetricLLMDuration, []string{"model", "test-model"}, 3},
	} {
		if got := value(fams, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}

	var ok, failed int
	for _, sp := range exp.GetSpans() {
		if sp.Name != "chat test-model" {
			continue
		}
		if attr(sp, telemetry.AttrOperation) != telemetry.OpChat || attr(sp, telemetry.AttrModel) != "test-model" {
			t.Errorf("span attributes %v", sp.Attributes)
		}
		if sp.Status.Code != 0 {
			failed++
			continue
		}
		ok++
		if attr(sp, telemetry.AttrInputTokens) != "120" || attr(sp, telemetry.AttrOutputTokens) != "7" {
			t.Errorf("span usage %s/%s, want 120/7", attr(sp, telemetry.AttrInputTokens), attr(sp, telemetry.AttrOutputTokens))
		}
	}
	if ok != 2 || failed != 1 {
		t.Errorf("chat spans: %d ok, %d failed; want 2 and 1", ok, failed)
	}
}
