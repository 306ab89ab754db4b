package llm_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/llm"
	"github.com/ioa-nats/ioa/agentkit/llm/llmtest"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/orchestrator"
)

// failureModes are the ways a model server can let the policy down.
var failureModes = []struct {
	name string
	resp llmtest.Response
}{
	{"garbage", llmtest.Garbage()},
	{"truncated_json", llmtest.Truncated(move{"type": "conclusion", "content": "The answer is that everything went according to plan and here are the details"})},
	{"wrong_types", llmtest.WrongTypes()},
	{"http_500", llmtest.Status(500)},
	{"hang", llmtest.Hang()},
	{"huge_reply", llmtest.Huge(1 << 20)},
}

// failingModel is a model with short timeouts, as a deployment would set
// them for a flaky server.
func failingModel(t *testing.T, srv *llmtest.Server) *llm.Model {
	return newModel(t, srv, func(c *llm.Config) {
		c.Timeout = 300 * time.Millisecond
		c.Retries = 1
		c.MaxResponseBytes = 64 << 10
	})
}

// TestLauncherFailureModes: whatever the model server does wrong, the
// goal ends in a defined status in bounded time: team-up falls back to the
// registry's best matches, the launcher's turn to a conclusion from the
// task board. What the server reported is counted.
func TestLauncherFailureModes(t *testing.T) {
	for _, fm := range failureModes {
		t.Run(fm.name, func(t *testing.T) {
			checkGoroutines(t)
			w := newWorld(t, orchestrator.Config{MaxTurns: 6})
			srv := llmtest.New(t, llmtest.Always(fm.resp))
			policy := llm.New(failingModel(t, srv), llm.PolicyConfig{})
			w.run(t,
				orchestrator.Coordinator("coordinator", policy),
				agentkit.Agent{Card: card("helper", "Answers questions about geography and cities."),
					Worker: funcWorker(func(agentkit.Task) (string, error) { return "ok", nil }), Policy: policy},
			)
			res := w.submit(t, protocol.GoalRequest{Goal: "Tell me about the geography of Lyon."}, 20*time.Second)
			if res.Status != protocol.GoalConcluded || !strings.HasPrefix(res.Conclusion, "Concluded from the task board") {
				t.Fatalf("result = %+v", res)
			}
			if st := w.goal(t, res.GoalID); len(st.Team) != 2 || st.Team[1] != "helper" {
				t.Errorf("team = %v, want the registry's best match helper", st.Team)
			}
			assertUsage(t, srv, res)
			if n := len(srv.Requests()); n == 0 || n > 12 {
				t.Errorf("%d model requests", n)
			}
			t.Logf("%s: %d requests, usage %+v, conclusion %q", fm.name, len(srv.Requests()), res.Usage, clipText(res.Conclusion, 120))
		})
	}
}

// TestMemberFailureModes: a member whose model fails hands the turn back
// to the launcher, and the goal goes on.
func TestMemberFailureModes(t *testing.T) {
	for _, fm := range failureModes {
		t.Run(fm.name, func(t *testing.T) {
			checkGoroutines(t)
			w := newWorld(t, orchestrator.Config{MaxTurns: 6})
			good := llmtest.Queue(
				llmtest.Answer(move{"type": "discussion", "content": "What do you know?", "next_speaker": []string{"helper"}}),
				llmtest.Answer(move{"type": "conclusion", "content": "Done without the helper."}),
			)
			srv := llmtest.New(t, func(r llmtest.Request) llmtest.Response {
				if r.Agent() == "coordinator" {
					return good(r)
				}
				return fm.resp
			})
			policy := llm.New(failingModel(t, srv), llm.PolicyConfig{})
			w.run(t,
				orchestrator.Coordinator("coordinator", policy),
				agentkit.Agent{Card: card("helper", "Answers questions about geography."),
					Worker: funcWorker(func(agentkit.Task) (string, error) { return "ok", nil }), Policy: policy},
			)
			res := w.submit(t, protocol.GoalRequest{Goal: "Tell me about Lyon.", Team: []string{"helper"}}, 20*time.Second)
			if res.Status != protocol.GoalConcluded || res.Conclusion != "Done without the helper." {
				t.Fatalf("result = %+v", res)
			}
			log := w.chatLog(t, "coordinator", res.CommID)
			got := turnTypes(log)
			want := []string{"discussion/coordinator", "discussion/helper", "conclusion/coordinator"}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Fatalf("turns = %v, want %v", got, want)
			}
			for _, m := range log {
				if m.Sender == "helper" && !strings.Contains(m.Content, "hands the turn back to coordinator") {
					t.Errorf("helper said %q", m.Content)
				}
			}
			assertUsage(t, srv, res)
		})
	}
}

// TestNestedTeamUpWithLLM: a member's model decides its task needs a
// team; the nested goal's launcher forms it with tool calls, and its
// conclusion is the member's task result.
func TestNestedTeamUpWithLLM(t *testing.T) {
	checkGoroutines(t)
	w := newWorld(t, orchestrator.Config{MaxTurns: 8})
	sc := newScript(t)
	srv := llmtest.New(t, sc.handle)
	policy := llm.New(newModel(t, srv), llm.PolicyConfig{})
	planner := card("planner", "Plans multilingual messages; may delegate to a team.")
	planner.NestedTeams = true
	w.run(t,
		orchestrator.Coordinator("coordinator", policy),
		agentkit.Agent{Card: planner, Policy: policy, Worker: funcWorker(func(agentkit.Task) (string, error) {
			return "planner did it alone", nil
		})},
		agentkit.Agent{Card: card("translator", "Translates text between English and French.", "translation"), Policy: policy,
			Worker: funcWorker(func(agentkit.Task) (string, error) { return "Bonjour", nil })},
	)
	sc.turn("coordinator|Greet",
		llmtest.Answer(move{"type": "sync_task_assign", "content": "Planner, please.", "tasks": []move{{"assignee": "planner", "task_abstract": "greeting", "task_desc": "Greet the user in French."}}}),
		llmtest.Answer(move{"type": "conclusion", "content": "The greeting is Bonjour."}),
	)
	sc.needsTeam["planner"] = llmtest.Answer(move{"decision": "teamwork", "subgoal": "Translate hello into French."})
	sc.teamUp["coordinator"] = discoverThenTeam([]string{"translation english french"}, "translator")
	sc.turn("coordinator|Translate hello",
		llmtest.Answer(move{"type": "sync_task_assign", "content": "Translate.", "tasks": []move{{"assignee": "translator", "task_desc": "Translate hello into French."}}}),
		llmtest.Answer(move{"type": "conclusion", "content": "Bonjour"}),
	)
	res := w.submit(t, protocol.GoalRequest{Goal: "Greet the user in French.", Team: []string{"planner"}}, 30*time.Second)
	if res.Status != protocol.GoalConcluded {
		t.Fatalf("result = %+v", res)
	}
	st := w.goal(t, res.GoalID)
	if len(st.Children) != 1 {
		t.Fatalf("children = %v", st.Children)
	}
	child := w.goal(t, st.Children[0])
	if child.Result == nil || child.Result.Status != protocol.GoalConcluded || child.Result.Conclusion != "Bonjour" {
		t.Fatalf("nested goal = %+v", child)
	}
	if strings.Join(child.Team, ",") != "coordinator,translator" {
		t.Errorf("nested team = %v", child.Team)
	}
	var result string
	for _, m := range w.chatLog(t, "coordinator", res.CommID) {
		if m.Type == protocol.MsgTaskResult {
			result = m.TaskConclusion
		}
	}
	if result != "Bonjour" {
		t.Errorf("planner's task result = %q, want the nested conclusion", result)
	}
	sc.assertDone()
	assertUsage(t, srv, res, *child.Result)
}
