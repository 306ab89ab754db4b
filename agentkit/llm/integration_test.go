package llm_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/llm"
	"github.com/ioa-nats/ioa/agentkit/llm/llmtest"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/agentkit/worker"
	"github.com/ioa-nats/ioa/orchestrator"
)

func turnTypes(log []protocol.AgentMessage) []string {
	var out []string
	for _, m := range log {
		if protocol.IsTurnMessage(m.Type) {
			out = append(out, m.Type+"/"+m.Sender)
		}
	}
	return out
}

// assertUsage checks that the goals' usage is exactly what the fake server
// reported, call for call.
func assertUsage(t *testing.T, srv *llmtest.Server, results ...protocol.GoalResult) {
	t.Helper()
	var got protocol.Usage
	for _, r := range results {
		got = got.Add(r.Usage)
	}
	rep, calls := srv.Reported()
	want := protocol.Usage{LLMCalls: calls, PromptTokens: rep.PromptTokens, CompletionTokens: rep.CompletionTokens}
	if got != want {
		t.Errorf("usage in goal results = %+v, server reported %+v", got, want)
	}
}

// TestGoalWithLLMPolicies runs a whole goal with the llm policy on the
// launcher and on a member: team-up by tool calls, and every chat state:
// discussion, async assignment, pause and trigger, sync assignment (done by
// an LLM worker), conclusion. The token usage of every call reaches the
// goal's result.
func TestGoalWithLLMPolicies(t *testing.T) {
	checkGoroutines(t)
	w := newWorld(t, orchestrator.Config{MaxTurns: 12})
	sc := newScript(t)
	srv := llmtest.New(t, sc.handle)
	model := newModel(t, srv)
	policy := llm.New(model, llm.PolicyConfig{})

	paused := make(chan struct{})
	var once sync.Once
	w.watchChats(t, func(m protocol.AgentMessage) {
		if m.Type == protocol.MsgPause {
			once.Do(func() { close(paused) })
		}
	})
	writerCard := card("writer", "Writes short reports from research notes.", "report writing")
	w.run(t,
		orchestrator.Coordinator("coordinator", policy),
		agentkit.Agent{
			Card: card("researcher", "Researches facts about cities: population, history, geography.", "research", "facts"),
			Worker: funcWorker(func(agentkit.Task) (string, error) {
				select {
				case <-paused:
				case <-time.After(15 * time.Second):
				}
				return "Lyon has 522,000 inhabitants.", nil
			}),
			Policy: policy,
		},
		agentkit.Agent{Card: writerCard, Worker: worker.NewLLM(model, writerCard), Policy: policy},
		agentkit.Agent{Card: card("chef", "Cooks French dishes.", "cooking"), Worker: funcWorker(func(agentkit.Task) (string, error) { return "soup", nil }), Policy: policy},
	)

	sc.teamUp["coordinator"] = discoverThenTeam([]string{"city research", "report writing"}, "researcher", "@writer", "ghost-agent")
	sc.turn("coordinator",
		llmtest.Answer(move{"type": "discussion", "content": "Plan: research Lyon, then write.", "next_speaker": []string{"researcher"},
			"updated_plan": "1. researcher: Lyon facts (async)\n2. writer: report (sync)"}),
		llmtest.Answer(move{"type": "async_task_assign", "content": "Go.", "tasks": []move{{"task_id": "t1", "assignee": "researcher", "task_abstract": "Lyon population", "task_desc": "Find the population of Lyon."}}}),
		llmtest.Answer(move{"type": "pause", "content": "Waiting for t1.", "triggers": []string{"t1"}}),
		llmtest.Answer(move{"type": "sync_task_assign", "content": "Write it up.", "tasks": []move{{"assignee": "writer", "task_abstract": "report", "task_desc": "Write a one-line report on Lyon."}}}),
		llmtest.Answer(move{"type": "conclusion", "content": "Lyon has 522,000 inhabitants (report attached)."}),
	)
	// The member answers with a fenced object and a bare-string
	// next_speaker: both are repaired.
	sc.turn("researcher", llmtest.Text("Sure!\n```json\n{\"type\": \"discussion\", \"content\": \"I can do it.\", \"next_speaker\": \"coordinator\"}\n```"))
	sc.work["writer"] = llmtest.Text("REPORT: Lyon has 522,000 inhabitants.")

	res := w.submit(t, protocol.GoalRequest{Goal: "Find the population of Lyon and write a short report."}, 30*time.Second)
	if res.Status != protocol.GoalConcluded || !strings.Contains(res.Conclusion, "522,000") {
		t.Fatalf("result = %+v", res)
	}
	st := w.goal(t, res.GoalID)
	if !slices.Equal(st.Team, []string{"coordinator", "researcher", "writer"}) {
		t.Errorf("team = %v, want coordinator, researcher, writer (the unknown ghost-agent dropped)", st.Team)
	}
	log := w.chatLog(t, "coordinator", res.CommID)
	want := []string{"discussion/coordinator", "discussion/researcher", "async_task_assign/coordinator",
		"pause/coordinator", "sync_task_assign/coordinator", "conclusion/coordinator"}
	if got := turnTypes(log); !slices.Equal(got, want) {
		t.Errorf("turns = %v\nwant    %v", got, want)
	}
	states := map[protocol.State]bool{}
	for _, m := range log {
		states[m.State] = true
		if m.Type == protocol.MsgTaskResult && m.TaskStatus != protocol.TaskCompleted {
			t.Errorf("task %s failed: %s", m.TaskID, m.TaskConclusion)
		}
	}
	for _, s := range []protocol.State{protocol.StateDiscussion, protocol.StateAsyncTasks, protocol.StatePause, protocol.StateSyncTasks, protocol.StateConclusion} {
		if !states[s] {
			t.Errorf("the chat never was in state %s", s)
		}
	}
	sc.assertDone()
	assertUsage(t, srv, res)
	for i, r := range srv.Requests() {
		if r.MaxTokens == nil || *r.MaxTokens != 700 || r.MaxCompletionTokens != nil {
			t.Errorf("request %d: max_tokens = %v, max_completion_tokens = %v; want max_tokens 700 only", i, r.MaxTokens, r.MaxCompletionTokens)
		}
		if r.Model != "fake-model" || r.Temperature == nil || *r.Temperature != 0.2 {
			t.Errorf("request %d: model %q temperature %v", i, r.Model, r.Temperature)
		}
	}
	fmt.Fprintf(testWriter{t}, "goal %s: %d turns, usage %+v\n", res.GoalID, res.Turns, res.Usage)
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
