package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ioa-nats/ioa/interop/mcp"
)

const initLine = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"pipe","version":"1"}}}`

// slowServer has one tool, slow, that answers after a while.
func slowServer() *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "slow", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "slow", Description: "Answers late."},
		func(ctx context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
			select {
			case <-time.After(300 * time.Millisecond):
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "done"}}}, nil, nil
		})
	return s
}

type reply struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// pipeLines runs srv on LineTransport over the given input lines to their
// end and returns the replies by id (the id's JSON; "null" gathers those
// without one).
func pipeLines(t *testing.T, srv *sdk.Server, maxLine int, lines ...string) map[string][]reply {
	t.Helper()
	var out bytes.Buffer
	tr := &mcp.LineTransport{Reader: strings.NewReader(strings.Join(lines, "\n") + "\n"), Writer: &out, MaxLineLength: maxLine}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := srv.Run(ctx, tr); err != nil {
		t.Fatalf("run: %v\noutput:\n%s", err, out.String())
	}
	got := map[string][]reply{}
	for l := range strings.Lines(out.String()) {
		var r reply
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("output line %q: %v", l, err)
		}
		got[string(r.ID)] = append(got[string(r.ID)], r)
	}
	return got
}

// Lines that are not JSON, not JSON-RPC or batches get error replies and
// the session carries on; at the end of the input every reply due, even a
// slow one, is written before Run returns.
func TestLineTransportOutlivesBadLines(t *testing.T) {
	got := pipeLines(t, slowServer(), 0,
		initLine,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow","arguments":{}}}`,
		`not json`,
		``,
		`{"id":"x7","hello":1}`,
		`[{"jsonrpc":"2.0","id":9,"method":"ping"}]`,
		`{"jsonrpc":"2.0","id":3,"method":"ping"}`,
	)
	nulls := got["null"]
	if len(nulls) != 2 || nulls[0].Error == nil || nulls[0].Error.Code != -32700 || !strings.Contains(nulls[0].Error.Message, "line 4 is not valid JSON") ||
		nulls[1].Error == nil || nulls[1].Error.Code != -32600 || !strings.Contains(nulls[1].Error.Message, "batch") {
		t.Errorf("replies with id null: %+v", nulls)
	}
	if r := got[`"x7"`]; len(r) != 1 || r[0].Error == nil || r[0].Error.Code != -32600 || !strings.Contains(r[0].Error.Message, "not a JSON-RPC 2.0 message") {
		t.Errorf("a JSON line that is no message: %+v", r)
	}
	for _, id := range []string{"1", "2", "3"} {
		if r := got[id]; len(r) != 1 || r[0].Error != nil || len(r[0].Result) == 0 {
			t.Errorf("reply %s: %+v", id, r)
		}
	}
	if r := got["2"]; len(r) == 1 && !strings.Contains(string(r[0].Result), `"done"`) {
		t.Errorf("the slow tool's reply: %s", r[0].Result)
	}
}

// A line over the limit is refused and the next one is read.
func TestLineTransportRefusesLongLines(t *testing.T) {
	got := pipeLines(t, slowServer(), len(initLine)+1,
		initLine,
		`{"jsonrpc":"2.0","id":2,"method":"ping","params":{"pad":"`+strings.Repeat("x", 2*len(initLine))+`"}}`,
		`{"jsonrpc":"2.0","id":3,"method":"ping"}`,
	)
	if r := got["null"]; len(r) != 1 || r[0].Error == nil || !strings.Contains(r[0].Error.Message, "line 2 is longer than") {
		t.Errorf("the long line: %+v", r)
	}
	if len(got["1"]) != 1 || len(got["3"]) != 1 || len(got["2"]) != 0 {
		t.Errorf("replies: %+v", got)
	}
}
