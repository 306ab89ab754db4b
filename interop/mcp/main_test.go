package mcp_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ioa-nats/ioa/interop/mcp"
)

// The test binary doubles as a stdio MCP server (made with the go-sdk)
// when IOA_MCP_HELPER is set: tools echo and die (the process exits in
// the middle of the call).
func TestMain(m *testing.M) {
	if os.Getenv("IOA_MCP_HELPER") != "" {
		s := sdk.NewServer(&sdk.Implementation{Name: "helper", Version: "1"}, nil)
		sdk.AddTool(s, &sdk.Tool{Name: "echo", Description: "Echo a text back in upper case."},
			func(_ context.Context, _ *sdk.CallToolRequest, a echoArgs) (*sdk.CallToolResult, any, error) {
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: strings.ToUpper(a.Text)}}}, nil, nil
			})
		sdk.AddTool(s, &sdk.Tool{Name: "die", Description: "Crash the server."},
			func(context.Context, *sdk.CallToolRequest, failArgs) (*sdk.CallToolResult, any, error) {
				os.Exit(3)
				return nil, nil, nil
			})
		_ = s.Run(context.Background(), &sdk.StdioTransport{})
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// A stdio server that dies fails the task in progress; the next task gets
// a new server.
func TestWorkerRestartsADeadStdioServer(t *testing.T) {
	w, err := mcp.Dial(t.Context(), mcp.Config{Command: []string{os.Args[0]}, Env: append(os.Environ(), "IOA_MCP_HELPER=1")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	if res, err := w.Run(t.Context(), task("echo first")); err != nil || res.Conclusion != "ECHO FIRST" {
		t.Fatalf("first: %q %v", res.Conclusion, err)
	}
	_, err = w.Run(t.Context(), task(`{"tool":"die","arguments":{}}`))
	if err == nil || !strings.Contains(err.Error(), "die") {
		t.Fatalf("a dying server: %v", err)
	}
	if errors.Is(err, mcp.ErrToolFailed) {
		t.Errorf("a crash is not a tool's own error: %v", err)
	}
	res, err := w.Run(t.Context(), task("echo again"))
	if err != nil || res.Conclusion != "ECHO AGAIN" {
		t.Fatalf("after the crash: %q %v", res.Conclusion, err)
	}
}
