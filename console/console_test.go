package console_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/builtin"
	"github.com/ioa-nats/ioa/agentkit/llm"
	"github.com/ioa-nats/ioa/agentkit/llm/llmtest"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/agentkit/rules"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/console"
	"github.com/ioa-nats/ioa/internal/stacktest"
	"github.com/ioa-nats/ioa/orchestrator"
)

const token = "test-console-token-0123456789"

// env is a running stack (NATS, registry, orchestrator, coordinator, a
// calculator and a person, alice) with a console in front of it.
type env struct {
	stack *stacktest.Stack
	srv   *httptest.Server
}

// alice is a person: a card of type human hosted by agentkit with neither
// worker nor policy.
func alice() agentkit.Agent {
	return agentkit.Agent{Card: protocol.AgentCard{
		Name: "alice", Type: protocol.TypeHuman,
		Description:  "A person who reviews and approves results before they are final.",
		Capabilities: []string{"approve the result", "review and approve results", "human judgement"},
	}}
}

// start runs the stack with the rules coordinator, the calculator, alice
// and extra, and a console in front.
func start(t *testing.T, cfg console.Config, extra ...agentkit.Agent) *env {
	t.Helper()
	return startWith(t, cfg, true, extra...)
}

func startWith(t *testing.T, cfg console.Config, rulesCoordinator bool, extra ...agentkit.Agent) *env {
	t.Helper()
	st := stacktest.Start(t, stacktest.Options{
		Coordinator: rulesCoordinator,
		// A person takes longer than a program; no test waits for these.
		Orchestrator: orchestrator.Config{SpeakerTimeout: 2 * time.Minute, TaskTimeout: 2 * time.Minute},
	})
	calc, err := builtin.New("calculator", builtin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st.RunAgents(t, nil, append([]agentkit.Agent{
		{Card: protocol.AgentCard{
			Name: "calculator", Type: protocol.TypeTool, Description: "Evaluates arithmetic expressions and computes exact numeric results.",
			Capabilities: []string{"arithmetic", "compute sums, products and percentages"},
		}, Worker: calc, Policy: rules.New(rules.Config{})},
		alice()}, extra...)...)
	nc, err := st.Bus.NewConn("console")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	cfg.NC, cfg.Subjects = nc, st.Bus.Subjects()
	c, err := console.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c)
	t.Cleanup(func() { c.Close(); srv.Close() })
	return &env{stack: st, srv: srv}
}

// call sends a request; body is JSON-encoded unless it is a string.
func (e *env) call(t *testing.T, method, path, tok string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		s, ok := body.(string)
		if !ok {
			b, _ := json.Marshal(body)
			s = string(b)
		}
		rd = strings.NewReader(s)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, e.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	data, _ := io.ReadAll(resp.Body)
	if len(data) > 0 && json.Unmarshal(data, &out) != nil {
		out = map[string]any{"raw": string(data)}
	}
	return resp.StatusCode, out
}

func errCode(out map[string]any) string {
	e, _ := out["error"].(map[string]any)
	s, _ := e["code"].(string)
	return s
}

func TestAuth(t *testing.T) {
	// Not on loopback: nothing without the token.
	e := start(t, console.Config{Token: token})
	if code, out := e.call(t, "GET", "/api/goals", "", nil); code != 401 || errCode(out) != "unauthorized" {
		t.Errorf("no token: %d %v, want 401 unauthorized", code, out)
	}
	if code, _ := e.call(t, "GET", "/api/goals", "wrong-token-0123456789", nil); code != 401 {
		t.Errorf("wrong token: %d, want 401", code)
	}
	if code, out := e.call(t, "GET", "/api/goals", token, nil); code != 200 {
		t.Errorf("with the token: %d %v", code, out)
	}
	if code, out := e.call(t, "GET", "/api/me", "", nil); code != 200 || out["role"] != "" || out["login_required"] != true {
		t.Errorf("me without token: %d %v", code, out)
	}
	// The page itself loads (it shows the login form).
	if code, out := e.call(t, "GET", "/", "", nil); code != 200 || !strings.Contains(fmt.Sprint(out["raw"]), "login-form") {
		t.Errorf("index: %d", code)
	}
	if code, _ := e.call(t, "POST", "/api/login", "", map[string]string{"token": "nope-nope-nope-nope"}); code != 401 {
		t.Errorf("login with a wrong token: %d, want 401", code)
	}

	// The login form sets a cookie that then acts as the token.
	resp, err := http.Post(e.srv.URL+"/api/login", "application/json", strings.NewReader(`{"token":"`+token+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "ioa_console" {
			cookie = c
		}
	}
	if resp.StatusCode != 200 || cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode {
		t.Fatalf("login: %d, cookie %+v", resp.StatusCode, cookie)
	}
	req, _ := http.NewRequest("POST", e.srv.URL+"/api/goals", strings.NewReader(`{"goal":"Compute 2 + 2"}`))
	req.Header.Set("Content-Type", "application/json")
	req.AddCookie(cookie)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Errorf("submit with the login cookie: %d, want 202", resp.StatusCode)
	}

	// A form post (what a cross-site page can send) is refused.
	req, _ = http.NewRequest("POST", e.srv.URL+"/api/goals", strings.NewReader(`goal=x`))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(cookie)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("form post: %d, want 415", resp.StatusCode)
	}
}

func TestViewerIsReadOnly(t *testing.T) {
	e := start(t, console.Config{Token: token, ViewWithoutLogin: true})
	if code, out := e.call(t, "GET", "/api/me", "", nil); out["role"] != "viewer" || out["can_write"] != false {
		t.Errorf("me: %d %v, want viewer", code, out)
	}
	if code, out := e.call(t, "GET", "/api/agents", "", nil); code != 200 || len(out["agents"].([]any)) < 3 {
		t.Errorf("viewer lists agents: %d %v", code, out)
	}
	if code, out := e.call(t, "POST", "/api/goals", "", map[string]string{"goal": "Compute 2 + 2"}); code != 403 || errCode(out) != "forbidden" {
		t.Errorf("viewer submits: %d %v, want 403", code, out)
	}
	code, out := e.call(t, "POST", "/api/goals", token, map[string]string{"goal": "Compute 2 + 2"})
	if code != 202 {
		t.Fatalf("operator submits: %d %v", code, out)
	}
	id := out["goal_id"].(string)
	if out["note"] != nil || out["timeout"] != nil {
		t.Errorf("a submit without a timeout: %v", out)
	}
	// A timeout over the server's limit is lowered, and the answer says so.
	if code, out := e.call(t, "POST", "/api/goals", token, map[string]string{"goal": "Compute 3 + 3", "timeout": "2h"}); code != 202 ||
		out["timeout"] != "5m0s" || !strings.Contains(fmt.Sprint(out["note"]), "5m0s, the server's limit") {
		t.Errorf("a timeout over the limit: %d %v", code, out)
	}
	for _, p := range []string{"/api/goals/" + id + "/cancel", "/api/goals/" + id + "/say", "/api/goals/" + id + "/tasks/t1/result"} {
		if code, _ := e.call(t, "POST", p, "", map[string]string{}); code != 403 {
			t.Errorf("viewer POST %s: %d, want 403", p, code)
		}
	}
	// A wrong token is told so, not served as a viewer's.
	if code, out := e.call(t, "GET", "/api/goals", "wrong", nil); code != 401 || errCode(out) != "unauthorized" {
		t.Errorf("GET with a wrong token: %d %v, want 401", code, out)
	}
	if code, out := e.call(t, "POST", "/api/goals", "wrong", map[string]string{"goal": "x"}); code != 401 {
		t.Errorf("POST with a wrong token: %d %v, want 401", code, out)
	}
	// Cancelling a goal that has ended cancels nothing: 409.
	var st protocol.GoalStatus
	waitEnded := func() bool {
		_, g := e.call(t, "GET", "/api/goals/"+id, token, nil)
		st.Status, _ = g["status"].(string)
		return protocol.GoalEnded(st.Status)
	}
	for deadline := time.Now().Add(10 * time.Second); !waitEnded() && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
	}
	if code, out := e.call(t, "POST", "/api/goals/"+id+"/cancel", token, map[string]string{}); st.Status == protocol.GoalConcluded && (code != 409 || errCode(out) != "conflict") {
		t.Errorf("cancel of a %s goal: %d %v, want 409", st.Status, code, out)
	} else if st.Status != protocol.GoalConcluded {
		t.Errorf("goal %s is %s, want concluded", id, st.Status)
	}
}

func TestBadInput(t *testing.T) {
	e := start(t, console.Config{})
	cases := []struct {
		method, path string
		body         any
		status       int
		code         string
	}{
		{"POST", "/api/goals", map[string]string{}, 400, "invalid"},
		{"POST", "/api/goals", map[string]string{"goal": "   "}, 400, "invalid"},
		{"POST", "/api/goals", `{"goal":"x","surprise":1}`, 400, "invalid"},
		{"POST", "/api/goals", `{"goal":`, 400, "invalid"},
		{"POST", "/api/goals", `{"goal":"x"} {"goal":"y"}`, 400, "invalid"},
		{"POST", "/api/goals", `{"goal":"` + strings.Repeat("a", 1<<20) + `"}`, 413, "too_large"},
		{"POST", "/api/goals", map[string]any{"goal": "x", "team": []string{"Not A Name"}}, 400, "invalid"},
		{"POST", "/api/goals", map[string]any{"goal": "x", "team": []string{"ghost"}}, 404, "not_found"},
		{"POST", "/api/goals", map[string]any{"goal": "x", "timeout": "-1s"}, 400, "invalid"},
		{"POST", "/api/goals", map[string]any{"goal": "x", "timeout": "soon"}, 400, "invalid"},
		{"GET", "/api/goals?status=weird", nil, 400, "invalid"},
		{"GET", "/api/goals?limit=0", nil, 400, "invalid"},
		{"GET", "/api/goals?offset=-3", nil, 400, "invalid"},
		{"GET", "/api/goals/bad.id", nil, 400, "invalid"},
		{"GET", "/api/goals/gnosuchgoal00", nil, 404, "not_found"},
		{"POST", "/api/goals/gnosuchgoal00/cancel", map[string]string{}, 404, "not_found"},
		{"POST", "/api/goals/gnosuchgoal00/say", map[string]string{"content": "hi"}, 404, "not_found"},
		{"POST", "/api/goals/gnosuchgoal00/say", map[string]string{"content": "hi", "type": "pause"}, 400, "invalid"},
		{"POST", "/api/goals/gnosuchgoal00/say", map[string]string{}, 400, "invalid"},
		{"POST", "/api/goals/gnosuchgoal00/tasks/t1/result", map[string]string{"conclusion": "x", "status": "maybe"}, 400, "invalid"},
		{"POST", "/api/goals/gnosuchgoal00/tasks/t.1/result", map[string]string{"conclusion": "x"}, 400, "invalid"},
		{"GET", "/api/goals/gnosuchgoal00/live", nil, 404, "not_found"},
		{"GET", "/api/search", nil, 400, "invalid"},
		{"GET", "/api/search?q=add&limit=1000", nil, 400, "invalid"},
		{"GET", "/api/agents?limit=x", nil, 400, "invalid"},
		{"GET", "/api/nothing-here", nil, 404, "not_found"},
		{"DELETE", "/api/goals/gnosuchgoal00", nil, 405, "invalid"},
		{"GET", "/api/goals/gnosuchgoal00/cancel", nil, 405, "invalid"},
		{"PUT", "/api/goals", nil, 405, "invalid"},
	}
	for _, c := range cases {
		code, out := e.call(t, c.method, c.path, "", c.body)
		if code != c.status || errCode(out) != c.code {
			t.Errorf("%s %s: %d %v, want %d %s", c.method, c.path, code, out, c.status, c.code)
		}
	}
	// A wrong method says which ones the path takes.
	req, _ := http.NewRequestWithContext(t.Context(), "PUT", e.srv.URL+"/api/goals", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if allow := resp.Header.Get("Allow"); resp.StatusCode != 405 || allow != "GET, POST" {
		t.Errorf("PUT /api/goals: %d, Allow %q; want 405 and GET, POST", resp.StatusCode, allow)
	}
}

func TestGoalsPagingAndSearch(t *testing.T) {
	e := start(t, console.Config{})
	for i := range 3 {
		res := e.stack.Submit(t, protocol.GoalRequest{Goal: fmt.Sprintf("Compute %d + 1", i)})
		if res.Status != protocol.GoalConcluded {
			t.Fatalf("goal %d: %+v", i, res)
		}
	}
	_, p1 := e.call(t, "GET", "/api/goals?status=ended&limit=2", "", nil)
	_, p2 := e.call(t, "GET", "/api/goals?status=ended&limit=2&offset=2", "", nil)
	g1, g2 := p1["goals"].([]any), p2["goals"].([]any)
	if len(g1) != 2 || p1["more"] != true || len(g2) != 1 || p2["more"] != false {
		t.Fatalf("pages: %v / %v", p1, p2)
	}
	// Newest first: the last page holds the first goal.
	if g := g2[0].(map[string]any)["goal"]; g != "Compute 0 + 1" {
		t.Errorf("last page holds %v, want the first goal", g)
	}
	if _, out := e.call(t, "GET", "/api/goals?status=running", "", nil); len(out["goals"].([]any)) != 0 {
		t.Errorf("running goals: %v", out)
	}
	// A person takes part in chats but never launches one.
	if res := e.stack.Submit(t, protocol.GoalRequest{Goal: "Compute 1 + 1", Launcher: "alice"}); res.Status != protocol.GoalFailed || !strings.Contains(res.Reason, "is a person") {
		t.Errorf("a goal launched by a person: %+v", res)
	}
	_, out := e.call(t, "GET", "/api/search?q=multiply+two+numbers", "", nil)
	res := out["results"].([]any)
	if len(res) == 0 || res[0].(map[string]any)["name"] != "calculator" || res[0].(map[string]any)["score"].(float64) <= 0 {
		t.Errorf("search: %v", out)
	}
}

// liveEvent is one Server-Sent Event.
type liveEvent struct {
	name string
	data map[string]any
}

// follow reads a goal's live stream into a channel until the test ends.
func (e *env) follow(t *testing.T, goalID string) <-chan liveEvent {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", e.srv.URL+"/api/goals/"+goalID+"/live", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("live: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	ch := make(chan liveEvent, 1024)
	go func() {
		defer resp.Body.Close()
		defer close(ch)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<22)
		var name string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				var d map[string]any
				if json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &d) == nil {
					select {
					case ch <- liveEvent{name, d}:
					case <-t.Context().Done():
						return
					}
				}
			}
		}
	}()
	return ch
}

// next returns the first event the predicate accepts.
func next(t *testing.T, ch <-chan liveEvent, what string, ok func(liveEvent) bool) liveEvent {
	t.Helper()
	return await(t, ch, what, ok, func() string { return "" })
}

// await is next, with state saying how far the wait got when it fails.
func await(t *testing.T, ch <-chan liveEvent, what string, ok func(liveEvent) bool, state func() string) liveEvent {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev, open := <-ch:
			if !open {
				t.Fatalf("live stream ended before %s%s", what, state())
			}
			if ok(ev) {
				return ev
			}
		case <-timeout:
			t.Fatalf("no %s on the live stream%s", what, state())
		}
	}
}

// nextAll waits until each condition has matched an event, in any order:
// the live stream merges a chat's log and the goal stream, whose events
// arrive in no fixed order between the two. It returns the matches in the
// order of the conditions, and says which were met when it times out.
func nextAll(t *testing.T, ch <-chan liveEvent, what string, oks ...func(liveEvent) bool) []liveEvent {
	t.Helper()
	got := make([]liveEvent, len(oks))
	seen := make([]bool, len(oks))
	await(t, ch, what, func(ev liveEvent) bool {
		all := true
		for i, ok := range oks {
			if !seen[i] && ok(ev) {
				got[i], seen[i] = ev, true
			}
			all = all && seen[i]
		}
		return all
	}, func() string { return fmt.Sprintf(" (conditions met: %v)", seen) })
	return got
}

// A person holds a turn and a task; both wait in the chat's state (the
// people page finds them by folding the log) until answered through the
// console, and the live stream shows the chat reaching the conclusion.
func TestPersonAnswersTurnAndTask(t *testing.T) {
	e := start(t, console.Config{Token: token})
	code, out := e.call(t, "POST", "/api/goals", token, map[string]any{
		"goal": "Compute 6 * 7. Then approve the result.", "team": []string{"alice", "calculator"},
	})
	if code != 202 {
		t.Fatalf("submit: %d %v", code, out)
	}
	id := out["goal_id"].(string)
	live := e.follow(t, id)

	// The launcher asks the first person on the team about the plan: alice.
	turn := next(t, live, "alice's turn", func(ev liveEvent) bool { return ev.name == "chat" && ev.data["your_turn"] == "alice" })
	if turn.data["speaker"] != "alice" {
		t.Fatalf("chat state: %v", turn.data)
	}
	waiting := func() map[string]any {
		_, out := e.call(t, "GET", "/api/people", token, nil)
		for _, p := range out["people"].([]any) {
			if p := p.(map[string]any); p["name"] == "alice" {
				for _, w := range p["waiting"].([]any) {
					if w := w.(map[string]any); w["goal_id"] == id {
						return w
					}
				}
			}
		}
		return nil
	}
	if w := waiting(); w == nil || w["turn"] != true {
		t.Fatalf("people page: alice's turn is not listed: %v", w)
	}
	// The console speaks only for people, and only in turn.
	if code, out := e.call(t, "POST", "/api/goals/"+id+"/say", token, map[string]string{"as": "calculator", "content": "I am alice"}); code != 403 {
		t.Errorf("say as calculator: %d %v, want 403", code, out)
	}
	if code, out := e.call(t, "POST", "/api/goals/"+id+"/say", token, map[string]string{"content": "Go ahead.", "next_speaker": "nobody"}); code != 400 {
		t.Errorf("say to a non-member: %d %v, want 400", code, out)
	}
	// A conclusion says the last entry the person saw; one past the log is refused.
	if code, out := e.call(t, "POST", "/api/goals/"+id+"/say", token, map[string]any{"type": "conclusion", "content": "done", "seen_seq": 99}); code != 400 || !strings.Contains(fmt.Sprint(out), "seen_seq 99") {
		t.Errorf("a conclusion that saw seq 99: %d %v, want 400 about seen_seq", code, out)
	}
	if code, out := e.call(t, "POST", "/api/goals/"+id+"/say", token, map[string]string{"content": "Go ahead; I will approve."}); code != 200 || out["seq"].(float64) < 2 {
		t.Fatalf("alice says: %d %v", code, out)
	}
	if code, out := e.call(t, "POST", "/api/goals/"+id+"/say", token, map[string]string{"as": "alice", "content": "again"}); code != 409 || errCode(out) != "not_your_turn" {
		t.Errorf("alice out of turn: %d %v, want 409 not_your_turn", code, out)
	}
	next(t, live, "alice's message", func(ev liveEvent) bool {
		return ev.name == "message" && ev.data["sender"] == "alice" && ev.data["content"] == "Go ahead; I will approve."
	})

	// The approval is alice's task: input required until she answers.
	req := next(t, live, "input required", func(ev liveEvent) bool {
		ir, _ := ev.data["input_required"].([]any)
		return ev.name == "chat" && len(ir) == 1
	})
	task := req.data["input_required"].([]any)[0].(string)
	if w := waiting(); w == nil || fmt.Sprint(w["tasks"]) != "["+task+"]" {
		t.Fatalf("people page: alice's task %s is not listed: %v", task, w)
	}
	if task != "t2" {
		t.Fatalf("alice's task is %s; the plan should give her the second clause, t2", task)
	}
	if code, out := e.call(t, "POST", "/api/goals/"+id+"/tasks/t1/result", token, map[string]string{"conclusion": "42"}); code != 403 {
		t.Errorf("answering the calculator's task: %d %v, want 403", code, out)
	}
	if code, out := e.call(t, "POST", "/api/goals/"+id+"/tasks/"+task+"/result", token, map[string]string{"conclusion": "Approved: 42 is right."}); code != 200 {
		t.Fatalf("alice answers %s: %d %v", task, code, out)
	}
	ends := nextAll(t, live, "the conclusion and the goal's result",
		func(ev liveEvent) bool { return ev.name == "chat" && ev.data["ended"] == true },
		func(ev liveEvent) bool { return ev.name == "result" })
	end := ends[0]
	var aliceTask map[string]any
	for _, r := range end.data["tasks"].([]any) {
		if r := r.(map[string]any); r["task_id"] == task {
			aliceTask = r
		}
	}
	if aliceTask == nil || aliceTask["status"] != "completed" || aliceTask["person"] != true || aliceTask["result"] != "Approved: 42 is right." {
		t.Errorf("alice's task on the board: %v", aliceTask)
	}
	res := ends[1].data
	if res["status"] != "concluded" || !strings.Contains(res["conclusion"].(string), "Approved: 42 is right.") || !strings.Contains(res["conclusion"].(string), "42") {
		t.Errorf("result: %v", res)
	}
	if w := waiting(); w != nil {
		t.Errorf("still waiting on alice after the end: %v", w)
	}
}

func TestCancel(t *testing.T) {
	e := start(t, console.Config{Token: token})
	code, out := e.call(t, "POST", "/api/goals", token, map[string]any{"goal": "Approve the result.", "team": []string{"alice"}})
	if code != 202 {
		t.Fatalf("submit: %d %v", code, out)
	}
	id := out["goal_id"].(string)
	live := e.follow(t, id)
	next(t, live, "a chat", func(ev liveEvent) bool { return ev.name == "chat" })
	if code, out := e.call(t, "POST", "/api/goals/"+id+"/cancel", token, nil); code != 200 || out["status"] != "cancelled" {
		t.Fatalf("cancel: %d %v", code, out)
	}
	next(t, live, "the end", func(ev liveEvent) bool { return ev.name == "chat" && ev.data["ended"] == true })
	if code, out := e.call(t, "POST", "/api/goals/"+id+"/say", token, map[string]string{"content": "too late"}); code != 409 {
		t.Errorf("say after the end: %d %v, want 409", code, out)
	}
}

// delegating always wants a sub-team for its tasks.
type delegating struct{ *rules.Policy }

func (delegating) NeedsTeam(_ context.Context, q agentkit.TeamCheck) (string, error) {
	return q.Task.TaskDesc, nil
}

// A goal's live stream follows its nested sub-goals too: their records
// (for the tree) and their chats.
func TestLiveFollowsSubGoals(t *testing.T) {
	planner := agentkit.Agent{
		Card: protocol.AgentCard{Name: "planner", Type: protocol.TypeTool, Description: "Plans trips and their budgets.",
			Capabilities: []string{"trip budget"}, NestedTeams: true},
		Worker: agentkit.WorkerFunc(func(context.Context, agentkit.Task) (agentkit.Result, error) {
			return agentkit.Result{Conclusion: "budget: 1200 EUR"}, nil
		}),
		Policy: delegating{rules.New(rules.Config{})},
	}
	e := start(t, console.Config{}, planner)
	max1 := 1
	var sub protocol.SubmitReply
	if err := e.stack.Request(t, e.stack.Bus.Subjects().Goal(bus.GoalSubmit),
		protocol.GoalRequest{Goal: "Plan the trip budget.", Team: []string{"planner"}, MaxDepth: &max1}, &sub); err != nil {
		t.Fatal(err)
	}
	var child string
	t.Cleanup(func() { // before the stack stops: a failure shows both records
		if t.Failed() {
			for _, id := range []string{sub.GoalID, child} {
				if id != "" {
					_, g := e.call(t, "GET", "/api/goals/"+id, "", nil)
					t.Logf("goal %s: %v", id, g)
				}
			}
		}
	})
	live := e.follow(t, sub.GoalID)
	child = next(t, live, "the sub-goal's record", func(ev liveEvent) bool {
		return ev.name == "goal" && ev.data["parent_goal_id"] == sub.GoalID
	}).data["goal_id"].(string)
	got := nextAll(t, live, "the sub-goal's chat ending, the root's result and record",
		func(ev liveEvent) bool {
			return ev.name == "chat" && ev.data["goal_id"] == child && ev.data["ended"] == true
		},
		func(ev liveEvent) bool { return ev.name == "result" && ev.data["goal_id"] == sub.GoalID },
		func(ev liveEvent) bool {
			return ev.name == "goal" && ev.data["goal_id"] == sub.GoalID && ev.data["result"] != nil
		})
	root := got[2]
	if kids, _ := root.data["children"].([]any); len(kids) != 1 || kids[0] != child {
		t.Errorf("root's children: %v, want [%s]", root.data["children"], child)
	}
}

// The goal's cost: a coordinator on a model (a fake OpenAI server that
// answers garbage, so every move is the policy's fallback) spends LLM
// calls and tokens; the chat state shows them per agent, and its total is
// the goal's usage.
func TestUsagePerAgentAndGoal(t *testing.T) {
	fake := llmtest.New(t, llmtest.Always(llmtest.Garbage()))
	model, err := llm.NewModel(llm.Config{BaseURL: fake.URL, Model: "fake", Retries: -1})
	if err != nil {
		t.Fatal(err)
	}
	e := startWith(t, console.Config{}, false, orchestrator.Coordinator("coordinator", llm.New(model, llm.PolicyConfig{Retries: -1})))
	code, out := e.call(t, "POST", "/api/goals", "", map[string]any{"goal": "Compute 2 + 2", "team": []string{"calculator"}})
	if code != 202 {
		t.Fatalf("submit: %d %v", code, out)
	}
	id := out["goal_id"].(string)
	live := e.follow(t, id)
	// The chat's end and the goal's result come from two streams, in
	// either order.
	got := nextAll(t, live, "the chat's end and the goal's result",
		func(ev liveEvent) bool { return ev.name == "chat" && ev.data["ended"] == true },
		func(ev liveEvent) bool { return ev.name == "result" })
	end, result := got[0], got[1].data
	usage := end.data["usage"].(map[string]any)
	coord, _ := usage["coordinator"].(map[string]any)
	if coord == nil || coord["llm_calls"].(float64) < 1 || coord["prompt_tokens"].(float64) < 1 {
		t.Fatalf("the coordinator's usage: %v", usage)
	}
	total := end.data["total"].(map[string]any)
	res := result["usage"].(map[string]any)
	for _, k := range []string{"llm_calls", "prompt_tokens", "completion_tokens"} {
		if total[k] != res[k] {
			t.Errorf("%s: chat total %v, goal result %v", k, total[k], res[k])
		}
	}
	reported, calls := fake.Reported()
	if int(total["llm_calls"].(float64)) != calls || int(total["prompt_tokens"].(float64)) != reported.PromptTokens {
		t.Errorf("chat total %v; the model answered %d calls, %+v", total, calls, reported)
	}
}

// A goal submitted with "approval by alice" waits, once its team has
// concluded, for alice's answer: listed on the People page, approved in the
// console, concluded with the proposed result; answering twice is refused.
func TestPersonApprovesTheConclusion(t *testing.T) {
	e := start(t, console.Config{Token: token})
	code, out := e.call(t, "POST", "/api/goals", token, map[string]any{
		"goal": "Compute 6 * 7", "team": []string{"calculator"}, "approve_by": "alice",
	})
	if code != 202 {
		t.Fatalf("submit: %d %v", code, out)
	}
	id := out["goal_id"].(string)
	live := e.follow(t, id)
	next(t, live, "the approval request", func(ev liveEvent) bool {
		return ev.name == "goal" && ev.data["status"] == protocol.GoalAwaitingApproval
	})
	var approval map[string]any
	_, people := e.call(t, "GET", "/api/people", token, nil)
	for _, p := range people["people"].([]any) {
		if p := p.(map[string]any); p["name"] == "alice" {
			for _, w := range p["waiting"].([]any) {
				if w := w.(map[string]any); w["goal_id"] == id {
					approval = w
				}
			}
		}
	}
	if approval == nil || approval["approval"] != true {
		t.Fatalf("people page: alice's approval is not listed: %v", people)
	}
	if code, _ := e.call(t, "POST", "/api/goals/"+id+"/approve", "", map[string]any{"approve": true}); code != 401 {
		t.Errorf("approving without the login: %d, want 401", code)
	}
	code, out = e.call(t, "POST", "/api/goals/"+id+"/approve", token, map[string]any{"approve": true, "note": "fine"})
	if code != 200 || out["status"] != protocol.GoalConcluded {
		t.Fatalf("approve: %d %v", code, out)
	}
	res := out["result"].(map[string]any)
	if !strings.Contains(res["conclusion"].(string), "42") || !strings.Contains(res["reason"].(string), "approved by alice: fine") {
		t.Errorf("approved result: %v", res)
	}
	if code, out := e.call(t, "POST", "/api/goals/"+id+"/approve", token, map[string]any{"approve": false}); code != 409 || errCode(out) != "conflict" {
		t.Errorf("answering twice: %d %v, want 409 conflict", code, out)
	}
	if code, out := e.call(t, "POST", "/api/goals/"+id+"/approve", token, `{"approve":"yes"}`); code != 400 {
		t.Errorf("a malformed answer: %d %v, want 400", code, out)
	}
}
