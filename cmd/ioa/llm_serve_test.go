package main

import (
	"context"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit/llm/llmtest"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
)

// TestServeWithGarbageModel runs the stack of `ioa serve` with a model
// configured (so the coordinator uses the llm policy) that answers garbage
// to everything: every goal still ends, within its timeout, with the
// tokens the model reported in its usage.
func TestServeWithGarbageModel(t *testing.T) {
	fake := llmtest.New(t, llmtest.Always(llmtest.Garbage()))
	cfg := demoConfig(t)
	cfg.LLM.BaseURL, cfg.LLM.Model, cfg.LLM.Retries = fake.URL, "fake", -1
	cfg.Limits.GoalTimeout, cfg.Limits.SpeakerTimeout = 20*time.Second, 5*time.Second
	if got := cfg.CoordinatorPolicy(); got != "llm" {
		t.Fatalf("coordinator policy with a model = %q, want llm", got)
	}
	st := readyStack(t, cfg, stackOptions{services: true, sandbox: t.TempDir()})
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Second)
	defer cancel()
	var res protocol.GoalResult
	err := bus.Request(ctx, st.bus.Conn(), st.bus.Subjects().Goal(bus.GoalSubmit),
		protocol.GoalRequest{Goal: "Convert 42 km to miles. Then write a Markdown report of the results.", Wait: true}, &res)
	if err != nil {
		t.Fatal(err)
	}
	if !protocol.GoalEnded(res.Status) {
		t.Fatalf("goal did not end: %+v", res)
	}
	reported, calls := fake.Reported()
	if calls == 0 || res.Usage.LLMCalls == 0 || res.Usage.PromptTokens == 0 {
		t.Fatalf("usage = %+v; the fake model answered %d calls (%+v)", res.Usage, calls, reported)
	}
	t.Logf("garbage model: goal %s %s (%s) in %s, usage %+v", res.GoalID, res.Status, res.Reason, res.Elapsed, res.Usage)
}
