package worker_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit/llm"
	"github.com/ioa-nats/ioa/agentkit/llm/llmtest"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/agentkit/worker"
)

func TestLLMWorker(t *testing.T) {
	srv := llmtest.New(t, llmtest.Queue(llmtest.Text("  Sheep counted: 42.  "), llmtest.Text(""), llmtest.Status(500)))
	m, err := llm.NewModel(llm.Config{BaseURL: srv.URL, APIKey: "k", Model: "m", Retries: -1, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	w := worker.NewLLM(m, protocol.AgentCard{Name: "counter", Description: "Counts sheep precisely."})
	res, err := w.Run(t.Context(), task())
	if err != nil || res.Conclusion != "Sheep counted: 42." {
		t.Fatalf("%+v %v", res, err)
	}
	r := srv.Requests()[0]
	if sys := r.Messages[0]; sys.Role != "system" || !strings.Contains(sys.Content, "You are counter: Counts sheep precisely.") {
		t.Errorf("system prompt = %+v", sys)
	}
	if !strings.Contains(r.Last(), "count sheep") || !strings.Contains(r.Last(), "bed made") {
		t.Errorf("user prompt = %q", r.Last())
	}
	rep, _ := srv.Reported()
	if u := w.TakeUsage("counter", "g1"); u.LLMCalls != 1 || u.PromptTokens != rep.PromptTokens || u.CompletionTokens != rep.CompletionTokens {
		t.Errorf("usage %+v, server reported %+v", u, rep)
	}
	if _, err := w.Run(t.Context(), task()); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("empty answer: %v", err)
	}
	if _, err := w.Run(t.Context(), task()); err == nil || !strings.Contains(err.Error(), "500") {
		t.Errorf("500: %v", err)
	}
	if u := w.Usage(); u.LLMCalls != 2 {
		t.Errorf("total usage = %+v (the failed call is not counted)", u)
	}
}
