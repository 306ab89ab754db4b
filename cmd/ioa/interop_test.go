package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/bus/auth"
	"github.com/ioa-nats/ioa/configs"
	"github.com/ioa-nats/ioa/internal/nodetest"
	"github.com/ioa-nats/ioa/internal/stacktest"
)

// interopYAML is a serve configuration whose members speak MCP and A2A.
const interopYAML = `
a2a:
  listen: 127.0.0.1:0
agents:
  - name: files
    worker:
      kind: mcp
      command: [%q, %q]
      tools: [read_text_file]
  - name: shouter
    worker: {kind: a2a, url: %q}
  - name: report-writer
    description: Writes a Markdown report that gathers the results of the team's earlier tasks.
    capabilities: [write a report]
    worker: {kind: builtin, builtin: report}
`

// The stack of "ioa serve" with mcp and a2a workers from the config and
// the A2A front door: a team of the three kinds concludes a goal; an A2A
// client of the official JavaScript SDK submits a goal through the front
// door (with the token from the data dir); a caller without it is refused.
func TestServeWithInteropWorkersAndFrontDoor(t *testing.T) {
	node, dir := nodetest.Require(t)
	port := nodetest.Start(t, node, dir, "a2a-agent.mjs")
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "notes.txt"), []byte("The pass phrase is tangerine-42.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "ioa.yaml")
	yaml := fmt.Sprintf(interopYAML, filepath.Join(dir, "node_modules/.bin/mcp-server-filesystem"), root, fmt.Sprintf("http://127.0.0.1:%d", port))
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("IOA_CONFIG", file)
	cfg, err := configs.Load(nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Bus.DataDir, cfg.Bus.Listen = t.TempDir(), "127.0.0.1:0" // secure: credentials and a token
	st, err := startStack(t.Context(), cfg, stackOptions{services: true, http: true}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer st.shutdown()
	if err := st.waitReady(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	var info protocol.AgentInfo
	if err := bus.Request(t.Context(), st.bus.Conn(), st.bus.Subjects().Registry(bus.RegistryGet), protocol.NameRequest{Name: "shouter"}, &info); err != nil || info.Metadata["a2a_agent"] != "shouter" || len(info.Capabilities) == 0 {
		t.Fatalf("shouter's card in the registry: %+v %v", info, err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var res protocol.GoalResult
	err = bus.Request(ctx, st.bus.Conn(), st.bus.Subjects().Goal(bus.GoalSubmit), protocol.GoalRequest{
		Goal: "Read the text file " + filepath.Join(root, "notes.txt") + ". Then shout it in capital letters. Then write a Markdown report of the results.",
		Team: []string{"files", "shouter", "report-writer"}, Wait: true,
	}, &res)
	if err != nil || res.Status != protocol.GoalConcluded || !strings.Contains(res.Conclusion, "THE PASS PHRASE IS TANGERINE-42") {
		t.Fatalf("goal: %v %s (%s):\n%s", err, res.Status, res.Reason, res.Conclusion)
	}

	// The front door: its token is in the data dir.
	f := st.http
	tokenData, err := os.ReadFile(a2aTokenFile(cfg.Bus.DataDir))
	if err != nil || f == nil || f.tokenFile != a2aTokenFile(cfg.Bus.DataDir) {
		t.Fatalf("token file: %v", err)
	}
	if fi, err := os.Stat(f.tokenFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("token file mode: %v %v", fi.Mode(), err)
	}
	token := strings.TrimSpace(string(tokenData))
	resp, err := http.Get(f.base + "/agents/shouter/.well-known/agent-card.json")
	if err != nil {
		t.Fatal(err)
	}
	var card struct {
		Name            string         `json:"name"`
		URL             string         `json:"url"`
		SecuritySchemes map[string]any `json:"securitySchemes"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&card)
	resp.Body.Close()
	if card.Name != "shouter" || card.URL != f.base+"/agents/shouter/a2a" || card.SecuritySchemes["bearer"] == nil {
		t.Errorf("shouter's A2A card: %+v", card)
	}
	out, err := exec.CommandContext(ctx, node, filepath.Join(dir, "a2a-client.mjs"), f.base, token, "Read the text file "+filepath.Join(root, "notes.txt")+".").Output()
	if err != nil || !strings.Contains(string(out), `"state":"TASK_STATE_COMPLETED"`) || !strings.Contains(string(out), "tangerine-42") {
		t.Fatalf("A2A client: %v\n%s", err, out)
	}
	out, _ = exec.CommandContext(ctx, node, filepath.Join(dir, "a2a-client.mjs"), f.base, "wrong-token-0123456789", "Read it.").Output()
	if !strings.Contains(string(out), `"error"`) {
		t.Errorf("a wrong token was accepted: %s", out)
	}
	// Goals from A2A are the a2a client identity's.
	var list protocol.GoalListReply
	if err := bus.Request(ctx, st.bus.Conn(), st.bus.Subjects().Goal(bus.GoalList), protocol.GoalListRequest{}, &list); err != nil || len(list.Goals) != 2 || list.Goals[0].Submitter != "a2a" || list.Goals[1].Submitter != "" {
		t.Errorf("goals: %+v %v", list.Goals, err)
	}
}

// runMCP runs `ioa mcp` with its stdin and stdout connected to a go-sdk
// client, and returns the client's session.
func runMCP(t *testing.T, args ...string) *sdk.ClientSession {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	root := &cobra.Command{Use: "ioa", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(newMCPCmd())
	root.SetIn(inR)
	root.SetOut(outW)
	var stderr bytes.Buffer
	root.SetErr(&stderr)
	root.SetArgs(append([]string{"mcp"}, args...))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- root.ExecuteContext(ctx)
		_ = outW.Close()
	}()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "ide", Version: "1"}, nil).Connect(t.Context(), &sdk.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		cancel()
		t.Fatalf("connect: %v (%v)", err, <-done)
	}
	t.Cleanup(func() {
		_ = cs.Close()
		_ = inW.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ioa mcp: %v", err)
		}
	})
	return cs
}

// `ioa mcp` over stdio, driven by the go-sdk's client, with client
// credentials: the goal is submitted as that client and its result comes
// back.
func TestMCPCommand(t *testing.T) {
	w := newSecureCLIWorld(t)
	creds := w.creds(t, "ide", auth.Client)
	cs := runMCP(t, "--nats-url", w.url, "--creds", creds)
	r, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "submit_goal", Arguments: map[string]any{"goal": "Multiply 12 x 7."}})
	if err != nil {
		t.Fatal(err)
	}
	text := r.Content[0].(*sdk.TextContent).Text
	if r.IsError || !strings.Contains(text, "84") || !strings.Contains(text, "concluded") {
		t.Fatalf("submit_goal: %v %s", r.IsError, text)
	}
	goalID := strings.Fields(text)[1]
	r, err = cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "goal_status", Arguments: map[string]any{"goal_id": goalID}})
	if err != nil || r.IsError || !strings.Contains(string(mustJSON(r.StructuredContent)), `"submitter":"ide"`) {
		t.Fatalf("goal_status %s: %v %s", goalID, err, mustJSON(r.StructuredContent))
	}
	r, err = cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "search_agents", Arguments: map[string]any{"query": "multiply numbers"}})
	if err != nil || r.IsError || !strings.Contains(string(mustJSON(r.StructuredContent)), `"multiplier"`) {
		t.Fatalf("search_agents: %v %s", err, mustJSON(r.StructuredContent))
	}

	// An observer may not submit: ioa mcp says so and stops.
	root := &cobra.Command{Use: "ioa", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(newMCPCmd())
	root.SetIn(strings.NewReader(""))
	root.SetOut(io.Discard)
	root.SetArgs([]string{"mcp", "--nats-url", w.url, "--creds", w.creds(t, "watcher", auth.Observer)})
	if err := root.ExecuteContext(t.Context()); err == nil || !strings.Contains(err.Error(), "cannot submit goals") {
		t.Errorf("observer: %v", err)
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

type secureWorld struct {
	s   *stacktest.Stack
	url string
}

// newSecureCLIWorld is a secure runtime (credentials required) with the
// test agents.
func newSecureCLIWorld(t *testing.T) *secureWorld {
	t.Helper()
	s := stacktest.Start(t, stacktest.Options{Secure: true})
	s.RunAgents(t, nil, testAgents()...)
	return &secureWorld{s: s, url: s.URL}
}

func (w *secureWorld) creds(t *testing.T, name string, role auth.Role) string {
	return w.s.Creds(t, name, role)
}

// `ioa goal` as a client (it may not follow the chat, so it waits for the
// result) sends a key: the same key run twice is one goal, and its result.
func TestGoalCommandAsAClientWithAKey(t *testing.T) {
	w := newSecureCLIWorld(t)
	creds := w.creds(t, "nightly", auth.Client)
	var ids []string
	for range 2 {
		out, _, err := runCLI(t, newGoalCmd(), "goal", "Multiply 12 x 7.", "--json", "--idempotency-key", "nightly-7", "--nats-url", w.url, "--creds", creds)
		if err != nil {
			t.Fatal(err)
		}
		var res protocol.GoalResult
		if err := json.Unmarshal([]byte(out), &res); err != nil || res.Status != protocol.GoalConcluded || !strings.Contains(res.Conclusion, "84") {
			t.Fatalf("result %+v (%v)", res, err)
		}
		ids = append(ids, res.GoalID)
	}
	if ids[1] != ids[0] {
		t.Fatalf("the same key run twice made goals %v, want one", ids)
	}
}

// What credentials may not do is said at once, in the server's words, not
// after a timeout: an observer neither submits nor cancels goals.
func TestObserverIsToldWhatItMayNotDo(t *testing.T) {
	w := newSecureCLIWorld(t)
	creds := w.creds(t, "watcher", auth.Observer)
	_, _, err := runCLI(t, newGoalCmd(), "goal", "Multiply 12 x 7.", "--nats-url", w.url, "--creds", creds)
	if err == nil || !strings.Contains(err.Error(), "may watch goals but not submit them") {
		t.Fatalf("observer submitting: %v", err)
	}
	_, _, err = runCLI(t, newGoalsCmd(), "goals", "cancel", "gabcdefabcdef", "--nats-url", w.url, "--creds", creds)
	if err == nil || !strings.Contains(err.Error(), "the server refused watcher (observer) to send on") || !strings.Contains(err.Error(), "Permissions Violation") {
		t.Fatalf("observer cancelling: %v, want the server's refusal", err)
	}
}

// `ioa mcp` fed a line that is not JSON answers it with a parse error and
// carries on: the replies to the requests before and after it are written,
// a goal's result too, and the input's end ends the command without error.
func TestMCPCommandOutlivesABadLine(t *testing.T) {
	w := newSecureCLIWorld(t)
	creds := w.creds(t, "ide", auth.Client)
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"pipe","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"submit_goal","arguments":{"goal":"Multiply 12 x 7."}}}`,
		`not json`,
		`{"jsonrpc":"2.0","id":3,"method":"ping"}`,
	}, "\n") + "\n"
	root := &cobra.Command{Use: "ioa", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(newMCPCmd())
	root.SetIn(strings.NewReader(in))
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(io.Discard)
	root.SetArgs([]string{"mcp", "--nats-url", w.url, "--creds", creds})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := root.ExecuteContext(ctx); err != nil {
		t.Fatalf("ioa mcp: %v\n%s", err, out.String())
	}
	replies := map[string]string{}
	for l := range strings.Lines(out.String()) {
		var r struct {
			ID json.RawMessage `json:"id"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("output line %q: %v", l, err)
		}
		replies[string(r.ID)] = l
	}
	if r := replies["null"]; !strings.Contains(r, `"code":-32700`) || !strings.Contains(r, "line 4 is not valid JSON") {
		t.Errorf("the bad line's reply: %q", r)
	}
	if !strings.Contains(replies["1"], `"result"`) || !strings.Contains(replies["2"], "84") || !strings.Contains(replies["3"], `"result"`) {
		t.Errorf("replies:\n%s", out.String())
	}
}

// A client's credentials may not read the runtime's streams: ioa watch
// says so at once, for its own goal and for everything, rather than
// timing out or showing nothing; an observer's watch the same goal.
func TestWatchNeedsCredentialsThatReadTheStreams(t *testing.T) {
	w := newSecureCLIWorld(t)
	creds := w.creds(t, "ci", auth.Client)
	out, _, err := runCLI(t, newGoalCmd(), "goal", "Multiply 12 x 7.", "--json", "--nats-url", w.url, "--creds", creds)
	var res protocol.GoalResult
	if err != nil || json.Unmarshal([]byte(out), &res) != nil {
		t.Fatalf("goal: %v\n%s", err, out)
	}
	for _, args := range [][]string{{"watch", res.GoalID}, {"watch"}} {
		start := time.Now()
		out, _, err := runCLI(t, newWatchCmd(), append(args, "--nats-url", w.url, "--creds", creds)...)
		if err == nil || !strings.Contains(err.Error(), "the credentials are ci's, a client: watching needs admin or observer credentials") || out != "" {
			t.Errorf("ioa %s as a client: %v\n%s", strings.Join(args, " "), err, out)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("ioa %s as a client took %v to refuse", strings.Join(args, " "), d)
		}
	}
	out, _, err = runCLI(t, newWatchCmd(), "watch", res.GoalID, "--nats-url", w.url, "--creds", w.creds(t, "obs", auth.Observer))
	if err != nil || !strings.Contains(out, "84") {
		t.Fatalf("watch as an observer: %v\n%s", err, out)
	}
}
