package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/agentkit/rules"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/configs"
	"github.com/ioa-nats/ioa/internal/stacktest"
	"github.com/ioa-nats/ioa/orchestrator"
)

// cliWorld is a running runtime (NATS, registry, orchestrator, agents) for
// the client commands to talk to.
type cliWorld struct {
	b   *bus.Bus
	url string
}

func newCLIWorld(t *testing.T, agents ...agentkit.Agent) *cliWorld {
	t.Helper()
	s := stacktest.Start(t, stacktest.Options{})
	if len(agents) > 0 {
		s.RunAgents(t, nil, agents...)
	}
	return &cliWorld{b: s.Bus, url: s.URL}
}

var productRE = regexp.MustCompile(`(\d+)\s*[*x×]\s*(\d+)`)

// testAgents are the coordinator and two func workers led by the rules
// policy, so goals end the same way every time.
func testAgents() []agentkit.Agent {
	fn := func(name, desc string, caps []string, do func(agentkit.Task) (string, error)) agentkit.Agent {
		return agentkit.Agent{
			Card: protocol.AgentCard{Name: name, Description: desc, Capabilities: caps, Type: protocol.TypeTool},
			Worker: agentkit.WorkerFunc(func(_ context.Context, t agentkit.Task) (agentkit.Result, error) {
				s, err := do(t)
				return agentkit.Result{Conclusion: s}, err
			}),
			Policy: rules.New(rules.Config{}),
		}
	}
	return []agentkit.Agent{
		orchestrator.Coordinator("coordinator", rules.New(rules.Config{})),
		fn("multiplier", "Multiplies numbers: computes products of integers.", []string{"multiplication", "arithmetic"},
			func(t agentkit.Task) (string, error) {
				m := productRE.FindStringSubmatch(t.TaskDesc)
				if m == nil {
					return "", fmt.Errorf("no product in %q", t.TaskDesc)
				}
				a, _ := strconv.Atoi(m[1])
				b, _ := strconv.Atoi(m[2])
				return strconv.Itoa(a * b), nil
			}),
		fn("distance-converter", "Converts distances between kilometres and miles.", []string{"unit conversion", "kilometres to miles"},
			func(agentkit.Task) (string, error) { return "5 km = 3.107 miles", nil }),
	}
}

const testGoal = "Multiply 12 x 7. Convert 5 kilometres to miles."

// runCLI runs one command the way the ioa binary does and returns what it
// printed.
func runCLI(t *testing.T, cmd *cobra.Command, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	root := &cobra.Command{Use: "ioa", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(cmd)
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	err = root.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

// submit starts a goal without waiting for it.
func (w *cliWorld) submit(t *testing.T, req protocol.GoalRequest) string {
	t.Helper()
	var reply protocol.SubmitReply
	if err := bus.Request(t.Context(), w.b.Conn(), w.b.Subjects().Goal(bus.GoalSubmit), req, &reply); err != nil {
		t.Fatalf("submit: %v", err)
	}
	return reply.GoalID
}

// inOrder fails unless every part occurs in s, each after the previous one.
func inOrder(t *testing.T, s string, parts ...string) {
	t.Helper()
	rest := s
	for _, p := range parts {
		i := strings.Index(rest, p)
		if i < 0 {
			t.Fatalf("output lacks %q (in this order: %q); output:\n%s", p, parts, s)
		}
		rest = rest[i+len(p):]
	}
}

func TestFollowGoalPrintsTheStoryInOrder(t *testing.T) {
	w := newCLIWorld(t, testAgents()...)
	id := w.submit(t, protocol.GoalRequest{Goal: testGoal, Team: []string{"multiplier", "distance-converter"}})
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	res, err := followGoal(ctx, w.b.Conn(), w.b.Subjects(), id, &out, renderOptions{Width: 120})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("followGoal output:\n%s", out.String())
	if res.Status != protocol.GoalConcluded || res.GoalID != id {
		t.Fatalf("result = %+v", res)
	}
	text := out.String()
	inOrder(t, text,
		"● goal "+id+": "+testGoal,
		"● team: coordinator, multiplier, distance-converter",
		"#1 system  start → coordinator  [discussion]",
		"#2 coordinator",
		"⇢ task", "→ multiplier: Multiply 12 x 7",
		"✓", "multiplier", ": 84",
		"✔ concluded",
		"    Multiply 12 x 7: 84",
		"turns · ",
	)
	if !strings.Contains(text, "distance-converter") || !strings.Contains(text, "5 km = 3.107 miles") {
		t.Errorf("the converter's task is missing:\n%s", text)
	}
	if strings.Contains(text, "\033[") || strings.Contains(text, "\r") {
		t.Errorf("plain output has escape codes or carriage returns:\n%q", text)
	}
	// Replaying an ended goal prints the same story and ends at once.
	var again bytes.Buffer
	if _, err := followGoal(ctx, w.b.Conn(), w.b.Subjects(), id, &again, renderOptions{Width: 120}); err != nil {
		t.Fatal(err)
	}
	if again.String() != text {
		t.Errorf("replay differs:\n%s\nfirst:\n%s", again.String(), text)
	}
	// JSON: one event per line, the last the conclusion.
	var js bytes.Buffer
	if _, err := followGoal(ctx, w.b.Conn(), w.b.Subjects(), id, &js, renderOptions{JSON: true}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(js.String()), "\n")
	var last protocol.GoalEvent
	for _, l := range lines {
		if err := json.Unmarshal([]byte(l), &last); err != nil {
			t.Fatalf("not a JSON line: %q", l)
		}
	}
	if len(lines) < 5 || last.Kind != protocol.EventConcluded || last.Result == nil {
		t.Fatalf("%d JSON events, last %+v", len(lines), last)
	}
}

func TestFollowGoalReturnsWhenContextEnds(t *testing.T) {
	w := newCLIWorld(t)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	_, err := followGoal(ctx, w.b.Conn(), w.b.Subjects(), "g_never", &bytes.Buffer{}, renderOptions{Live: true})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the context's", err)
	}
}

func TestGoalCommand(t *testing.T) {
	w := newCLIWorld(t, testAgents()...)
	team := "--team=multiplier,distance-converter"

	t.Run("json", func(t *testing.T) {
		t.Parallel()
		out, _, err := runCLI(t, newGoalCmd(), "goal", testGoal, team, "--json", "--nats-url", w.url)
		if err != nil {
			t.Fatal(err)
		}
		var res protocol.GoalResult
		dec := json.NewDecoder(strings.NewReader(out))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&res); err != nil || dec.More() {
			t.Fatalf("stdout is not one GoalResult: %v\n%s", err, out)
		}
		if res.Status != protocol.GoalConcluded || !strings.Contains(res.Conclusion, "84") {
			t.Fatalf("result = %+v", res)
		}
	})
	t.Run("live", func(t *testing.T) {
		t.Parallel()
		out, _, err := runCLI(t, newGoalCmd(), "goal", testGoal, team, "--nats-url", w.url)
		if err != nil {
			t.Fatal(err)
		}
		inOrder(t, out, "● team:", "#1 system", "⇢ task", "✔ concluded", "Multiply 12 x 7: 84")
	})
	t.Run("quiet", func(t *testing.T) {
		t.Parallel()
		out, _, err := runCLI(t, newGoalCmd(), "goal", testGoal, team, "-q", "--nats-url", w.url)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out, "#1") || !strings.HasPrefix(out, "✔ concluded\n") {
			t.Fatalf("quiet output:\n%s", out)
		}
	})
	t.Run("detach", func(t *testing.T) {
		t.Parallel()
		out, _, err := runCLI(t, newGoalCmd(), "goal", testGoal, team, "--detach", "--nats-url", w.url)
		if err != nil {
			t.Fatal(err)
		}
		if id := strings.TrimSuffix(out, "\n"); !protocol.ValidID(id) {
			t.Fatalf("detach printed %q, want a goal id alone", out)
		}
	})
	t.Run("a timeout over the server's limit is noted", func(t *testing.T) {
		t.Parallel()
		out, errOut, err := runCLI(t, newGoalCmd(), "goal", testGoal, team, "--detach", "--timeout", "2h", "--nats-url", w.url)
		if err != nil {
			t.Fatal(err)
		}
		id := strings.TrimSuffix(out, "\n")
		if want := "note: goal " + id + " has 5m0s, the server's limit (limits.goal_timeout), not the 2h0m0s asked\n"; errOut != want {
			t.Errorf("stderr %q, want %q", errOut, want)
		}
		if _, errOut, err = runCLI(t, newGoalCmd(), "goal", testGoal, team, "--detach", "--timeout", "1m", "--nats-url", w.url); err != nil || errOut != "" {
			t.Errorf("a timeout within the limit: stderr %q, err %v", errOut, err)
		}
	})
	t.Run("detach with an idempotency key", func(t *testing.T) {
		t.Parallel()
		var ids []string
		for range 2 {
			out, _, err := runCLI(t, newGoalCmd(), "goal", testGoal, team, "--detach", "--idempotency-key", "nightly-1", "--nats-url", w.url)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, strings.TrimSuffix(out, "\n"))
		}
		if !protocol.ValidID(ids[0]) || ids[1] != ids[0] {
			t.Fatalf("the same key submitted twice printed %q, want one goal id twice", ids)
		}
		_, _, err := runCLI(t, newGoalCmd(), "goal", "Another goal", team, "--detach", "--idempotency-key", "nightly-1", "--nats-url", w.url)
		if err == nil || !strings.Contains(err.Error(), "already used for another goal") {
			t.Fatalf("key reused for another goal: err = %v", err)
		}
	})
	t.Run("file", func(t *testing.T) {
		t.Parallel()
		f := filepath.Join(t.TempDir(), "goal.json")
		body := `{"goal": "Multiply 6 x 7.", "team": ["multiplier"], "max_turns": 8}`
		if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		out, _, err := runCLI(t, newGoalCmd(), "goal", "--file", f, "--json", "--nats-url", w.url)
		if err != nil {
			t.Fatal(err)
		}
		var res protocol.GoalResult
		if err := json.Unmarshal([]byte(out), &res); err != nil || !strings.Contains(res.Conclusion, "42") {
			t.Fatalf("result %+v (%v)", res, err)
		}
	})
	// An agent the goal names but the registry does not know is refused
	// by the server's goal.submit, and said in one line.
	for _, c := range []struct {
		unknown string
		args    []string
	}{{"nobody", []string{"--launcher", "nobody"}}, {"ghost", []string{"--team", "multiplier,ghost"}}, {"ghost", []string{"--team", "ghost", "--json"}}} {
		t.Run("unknown agent "+strings.Join(c.args, " "), func(t *testing.T) {
			t.Parallel()
			out, _, err := runCLI(t, newGoalCmd(), append([]string{"goal", testGoal, "--nats-url", w.url}, c.args...)...)
			want := fmt.Sprintf("no agent named %q is registered (see: ioa agents ls)", c.unknown)
			if err == nil || err.Error() != want || !errors.Is(err, protocol.ErrNotFound) || out != "" {
				t.Fatalf("err = %v, stdout %q; want %q and nothing on stdout", err, out, want)
			}
		})
	}
	// How a goal ended is the exit status, with the reason, and --json
	// still prints the result: a launcher that is registered but not
	// running fails the goal on the server.
	t.Run("json failed", func(t *testing.T) {
		t.Parallel()
		reg := protocol.AgentCard{Name: "idle-launcher", Description: "registered, never answers"}
		if err := bus.Request(t.Context(), w.b.Conn(), w.b.Subjects().Registry(bus.RegistryRegister), reg, nil); err != nil {
			t.Fatal(err)
		}
		out, _, err := runCLI(t, newGoalCmd(), "goal", testGoal, "--launcher", "idle-launcher", "--json", "--nats-url", w.url)
		var ec exitCode
		if !errors.As(err, &ec) || ec.code != exitFailed || !strings.Contains(ec.msg, "idle-launcher is not running") {
			t.Fatalf("err = %v, want exit %d", err, exitFailed)
		}
		var res protocol.GoalResult
		if err := json.Unmarshal([]byte(out), &res); err != nil || res.Status != protocol.GoalFailed {
			t.Fatalf("stdout %q (%v)", out, err)
		}
	})
}

// TestPartialGoalCommand: a goal half of which no registered agent can do
// ends with a yellow mark, exit status 5, the part named; ioa goals ls shows
// the outcome.
func TestPartialGoalCommand(t *testing.T) {
	w := newCLIWorld(t, testAgents()...)
	const haiku = "Write a haiku about distributed systems"
	out, _, err := runCLI(t, newGoalCmd(), "goal", "Multiply 12 x 7. "+haiku+".", "--nats-url", w.url)
	var ec exitCode
	if !errors.As(err, &ec) || ec.code != exitPartial || !strings.Contains(ec.msg, `no registered agent can do "`+haiku+`"`) {
		t.Fatalf("err = %v, want exit %d naming the part nobody can do\n%s", err, exitPartial, out)
	}
	inOrder(t, out, "[none] -: "+haiku, "◐ concluded · partial: 1 of 2 parts done", "Multiply 12 x 7: 84", haiku+": NOT DONE")
	if strings.Contains(out, "✔") {
		t.Errorf("a partial goal shows a green mark:\n%s", out)
	}
	out, _, err = runCLI(t, newGoalsCmd(), "goals", "ls", "--nats-url", w.url)
	if err != nil {
		t.Fatal(err)
	}
	inOrder(t, out, "OUTCOME", "concluded", "partial", "Multiply 12 x 7")
}

func TestGoalExitCodes(t *testing.T) {
	for outcome, code := range map[string]int{protocol.OutcomeSucceeded: 0, "": 0, protocol.OutcomePartial: 5, protocol.OutcomeFailed: 2} {
		err := goalExit(protocol.GoalResult{GoalID: "g1", Status: protocol.GoalConcluded, Outcome: outcome, Reason: "why"})
		var ec exitCode
		switch {
		case code == 0 && err != nil:
			t.Errorf("concluded, %q: %v, want nil", outcome, err)
		case code != 0 && (!errors.As(err, &ec) || ec.code != code || !strings.HasSuffix(ec.msg, ": why")):
			t.Errorf("concluded, %q: %v, want exit %d with the reason", outcome, err, code)
		}
	}
	for status, code := range map[string]int{
		protocol.GoalConcluded: 0, protocol.GoalFailed: 2, protocol.GoalCancelled: 3, protocol.GoalTimedOut: 4,
	} {
		err := goalExit(protocol.GoalResult{GoalID: "g1", Status: status, Reason: "why"})
		var ec exitCode
		switch {
		case code == 0 && err != nil:
			t.Errorf("%s: %v, want nil", status, err)
		case code != 0 && (!errors.As(err, &ec) || ec.code != code || !strings.HasSuffix(ec.msg, ": why")):
			t.Errorf("%s: %v, want exit %d with the reason", status, err, code)
		}
	}
}

func TestGoalCommandWithoutServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "nats://" + l.Addr().String()
	l.Close()
	_, _, err = runCLI(t, newGoalCmd(), "goal", "anything", "--nats-url", url)
	want := `cannot reach NATS at ` + url + `: is "ioa serve" running? (or pass --nats-url)`
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant  %s", err, want)
	}
	_, _, err = runCLI(t, newAgentsCmd(), "agents", "ls", "--nats-url", url)
	if err == nil || err.Error() != want {
		t.Fatalf("agents ls: err = %v", err)
	}
}

func TestGoalFileErrors(t *testing.T) {
	dir := t.TempDir()
	cases := []struct{ name, body, says string }{
		{"syntax", "{\n  \"goal\": \"x\",,\n}", "invalid JSON at line 2, column 15"},
		{"type", `{"goal": "x", "team": "multiplier"}`, `"team" must be an array of strings, not a string`},
		{"no goal", `{"team": ["multiplier"]}`, `"goal" is required`},
		{"bad name", `{"goal": "x", "team": ["Not A Name"]}`, "Not A Name"},
		{"timeout number", `{"goal": "Compute 4+4", "timeout": 30}`, `goal file %s: "timeout" must be a duration string such as "90s" or "2m", not a number`},
		{"timeout text", `{"goal": "Compute 4+4", "timeout": "soon"}`, `"timeout" must be a duration string such as "90s" or "2m", not "soon"`},
		{"whole number", `{"goal": "x", "max_turns": 2.5}`, `"max_turns" must be a whole number, not 2.5`},
		{"nested", `{"goal": "x", "parent": {"goal_id": 7}}`, `"parent.goal_id" must be a string, not a number`},
		{"a string", `"Compute 1+1"`, `goal file %s: it holds a JSON string, not an object: write {"goal":"Compute 1+1"}`},
		{"an array", `["Compute 1+1"]`, `it holds an array, not an object such as {"goal": `},
		{"null", `null`, `it holds null, not an object`},
		{"not json", `not json`, `goal file %s: invalid JSON at line 1, column 2; a goal file holds an object such as {"goal": `},
		{"unfinished", `{"goal": `, `the JSON ends unfinished at line 1, column 9`},
		{"unknown field", `{"goal": "x", "timout": "2m"}`, `unknown field "timout" (a goal request's fields: approve_by, goal, idempotency_key, launcher, max_depth, max_turns, parent, team, timeout, wait)`},
		{"two values", `{"goal": "x"} {"goal": "y"}`, `invalid JSON at line 1, column 15`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".json")
			if err := os.WriteFile(f, []byte(tc.body), 0o644); err != nil {
				t.Fatal(err)
			}
			// No server is needed: the file is checked before connecting.
			_, _, err := runCLI(t, newGoalCmd(), "goal", "--file", f, "--nats-url", "nats://127.0.0.1:1")
			says := strings.ReplaceAll(tc.says, "%s", f)
			var ec exitCode
			if err == nil || errors.As(err, &ec) || !strings.Contains(err.Error(), says) || strings.Contains(err.Error(), "\n") ||
				strings.Contains(err.Error(), "protocol.") || strings.Contains(err.Error(), "invalid character") {
				t.Fatalf("err = %v, want one line saying %q", err, says)
			}
		})
	}
	// A goal in the file and one as the argument: which one was meant?
	f := filepath.Join(dir, "f1.json")
	if err := os.WriteFile(f, []byte(`{"goal": "Compute 5+5"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := runCLI(t, newGoalCmd(), "goal", "Compute 6+6", "--file", f, "--nats-url", "nats://127.0.0.1:1")
	if err == nil || !strings.Contains(err.Error(), "goal file "+f+` has a "goal" and so does the command line: give the goal once`) {
		t.Fatalf("a goal twice: %v", err)
	}
	// A file of options and the goal as the argument is fine: it gets as
	// far as connecting.
	f = filepath.Join(dir, "options.json")
	if err := os.WriteFile(f, []byte(`{"timeout": "2m"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = runCLI(t, newGoalCmd(), "goal", "Compute 6+6", "--file", f, "--nats-url", "nats://127.0.0.1:1")
	if err == nil || !strings.Contains(err.Error(), "cannot reach NATS") {
		t.Fatalf("options in the file, the goal as the argument: %v", err)
	}
	_, _, err = runCLI(t, newGoalCmd(), "goal", "--nats-url", "nats://127.0.0.1:1")
	if err == nil || !strings.Contains(err.Error(), "say what the goal is") {
		t.Fatalf("no goal: err = %v", err)
	}
}

func TestAgentsCommands(t *testing.T) {
	w := newCLIWorld(t, testAgents()...)
	out, _, err := runCLI(t, newAgentsCmd(), "agents", "ls", "--nats-url", w.url)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("agents ls:\n%s", out)
	inOrder(t, out, "NAME", "TYPE", "ONLINE", "DESCRIPTION\n")
	for _, name := range []string{"coordinator", "distance-converter", "multiplier"} {
		if !regexp.MustCompile(`(?m)^` + name + ` +\S+ +yes +\S`).MatchString(out) {
			t.Errorf("no row for %s online:\n%s", name, out)
		}
	}
	out, _, err = runCLI(t, newAgentsCmd(), "agents", "ls", "--json", "--nats-url", w.url)
	var list protocol.ListReply
	if err != nil || json.Unmarshal([]byte(out), &list) != nil || list.Total != 3 || len(list.Agents) != 3 {
		t.Fatalf("ls --json: %v %+v\n%s", err, list, out)
	}

	out, _, err = runCLI(t, newAgentsCmd(), "agents", "search", "multiply two numbers", "--limit", "2", "--nats-url", w.url)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("agents search:\n%s", out)
	rows := strings.Split(strings.TrimSpace(out), "\n")
	if len(rows) < 2 || !strings.HasPrefix(rows[0], "SCORE") || !regexp.MustCompile(`^[01]\.\d{3} +[01]\.\d{3} +multiplier +tool +yes +Multiplies`).MatchString(rows[1]) {
		t.Fatalf("search table:\n%s", out)
	}
	out, _, err = runCLI(t, newAgentsCmd(), "agents", "search", "kilometres to miles", "--json", "--nats-url", w.url)
	var sr protocol.SearchReply
	if err != nil || json.Unmarshal([]byte(out), &sr) != nil || len(sr.Results) == 0 || sr.Results[0].Name != "distance-converter" {
		t.Fatalf("search --json: %v %+v", err, sr)
	}

	out, _, err = runCLI(t, newAgentsCmd(), "agents", "get", "multiplier", "--nats-url", w.url)
	if err != nil || !strings.Contains(out, "multiplication, arithmetic") || !strings.Contains(out, "Multiplies numbers") {
		t.Fatalf("get: %v\n%s", err, out)
	}
	_, _, err = runCLI(t, newAgentsCmd(), "agents", "get", "ghost", "--nats-url", w.url)
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "ghost") {
		t.Fatalf("get ghost: %v", err)
	}
	_, _, err = runCLI(t, newAgentsCmd(), "agents", "search", "x", "--limit", "0", "--nats-url", w.url)
	if err == nil || !strings.Contains(err.Error(), "--limit") {
		t.Fatalf("search --limit 0: %v", err)
	}
}

func TestWatchAndGoalsCommands(t *testing.T) {
	w := newCLIWorld(t, testAgents()...)
	// The multiplier alone cannot convert kilometres: the goal is partial.
	id := w.submit(t, protocol.GoalRequest{Goal: testGoal, Team: []string{"multiplier"}})

	out, _, err := runCLI(t, newWatchCmd(), "watch", id, "--nats-url", w.url)
	var ec exitCode
	if !errors.As(err, &ec) || ec.code != exitPartial {
		t.Fatalf("watch: %v, want exit %d (partial)", err, exitPartial)
	}
	inOrder(t, out, "● goal "+id, "● team: coordinator, multiplier", "◐ concluded · partial: 1 of 2 parts done")

	var st protocol.GoalStatus
	if err := bus.Request(t.Context(), w.b.Conn(), w.b.Subjects().Goal(bus.GoalGet), protocol.GoalIDRequest{GoalID: id}, &st); err != nil {
		t.Fatal(err)
	}
	out, _, err = runCLI(t, newWatchCmd(), "watch", st.CommID, "--nats-url", w.url)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("watch chat:\n%s", out)
	inOrder(t, out, "#1 system", "⇢ task", "✓", "conclusion", "● chat "+st.CommID+" ended")

	_, _, err = runCLI(t, newWatchCmd(), "watch", "nothing_here", "--nats-url", w.url)
	if err == nil || err.Error() != "no goal or chat with id nothing_here" {
		t.Fatalf("watch unknown: %v", err)
	}

	out, _, err = runCLI(t, newGoalsCmd(), "goals", "ls", "--nats-url", w.url)
	if err != nil || !regexp.MustCompile(`(?m)^`+id+` +concluded +partial +\d+s +coordinator,multiplier +Multiply`).MatchString(out) {
		t.Fatalf("goals ls: %v\n%s", err, out)
	}
	out, _, err = runCLI(t, newGoalsCmd(), "goals", "ls", "--status", "running", "--json", "--nats-url", w.url)
	var list protocol.GoalListReply
	if err != nil || json.Unmarshal([]byte(out), &list) != nil || len(list.Goals) != 0 {
		t.Fatalf("goals ls running: %v\n%s", err, out)
	}
	_, _, err = runCLI(t, newGoalsCmd(), "goals", "ls", "--status", "done", "--nats-url", w.url)
	if err == nil || !strings.Contains(err.Error(), "running, ended or all") {
		t.Fatalf("bad status: %v", err)
	}
	out, _, err = runCLI(t, newGoalsCmd(), "goals", "get", id, "--nats-url", w.url)
	if err != nil {
		t.Fatal(err)
	}
	inOrder(t, out, id, "concluded", "partial", "coordinator, multiplier", st.CommID, testGoal, "conclusion:", "84")
	_, _, err = runCLI(t, newGoalsCmd(), "goals", "get", "g_nothing", "--nats-url", w.url)
	if err == nil || !strings.Contains(err.Error(), "g_nothing") {
		t.Fatalf("get unknown: %v", err)
	}
	_, _, err = runCLI(t, newGoalsCmd(), "goals", "cancel", "g_nothing", "--nats-url", w.url)
	if err == nil || err.Error() != "no goal g_nothing" {
		t.Fatalf("cancel unknown: %v", err)
	}
}

func TestHelpHasExamples(t *testing.T) {
	for _, cmd := range []*cobra.Command{newGoalCmd(), newWatchCmd(), newAgentsCmd(), newGoalsCmd()} {
		all := append([]*cobra.Command{cmd}, cmd.Commands()...)
		for _, c := range all {
			if c.Example == "" {
				t.Errorf("%s has no examples", c.CommandPath())
			}
			if c.Runnable() && c.Flags().Lookup("nats-url") == nil {
				t.Errorf("%s has no --nats-url", c.CommandPath())
			}
		}
	}
}

// Help examples use ids shaped like the runtime's and agents that the demo
// config (what ioa serve runs by default) has, so they can be run as shown.
func TestHelpExamplesLookReal(t *testing.T) {
	cfg, err := configs.LoadOver(nil, configs.DemoYAML)
	if err != nil {
		t.Fatal(err)
	}
	agents := map[string]bool{"coordinator": true}
	for _, a := range cfg.Agents {
		agents[a.Name] = true
	}
	oldID := regexp.MustCompile(`\b[gc]_[A-Za-z0-9]+\b`)
	idArg := regexp.MustCompile(`ioa (?:watch|goals (?:get|cancel|approve)) ([a-z][A-Za-z0-9_]+)`)
	nameArg := regexp.MustCompile(`(?:agents get|chat join|--launcher|--approve-by|--team) ([a-z][a-z0-9,-]+)`)
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		text := c.Long + "\n" + c.Example
		if m := oldID.FindString(text); m != "" {
			t.Errorf("%s: %q is not shaped like an id the runtime makes", c.CommandPath(), m)
		}
		for _, m := range idArg.FindAllStringSubmatch(text, -1) {
			if m[1] != "gt9p58vfnxyks" && m[1] != "c6tfqgo982m6y" {
				t.Errorf("%s: example id %q", c.CommandPath(), m[1])
			}
		}
		for _, m := range nameArg.FindAllStringSubmatch(text, -1) {
			for _, n := range strings.Split(m[1], ",") {
				if !agents[n] {
					t.Errorf("%s: %q names %q, which the demo config does not have", c.CommandPath(), m[0], n)
				}
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd())
}

// delegating always wants a sub-team for its tasks, so goals nest as deep
// as the budget allows.
type delegating struct{ *rules.Policy }

func (delegating) NeedsTeam(_ context.Context, q agentkit.TeamCheck) (string, error) {
	return q.Task.TaskDesc, nil
}

func TestFollowGoalIndentsSubTeams(t *testing.T) {
	w := newCLIWorld(t,
		orchestrator.Coordinator("coordinator", rules.New(rules.Config{})),
		agentkit.Agent{
			Card: protocol.AgentCard{Name: "planner", Description: "Plans trips and their budgets.",
				Capabilities: []string{"trip budget"}, NestedTeams: true},
			Worker: agentkit.WorkerFunc(func(context.Context, agentkit.Task) (agentkit.Result, error) {
				return agentkit.Result{Conclusion: "budget: 1200 EUR"}, nil
			}),
			Policy: delegating{rules.New(rules.Config{})},
		},
	)
	max1 := 1
	id := w.submit(t, protocol.GoalRequest{Goal: "Plan the trip budget.", Team: []string{"planner"}, MaxDepth: &max1})
	var out bytes.Buffer
	res, err := followGoal(t.Context(), w.b.Conn(), w.b.Subjects(), id, &out, renderOptions{Width: 120})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("nested:\n%s", out.String())
	if res.Status != protocol.GoalConcluded {
		t.Fatalf("result = %+v", res)
	}
	// The sub-goal's team and conclusion are indented under the task.
	inOrder(t, out.String(),
		"\n      ⇢ task t1 → planner",
		"\n  ↳ t1 (planner) teams up: sub-goal ",
		"\n    ● team: coordinator, planner",
		"\n          ⇢ task",
		"\n      ✓ ",
		"\n    ✔ sub-goal ", " concluded · 2 turns · ",
		"\n  ✓ t1 planner",
		"\n✔ concluded",
	)
}

func TestWatchAllFollowsEveryChat(t *testing.T) {
	w := newCLIWorld(t, testAgents()...)
	ctx, cancel := context.WithCancel(t.Context())
	var out stacktest.Buffer
	done := make(chan error, 1)
	go func() {
		c := &clientConn{nc: w.b.Conn(), subj: w.b.Subjects(), url: w.url}
		done <- watchAll(ctx, c, &out, renderOptions{Width: 120})
	}()
	// watchAll is ready once a message on a chat subject shows.
	probe := bus.Encode(protocol.AgentMessage{CommID: "cprobe", Sender: "probe", Type: protocol.MsgDiscussion})
	for !strings.Contains(out.String(), "[cprobe]") {
		if err := w.b.Conn().Publish(w.b.Subjects().Prefix()+".chat.cprobe", probe); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	id := w.submit(t, protocol.GoalRequest{Goal: testGoal, Team: []string{"multiplier", "distance-converter"}})
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "goal "+id+" concluded") {
		select {
		case err := <-done:
			t.Fatalf("watchAll returned early: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no end of goal %s in:\n%s", id, out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	t.Logf("watch all:\n%s", out.String())
	inOrder(t, out.String(), "] ", "#1 system", "] ", "✓", "conclusion", "✔ goal "+id+" concluded · ")
}

func TestLiveProgressLineIsRewrittenAndErased(t *testing.T) {
	var out bytes.Buffer
	subj, _ := bus.NewSubjects("ioa")
	r := newGoalRenderer(nil, subj, "g1", &out, renderOptions{Live: true, Width: 80})
	ev := func(e protocol.GoalEvent) []byte {
		e.GoalID = "g1"
		data, _ := json.Marshal(e)
		return data
	}
	r.handle(t.Context(), "ioa.goal.g1.events", ev(protocol.GoalEvent{Kind: protocol.EventTaskAssigned, At: time.Now(),
		Task: &protocol.Task{TaskID: "t1", Assignee: "multiplier", TaskAbstract: "Multiply"}}))
	r.drawProgress()
	r.drawProgress()
	if n := strings.Count(out.String(), "\r\033[K"); n < 2 || !strings.Contains(out.String(), "1 task running: t1 multiplier") {
		t.Fatalf("progress output: %q", out.String())
	}
	out.Reset()
	r.handle(t.Context(), "ioa.goal.g1.events", ev(protocol.GoalEvent{Kind: protocol.EventTaskDone, At: time.Now(),
		Task:    &protocol.Task{TaskID: "t1", Assignee: "multiplier"},
		Message: &protocol.AgentMessage{Type: protocol.MsgTaskResult, TaskStatus: protocol.TaskCompleted, TaskConclusion: "84"}}))
	if !strings.HasPrefix(out.String(), "\r\033[K") || !strings.Contains(out.String(), "✓ t1 multiplier") {
		t.Fatalf("the progress line is not erased before a line: %q", out.String())
	}
	out.Reset()
	r.drawProgress()
	if out.Len() != 0 {
		t.Fatalf("progress with nothing running: %q", out.String())
	}
}

// TestConfigCheckNamesUnknownBuiltins: a misspelt built-in worker passed
// `ioa config --check` and stopped `ioa serve` only once NATS was up.
func TestConfigCheckNamesUnknownBuiltins(t *testing.T) {
	f := filepath.Join(t.TempDir(), "ioa.yaml")
	body := "agents:\n  - name: calc\n    description: adds\n    worker: {kind: builtin, builtin: calculater}\n"
	if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	want := `agents[calc].worker.builtin: "calculater" is not a built-in worker (have calculator, files, report, textstats, units)`
	_, _, err := runCLI(t, newConfigCmd(), "config", "--check", "--config", f)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("config --check: err = %v\nwant it to say %s", err, want)
	}
	_, _, err = runCLI(t, newServeCmd(), "serve", "--config", f, "--data-dir", t.TempDir(), "--listen", "none", "--http", "none")
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("serve: err = %v\nwant it to say %s", err, want)
	}
	out, _, err := runCLI(t, newConfigCmd(), "config", "--check", "--config", "../../configs/demo.yaml")
	if err != nil || !strings.Contains(out, "configuration OK (7 agents)") {
		t.Fatalf("demo.yaml: %q, %v", out, err)
	}
}

// A word a group of commands does not know is an error naming the group's
// commands, whatever flags follow it; the group alone prints its help; and
// "show" is "get", as the groups' help says.
func TestUnknownSubcommand(t *testing.T) {
	run := func(args ...string) (string, error) {
		root := newRootCmd()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(args)
		err := root.ExecuteContext(t.Context())
		return out.String(), err
	}
	for _, args := range [][]string{{"goals", "frobnicate"}, {"goals", "frobnicate", "--data-dir", "x"}, {"agents", "frob"}, {"chat", "leave"}} {
		if _, err := run(args...); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("unknown command %q for \"ioa %s\" (its commands: ", args[1], args[0])) {
			t.Errorf("ioa %s: %v", strings.Join(args, " "), err)
		}
	}
	if out, err := run("goals"); err != nil || !strings.Contains(out, "Available Commands:") {
		t.Errorf("ioa goals: %v\n%s", err, out)
	}
	for _, group := range []string{"goals", "agents"} {
		if out, err := run(group, "show", "--help"); err != nil || !strings.Contains(out, "ioa "+group+" get") {
			t.Errorf("ioa %s show --help: %v\n%s", group, err, out)
		}
	}
}

// `ioa config --check` reports a bad value and a misspelt built-in worker
// in one run (it stopped at the first stage), and counts agents in words.
func TestConfigCheckReportsEverythingAtOnce(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	bad := write("bad.yaml", "limits: {max_turns: abc}\nagents:\n  - {name: calc, description: adds, worker: {kind: builtin, builtin: calculater}}\n")
	_, _, err := runCLI(t, newConfigCmd(), "config", "--check", "--config", bad)
	for _, want := range []string{`limits.max_turns: "abc" is not a whole number`, `agents[calc].worker.builtin: "calculater" is not a built-in worker`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("config --check: err = %v\nwant it to say %s", err, want)
		}
	}
	one := write("one.yaml", "agents:\n  - {name: calc, description: adds, worker: {kind: builtin, builtin: calculator}}\n")
	if out, _, err := runCLI(t, newConfigCmd(), "config", "--check", "--config", one); err != nil || out != "configuration OK (1 agent)\n" {
		t.Errorf("one agent: %q, %v", out, err)
	}
}

// Cancelling a goal that has ended says so; a search nobody matches well
// enough says no agent would be picked; a URL that is no NATS URL is named
// as such, not taken for a server that is down.
func TestCancelEndedSearchWeakAndBadURL(t *testing.T) {
	w := newCLIWorld(t, testAgents()...)
	id := w.submit(t, protocol.GoalRequest{Goal: "Multiply 6 x 7", Team: []string{"multiplier"}})
	if _, _, err := runCLI(t, newWatchCmd(), "watch", id, "--nats-url", w.url); err != nil {
		t.Fatal(err)
	}
	out, _, err := runCLI(t, newGoalsCmd(), "goals", "cancel", id, "--nats-url", w.url)
	if err != nil || out != "goal "+id+" had already ended (concluded): nothing to cancel\n" {
		t.Errorf("cancel an ended goal: %q, %v", out, err)
	}

	out, _, err = runCLI(t, newAgentsCmd(), "agents", "search", "fly to the moon", "--nats-url", w.url)
	if err != nil || !regexp.MustCompile(`no agent matches well enough to be picked \(best match 0\.\d{3} < 0\.26, registry\.min_match\)`).MatchString(out) {
		t.Errorf("weak search: %v\n%s", err, out)
	}
	out, _, _ = runCLI(t, newAgentsCmd(), "agents", "search", "multiply two numbers", "--nats-url", w.url)
	if strings.Contains(out, "well enough") {
		t.Errorf("a good match is noted as weak:\n%s", out)
	}

	_, _, err = runCLI(t, newGoalsCmd(), "goals", "ls", "--nats-url", "bogus://x")
	if err == nil || !strings.Contains(err.Error(), `"bogus://x" is not a NATS URL`) || strings.Contains(err.Error(), "ioa serve") {
		t.Errorf("bogus URL: %v", err)
	}
}

// ioa agent run warns before it takes over a name another process serves,
// and says nothing for a name nobody has.
func TestAgentRunWarnsOfNamesOnline(t *testing.T) {
	w := newCLIWorld(t, testAgents()...)
	dir := t.TempDir()
	run := func(names ...string) string {
		t.Helper()
		var yaml strings.Builder
		yaml.WriteString("agents:\n")
		for _, n := range names {
			fmt.Fprintf(&yaml, "  - name: %s\n    description: Multiplies numbers.\n    worker: {kind: builtin, builtin: calculator}\n", n)
		}
		f := filepath.Join(dir, names[0]+".yaml")
		if err := os.WriteFile(f, []byte(yaml.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		root := &cobra.Command{Use: "ioa", SilenceUsage: true, SilenceErrors: true}
		root.AddCommand(newAgentCmd())
		var out, errOut bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&errOut)
		root.SetArgs([]string{"agent", "run", "--config", f, "--nats-url", w.url})
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		if err := root.ExecuteContext(ctx); err != nil {
			t.Fatalf("agent run %v: %v\n%s", names, err, errOut.String())
		}
		if !strings.Contains(out.String(), "running") {
			t.Errorf("agent run %v printed %q", names, out.String())
		}
		return errOut.String()
	}
	if got := run("newcomer"); strings.Contains(got, "warning") {
		t.Errorf("a name nobody has: %q", got)
	}
	got := run("multiplier", "newcomer2")
	if !strings.Contains(got, "warning: multiplier is already online, served by another process") || strings.Contains(got, "newcomer2") {
		t.Errorf("a name online: %q", got)
	}
}
