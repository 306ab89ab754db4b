package a2a_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/agentkit/rules"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/internal/nodetest"
	"github.com/ioa-nats/ioa/internal/stacktest"
	"github.com/ioa-nats/ioa/interop/a2a"
)

const doorToken = "front-door-token-0123456789abcdef"

func fnAgent(name, desc string, caps []string, do func(context.Context, agentkit.Task) (string, error)) agentkit.Agent {
	return agentkit.Agent{
		Card: protocol.AgentCard{Name: name, Description: desc, Capabilities: caps, Type: protocol.TypeTool},
		Worker: agentkit.WorkerFunc(func(ctx context.Context, t agentkit.Task) (agentkit.Result, error) {
			s, err := do(ctx, t)
			return agentkit.Result{Conclusion: s}, err
		}),
		Policy: rules.New(rules.Config{}),
	}
}

// door runs a secure stack with a doubler and a blocker (a task that ends
// only when cancelled), and the front door over HTTP.
func door(t *testing.T, goalTimeout time.Duration, maxGoals ...int) (*stacktest.Stack, string) {
	t.Helper()
	s := stacktest.Start(t, stacktest.Options{Coordinator: true, Secure: true})
	s.RunAgents(t, nil,
		fnAgent("doubler", "Doubles a word: writes it twice.", []string{"double a word", "repeat a word twice"},
			func(_ context.Context, t agentkit.Task) (string, error) {
				f := strings.Fields(t.TaskDesc)
				w := strings.Trim(f[len(f)-1], ".")
				return w + w, nil
			}),
		fnAgent("refuser", "Refuses every request.", []string{"refuse a request"},
			func(context.Context, agentkit.Task) (string, error) { return "", errors.New("no, never") }),
		fnAgent("blocker", "Waits forever.", []string{"wait forever"},
			func(ctx context.Context, _ agentkit.Task) (string, error) {
				<-ctx.Done()
				return "", ctx.Err()
			}))
	nc, err := s.Bus.NewConn("a2a")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	limit := 0
	if len(maxGoals) > 0 {
		limit = maxGoals[0]
	}
	srv, err := a2a.NewServer(a2a.ServerConfig{MaxGoals: limit, NC: nc, Subj: s.Bus.Subjects(), BaseURL: base, Token: doorToken, GoalTimeout: goalTimeout, Coordinator: "coordinator"})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(srv)
	hs.Listener = ln
	hs.Start()
	t.Cleanup(hs.Close)
	t.Cleanup(srv.Close)
	return s, base
}

func goClient(t *testing.T, base, cardPath string) (*a2aclient.Client, *sdk.AgentCard) {
	t.Helper()
	card, err := agentcard.NewResolver(nil).Resolve(t.Context(), base, agentcard.WithPath(cardPath))
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: tokenTransport(doorToken)}
	c, err := a2aclient.NewFromCard(t.Context(), card, a2aclient.WithJSONRPCTransport(hc))
	if err != nil {
		t.Fatal(err)
	}
	return c, card
}

type tokenTransport string

func (tk tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(tk))
	return http.DefaultTransport.RoundTrip(r)
}

func userMessage(text string) *sdk.MessageSendParams {
	return &sdk.MessageSendParams{Message: sdk.NewMessage(sdk.MessageRoleUser, sdk.TextPart{Text: text})}
}

func TestFrontDoorCardsAndGoals(t *testing.T) {
	s, base := door(t, 0)
	c, card := goClient(t, base, "/.well-known/agent-card.json")
	if card.Name != "ioa" || card.URL != base+"/a2a" || !card.Capabilities.Streaming {
		t.Errorf("front door card: %+v", card)
	}
	if _, ok := card.SecuritySchemes[a2a.SchemeName].(sdk.HTTPAuthSecurityScheme); !ok || len(card.Security) != 1 {
		t.Errorf("security: %+v %+v", card.SecuritySchemes, card.Security)
	}
	if !slices.ContainsFunc(card.Skills, func(k sdk.AgentSkill) bool { return k.Name == "doubler" && slices.Contains(k.Tags, "double a word") }) ||
		slices.ContainsFunc(card.Skills, func(k sdk.AgentSkill) bool { return k.Name == "coordinator" }) {
		t.Errorf("skills %+v: want the doubler, not the coordinator", card.Skills)
	}

	// A blocking message/send: the goal runs to its end.
	res, err := c.SendMessage(t.Context(), userMessage("Double the word tick."))
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*sdk.Task)
	if !ok || task.Status.State != sdk.TaskStateCompleted || len(task.Artifacts) != 1 || !strings.Contains(a2a.MessageText(&sdk.Message{Parts: task.Artifacts[0].Parts}), "ticktick") {
		t.Fatalf("result %#v", res)
	}
	if out := task.Artifacts[0].Metadata[a2a.MetaOutcome]; out != protocol.OutcomeSucceeded {
		t.Errorf("the conclusion's outcome: %v, want succeeded", out)
	}
	goalID, _ := task.Metadata[a2a.MetaGoalID].(string)
	var st protocol.GoalStatus
	if err := s.Request(t, s.Bus.Subjects().Goal(bus.GoalGet), protocol.GoalIDRequest{GoalID: goalID}, &st); err != nil || st.Submitter != "a2a" {
		t.Errorf("goal %s: submitter %q, %v", goalID, st.Submitter, err)
	}
	got, err := c.GetTask(t.Context(), &sdk.TaskQueryParams{ID: task.ID})
	if err != nil || got.Status.State != sdk.TaskStateCompleted {
		t.Errorf("tasks/get: %+v %v", got, err)
	}

	// The streaming form: submitted, working, the conclusion, completed.
	var states []sdk.TaskState
	var artifact string
	var taskDone bool // the task's update says who did it, how, and its answer
	for ev, err := range c.SendStreamingMessage(t.Context(), userMessage("Double the word tock.")) {
		if err != nil {
			t.Fatal(err)
		}
		switch ev := ev.(type) {
		case *sdk.Task:
			states = append(states, ev.Status.State)
		case *sdk.TaskStatusUpdateEvent:
			if len(states) == 0 || states[len(states)-1] != ev.Status.State {
				states = append(states, ev.Status.State)
			}
			if msg := a2a.MessageText(ev.Status.Message); strings.HasPrefix(msg, "task ") && strings.Contains(msg, " by doubler completed: ") && strings.Contains(msg, "tocktock") {
				taskDone = true
			}
		case *sdk.TaskArtifactUpdateEvent:
			artifact = a2a.MessageText(&sdk.Message{Parts: ev.Artifact.Parts})
		}
	}
	if want := []sdk.TaskState{sdk.TaskStateSubmitted, sdk.TaskStateWorking, sdk.TaskStateCompleted}; !slices.Equal(states, want) || !strings.Contains(artifact, "tocktock") {
		t.Errorf("streamed states %v, artifact %q; want %v and tocktock", states, artifact, want)
	}
	if !taskDone {
		t.Error(`no status update "task tN by doubler completed: …tocktock"`)
	}

	// One card per agent; its messages go to that agent's team.
	ac, acard := goClient(t, base, "/agents/doubler/.well-known/agent-card.json")
	if acard.Name != "doubler" || acard.URL != base+"/agents/doubler/a2a" || len(acard.Skills) != 2 {
		t.Errorf("agent card %+v", acard)
	}
	res, err = ac.SendMessage(t.Context(), userMessage("Double the word tack."))
	if err != nil {
		t.Fatal(err)
	}
	if task := res.(*sdk.Task); task.Status.State != sdk.TaskStateCompleted {
		t.Errorf("agent's goal: %+v", task.Status)
	}

	// Cancelling the task cancels the goal; the stream ends with it.
	bc, _ := goClient(t, base, "/agents/blocker/.well-known/agent-card.json")
	var bgoal string
	var last sdk.TaskState
	for ev, err := range bc.SendStreamingMessage(t.Context(), userMessage("Wait forever.")) {
		if err != nil {
			t.Fatal(err)
		}
		switch ev := ev.(type) {
		case *sdk.Task:
			bgoal, _ = ev.Metadata[a2a.MetaGoalID].(string)
			ct, err := bc.CancelTask(t.Context(), &sdk.TaskIDParams{ID: ev.ID})
			if err != nil || ct.Status.State != sdk.TaskStateCanceled {
				t.Fatalf("tasks/cancel: %+v %v", ct, err)
			}
		case *sdk.TaskStatusUpdateEvent:
			last = ev.Status.State
		}
	}
	if last != sdk.TaskStateCanceled {
		t.Errorf("the stream ended in %s", last)
	}
	if err := s.Request(t, s.Bus.Subjects().Goal(bus.GoalGet), protocol.GoalIDRequest{GoalID: bgoal}, &st); err != nil || st.Status != protocol.GoalCancelled {
		t.Errorf("goal %s after tasks/cancel: %s, %v", bgoal, st.Status, err)
	}
}

// Past MaxGoals goals in flight, a message is rejected; once one ends,
// the next is taken.
func TestFrontDoorBoundsGoalsInFlight(t *testing.T) {
	_, base := door(t, 0, 1)
	c, _ := goClient(t, base, "/.well-known/agent-card.json")
	bc, _ := goClient(t, base, "/agents/blocker/.well-known/agent-card.json")
	for ev, err := range bc.SendStreamingMessage(t.Context(), userMessage("Wait forever.")) {
		if err != nil {
			t.Fatal(err)
		}
		if task, ok := ev.(*sdk.Task); ok {
			res, err := c.SendMessage(t.Context(), userMessage("Double the word one."))
			if err != nil {
				t.Fatal(err)
			}
			if r := res.(*sdk.Task); r.Status.State != sdk.TaskStateRejected || !strings.Contains(a2a.MessageText(r.Status.Message), "too many goals") {
				t.Errorf("second goal: %s %s", r.Status.State, a2a.MessageText(r.Status.Message))
			}
			if _, err := bc.CancelTask(t.Context(), &sdk.TaskIDParams{ID: task.ID}); err != nil {
				t.Fatal(err)
			}
		}
	}
	res, err := c.SendMessage(t.Context(), userMessage("Double the word two."))
	if err != nil || res.(*sdk.Task).Status.State != sdk.TaskStateCompleted {
		t.Fatalf("after the first ended: %+v %v", res, err)
	}
}

// A goal that times out is a failed task, with the reason.
func TestFrontDoorFailedGoal(t *testing.T) {
	_, base := door(t, 300*time.Millisecond)
	c, _ := goClient(t, base, "/agents/blocker/.well-known/agent-card.json")
	res, err := c.SendMessage(t.Context(), userMessage("Wait forever."))
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*sdk.Task)
	if task.Status.State != sdk.TaskStateFailed || !strings.Contains(a2a.MessageText(task.Status.Message), "timed_out") {
		t.Errorf("state %s: %s", task.Status.State, a2a.MessageText(task.Status.Message))
	}
}

// A goal that concluded having done nothing (its one task failed) is a
// failed A2A task, saying why; one that did part of it is completed, its
// conclusion's metadata saying partial and what was not done.
func TestFrontDoorGoalThatDidNothingFails(t *testing.T) {
	_, base := door(t, 0)
	c, _ := goClient(t, base, "/agents/refuser/.well-known/agent-card.json")
	res, err := c.SendMessage(t.Context(), userMessage("Refuse this request."))
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*sdk.Task)
	if msg := a2a.MessageText(task.Status.Message); task.Status.State != sdk.TaskStateFailed || !strings.Contains(msg, "nothing done") || !strings.Contains(msg, "no, never") {
		t.Errorf("state %s: %s", task.Status.State, msg)
	}
	c, _ = goClient(t, base, "/.well-known/agent-card.json")
	res, err = c.SendMessage(t.Context(), userMessage("Double the word tick. Refuse the request."))
	if err != nil {
		t.Fatal(err)
	}
	task = res.(*sdk.Task)
	if task.Status.State != sdk.TaskStateCompleted || len(task.Artifacts) != 1 ||
		task.Artifacts[0].Metadata[a2a.MetaOutcome] != protocol.OutcomePartial ||
		!strings.Contains(fmt.Sprint(task.Artifacts[0].Metadata[a2a.MetaReason]), "1 of 2 parts done") {
		t.Errorf("state %s, artifacts %+v", task.Status.State, task.Artifacts)
	}
}

// send posts a JSON body to url, with token when it is not empty, and
// returns the answer's status and body.
func send(t *testing.T, url, token, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}

func post(t *testing.T, url, token, body string) (int, map[string]any) {
	t.Helper()
	status, data := send(t, url, token, body)
	var v map[string]any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("%s answered %d %q: %v", url, status, data, err)
	}
	return status, v
}

// streamed posts a JSON-RPC request whose answer is an SSE stream and
// returns the JSON of each data line.
func streamed(t *testing.T, url, body string) []map[string]any {
	t.Helper()
	_, stream := send(t, url, doorToken, body)
	var events []map[string]any
	for _, line := range strings.Split(string(stream), "\n") {
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			var ev map[string]any
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				t.Fatalf("%s: data line %q: %v", url, data, err)
			}
			events = append(events, ev)
		}
	}
	return events
}

// The JSON-RPC binding on the wire, with bodies shaped like the spec's
// examples, and bad input.
func TestFrontDoorWire(t *testing.T) {
	_, base := door(t, 0)
	// The spec's message/send example (section 7.1, v0.3), with a goal.
	example := `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"role":"user","parts":[{"kind":"text","text":"Double the word beep."}],"messageId":"9229e770-767c-417b-a0b0-f0741243c589"},"metadata":{}}}`
	code, v := post(t, base+"/a2a", doorToken, example)
	res, _ := v["result"].(map[string]any)
	if code != 200 || res["kind"] != "task" || res["status"].(map[string]any)["state"] != "completed" {
		t.Fatalf("message/send: %d %v", code, v)
	}
	arts := res["artifacts"].([]any)
	part := arts[0].(map[string]any)["parts"].([]any)[0].(map[string]any)
	if part["kind"] != "text" || !strings.Contains(part["text"].(string), "beepbeep") || v["id"].(float64) != 1 {
		t.Errorf("artifact part %v", part)
	}

	for _, c := range []struct {
		name, url, token, body string
		status                 int
		code                   float64
	}{
		{"no token", base + "/a2a", "", example, 401, -32600},
		{"wrong token", base + "/a2a", "x" + doorToken, example, 401, -32600},
		{"not JSON", base + "/a2a", doorToken, `{"jsonrpc":"2.0",`, 200, -32700},
		{"unknown method", base + "/a2a", doorToken, `{"jsonrpc":"2.0","id":2,"method":"tasks/explode","params":{}}`, 200, -32601},
		// JSON-RPC 2.0's codes, where the SDK alone answers -32700 (checkRPC).
		{"bad params", base + "/a2a", doorToken, `{"jsonrpc":"2.0","id":3,"method":"message/send","params":{"message":7}}`, 200, -32602},
		{"no params", base + "/a2a", doorToken, `{"jsonrpc":"2.0","id":7,"method":"message/send"}`, 200, -32602},
		{"null params", base + "/a2a", doorToken, `{"jsonrpc":"2.0","id":8,"method":"tasks/get","params":null}`, 200, -32602},
		{"params of the wrong type", base + "/a2a", doorToken, `{"jsonrpc":"2.0","id":9,"method":"tasks/cancel","params":{"id":5}}`, 200, -32602},
		{"over the limit", base + "/a2a", doorToken, `{"jsonrpc":"2.0","id":10,"method":"message/send","params":{"message":{"role":"user","parts":[{"kind":"text","text":"` + strings.Repeat("x", 2<<20) + `"}],"messageId":"m10"}}}`, 413, -32600},
		{"unknown task", base + "/a2a", doorToken, `{"jsonrpc":"2.0","id":4,"method":"tasks/get","params":{"id":"nope"}}`, 200, -32001},
	} {
		status, v := post(t, c.url, c.token, c.body)
		e, _ := v["error"].(map[string]any)
		if status != c.status || e == nil || e["code"] != c.code || e["message"] == "" {
			t.Errorf("%s: %d %v, want %d and error code %v", c.name, status, v, c.status, c.code)
		}
		// The answer names the request it answers, where it could be read.
		var sent struct{ ID any }
		if status == 200 && json.Unmarshal([]byte(c.body), &sent) == nil && sent.ID != nil && v["id"] != sent.ID {
			t.Errorf("%s: answered id %v, want %v", c.name, v["id"], sent.ID)
		}
	}
	// Resubscribing to the task, which has ended, streams the task as it
	// ended (a2a-go alone answers "task not found" once its run is over).
	events := streamed(t, base+"/a2a", `{"jsonrpc":"2.0","id":12,"method":"tasks/resubscribe","params":{"id":"`+res["id"].(string)+`"}}`)
	if len(events) != 1 || events[0]["error"] != nil || events[0]["id"] != 12.0 {
		t.Fatalf("resubscribe to an ended task: %d events %v", len(events), events)
	}
	if task, _ := events[0]["result"].(map[string]any); task == nil || task["kind"] != "task" || task["id"] != res["id"] ||
		task["status"].(map[string]any)["state"] != "completed" {
		t.Errorf("resubscribe to an ended task: %v", events[0])
	}
	// A task nobody has is still not found.
	events = streamed(t, base+"/a2a", `{"jsonrpc":"2.0","id":13,"method":"tasks/resubscribe","params":{"id":"nope"}}`)
	if len(events) != 1 || events[0]["error"] == nil || events[0]["error"].(map[string]any)["code"] != -32001.0 {
		t.Errorf("resubscribe to no task: %v", events)
	}

	// A follow-up message to a task is refused; the task goes on.
	_, v = post(t, base+"/a2a", doorToken, `{"jsonrpc":"2.0","id":6,"method":"message/send","params":{"message":{"role":"user","taskId":"`+res["id"].(string)+`","parts":[{"kind":"text","text":"more"}],"messageId":"m6"}}}`)
	if e, _ := v["error"].(map[string]any); e == nil || e["code"] != -32004.0 {
		t.Errorf("follow-up message: %v", v)
	}
	// An empty message is rejected, not a goal.
	_, v = post(t, base+"/a2a", doorToken, `{"jsonrpc":"2.0","id":5,"method":"message/send","params":{"message":{"role":"user","parts":[{"kind":"text","text":"  "}],"messageId":"m5"}}}`)
	if res, _ := v["result"].(map[string]any); res == nil || res["status"].(map[string]any)["state"] != "rejected" {
		t.Errorf("empty message: %v", v)
	}
	// An agent that is not registered, and the coordinator, have no card
	// and no endpoint.
	for _, name := range []string{"ghost", "coordinator"} {
		resp, err := http.Get(base + "/agents/" + name + "/.well-known/agent-card.json")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Errorf("%s card: %d", name, resp.StatusCode)
		}
		if status, _ := post(t, base+"/agents/"+name+"/a2a", doorToken, example); status != 404 {
			t.Errorf("%s endpoint: %d", name, status)
		}
	}
	// The list of agents offers only cards that exist: not the coordinator's.
	resp, err := http.Get(base + "/agents")
	if err != nil {
		t.Fatal(err)
	}
	var list struct{ Agents []struct{ Name, Card string } }
	err = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if err != nil || len(list.Agents) == 0 || slices.ContainsFunc(list.Agents, func(a struct{ Name, Card string }) bool { return a.Name == "coordinator" }) {
		t.Errorf("GET /agents: %+v %v; want agents, without the coordinator", list, err)
	}
}

// An A2A client built with the official JavaScript SDK (v1.0, speaking to
// this v0.3 server through its compatibility layer) submits a goal and
// follows it to completion over SSE.
func TestJSClientSubmitsAGoal(t *testing.T) {
	node, dir := nodetest.Require(t)
	_, base := door(t, 0)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "a2a-client.mjs"), base, doorToken, "Double the word ping.")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("client: %v\n%s\n%s", err, out, stderr.String())
	}
	var kinds, states []string
	var artifact, final string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var ev struct {
			Card  string `json:"card"`
			Kind  string `json:"kind"`
			State string `json:"state"`
			Text  string `json:"text"`
			Final *struct {
				State     string   `json:"state"`
				Artifacts []string `json:"artifacts"`
			} `json:"final"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		switch {
		case ev.Card != "":
			kinds = append(kinds, "card:"+ev.Card)
		case ev.Final != nil:
			final = ev.Final.State + " " + strings.Join(ev.Final.Artifacts, "|")
		case ev.Kind == "artifact":
			artifact = ev.Text
		case ev.Kind != "":
			kinds = append(kinds, ev.Kind)
			if len(states) == 0 || states[len(states)-1] != ev.State {
				states = append(states, ev.State)
			}
		}
	}
	if kinds[0] != "card:ioa" {
		t.Errorf("card: %v", kinds)
	}
	want := []string{"TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_COMPLETED"}
	if !slices.Equal(states, want) || !strings.Contains(artifact, "pingping") || !strings.HasPrefix(final, "TASK_STATE_COMPLETED ") || !strings.Contains(final, "pingping") {
		t.Fatalf("states %v (want %v), artifact %q, final %q\n%s", states, want, artifact, final, out)
	}

	// Without the token the SDK's client gets a clear refusal.
	cmd = exec.CommandContext(ctx, node, filepath.Join(dir, "a2a-client.mjs"), base, "", "Double the word ping.")
	out, _ = cmd.Output()
	if !strings.Contains(string(out), `"error"`) || !strings.Contains(strings.ToLower(string(out)), "unauthorized") && !strings.Contains(string(out), "401") {
		t.Errorf("without the token: %s", out)
	}
}
