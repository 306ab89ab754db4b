package mcp_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/agentkit/rules"
	"github.com/ioa-nats/ioa/internal/nodetest"
	"github.com/ioa-nats/ioa/internal/stacktest"
	"github.com/ioa-nats/ioa/interop/mcp"
)

type echoArgs struct {
	Text string `json:"text" jsonschema:"what to echo"`
}

type failArgs struct {
	Why string `json:"why,omitempty"`
}

// toolServer is an MCP server made with the go-sdk, served over
// streamable HTTP: echo, fail (a tool error), panic (a handler that
// panics) and block (until its call is cancelled).
func toolServer(t *testing.T) string {
	t.Helper()
	s := sdk.NewServer(&sdk.Implementation{Name: "tools", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "echo", Description: "Echo a text back in upper case. Nothing else."},
		func(_ context.Context, _ *sdk.CallToolRequest, a echoArgs) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: strings.ToUpper(a.Text)}}}, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "fail", Description: "Always fails."},
		func(context.Context, *sdk.CallToolRequest, failArgs) (*sdk.CallToolResult, any, error) {
			return nil, nil, errors.New("disk on fire")
		})
	sdk.AddTool(s, &sdk.Tool{Name: "block", Description: "Never returns."},
		func(ctx context.Context, _ *sdk.CallToolRequest, _ failArgs) (*sdk.CallToolResult, any, error) {
			<-ctx.Done()
			return nil, nil, ctx.Err()
		})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

func task(desc string) agentkit.Task {
	return agentkit.Task{Task: protocol.Task{TaskID: "t1", TaskDesc: desc}, GoalID: "g1", CommID: "c1", Goal: desc}
}

func TestWorkerCallsTools(t *testing.T) {
	url := toolServer(t)
	w, err := mcp.Dial(t.Context(), mcp.Config{URL: url, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	caps := w.Capabilities()
	if len(caps) != 3 || !slices.Contains(caps, "echo: Echo a text back in upper case.") {
		t.Errorf("capabilities %q", caps)
	}

	res, err := w.Run(t.Context(), task("Echo quiet words"))
	if err != nil || res.Conclusion != "ECHO QUIET WORDS" {
		t.Errorf("echo by name: %q, %v", res.Conclusion, err)
	}
	res, err = w.Run(t.Context(), task(`{"tool":"echo","arguments":{"text":"exact"}}`))
	if err != nil || res.Conclusion != "EXACT" {
		t.Errorf("explicit call: %q, %v", res.Conclusion, err)
	}

	_, err = w.Run(t.Context(), task(`{"tool":"fail","arguments":{}}`))
	if !errors.Is(err, mcp.ErrToolFailed) || !strings.Contains(err.Error(), "disk on fire") {
		t.Errorf("tool error: %v", err)
	}
	_, err = w.Run(t.Context(), task(`{"tool":"nope","arguments":{}}`))
	if !errors.Is(err, mcp.ErrNoTool) || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("unknown tool: %v", err)
	}
	_, err = w.Run(t.Context(), task(`{"tool":"echo","arguments":{"text":42}}`))
	if err == nil || !strings.Contains(err.Error(), "echo") {
		t.Errorf("arguments that break the schema: %v", err)
	}
	_, err = w.Run(t.Context(), task(`{"tool":"block","arguments":{}}`))
	if !errors.Is(err, mcp.ErrTimeout) {
		t.Errorf("blocking tool: %v", err)
	}
	// The session survives all of that.
	res, err = w.Run(t.Context(), task("echo still alive"))
	if err != nil || res.Conclusion != "ECHO STILL ALIVE" {
		t.Errorf("after errors: %q, %v", res.Conclusion, err)
	}
}

func TestWorkerOnlyConfiguredTools(t *testing.T) {
	url := toolServer(t)
	w, err := mcp.Dial(t.Context(), mcp.Config{URL: url, Tools: []string{"echo"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	if n := len(w.Tools()); n != 1 {
		t.Errorf("%d tools, want only echo", n)
	}
	_, err = w.Run(t.Context(), task(`{"tool":"fail","arguments":{}}`))
	if !errors.Is(err, mcp.ErrNoTool) {
		t.Errorf("a tool left out by the config: %v", err)
	}
	if _, err := mcp.Dial(t.Context(), mcp.Config{URL: url, Tools: []string{"missing"}}); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("no configured tool offered: %v", err)
	}
}

func TestDialErrors(t *testing.T) {
	cases := map[string]mcp.Config{
		"set exactly one":     {},
		"connect":             {Command: []string{filepath.Join(t.TempDir(), "no-such-server")}},
		"list tools|connect":  {Command: []string{"sh", "-c", "echo not-json; exit 0"}},
		"connect|list tools ": {URL: "http://127.0.0.1:1/mcp"},
	}
	for want, cfg := range cases {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		_, err := mcp.Dial(ctx, cfg)
		cancel()
		ok := false
		for _, w := range strings.Split(want, "|") {
			if err != nil && strings.Contains(err.Error(), strings.TrimSpace(w)) {
				ok = true
			}
		}
		if !ok {
			t.Errorf("%+v: got %v, want an error with %q", cfg, err, want)
		}
	}
}

// The filesystem server from npm (@modelcontextprotocol/server-filesystem,
// nobody here wrote it) over stdio joins a team and reads a file for a goal.
func TestFilesystemServerFromNPMReadsAFileForAGoal(t *testing.T) {
	node, dir := nodetest.Require(t)
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "notes.txt"), []byte("The pass phrase is tangerine-42.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := mcp.Dial(t.Context(), mcp.Config{
		Command: []string{node, filepath.Join(dir, "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"), root},
		Timeout: 30 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	found := false
	for _, c := range w.Capabilities() {
		found = found || strings.HasPrefix(c, "read text file: ")
	}
	if !found {
		t.Fatalf("capabilities %q lack read_text_file", w.Capabilities())
	}

	s := stacktest.Start(t, stacktest.Options{Coordinator: true})
	s.RunAgents(t, nil, agentkit.Agent{
		Card:   protocol.AgentCard{Name: "files", Description: w.Description(), Capabilities: w.Capabilities(), Type: protocol.TypeTool},
		Worker: w, Policy: rules.New(rules.Config{}),
	})
	path := filepath.Join(root, "notes.txt")
	res := s.Submit(t, protocol.GoalRequest{Goal: "Read the text file " + path + "."})
	if res.Status != protocol.GoalConcluded || !strings.Contains(res.Conclusion, "tangerine-42") {
		t.Fatalf("goal %s (%s):\n%s", res.Status, res.Reason, res.Conclusion)
	}
	// Outside the server's allowed directory: the server's own error
	// comes back as the failed task's reason.
	res = s.Submit(t, protocol.GoalRequest{Goal: "Read the text file /etc/hostname.", Team: []string{"files"}})
	if !strings.Contains(res.Conclusion, "failed") || !strings.Contains(strings.ToLower(res.Conclusion), "denied") {
		t.Fatalf("a path outside the root: %s (%s):\n%s", res.Status, res.Reason, res.Conclusion)
	}
}
