package mcp_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ioa-nats/ioa/agentkit/llm"
	"github.com/ioa-nats/ioa/agentkit/llm/llmtest"
	"github.com/ioa-nats/ioa/internal/fuzzworker"
	"github.com/ioa-nats/ioa/interop/mcp"
)

func tool(name, desc string, required []string, props map[string]any) *sdk.Tool {
	return &sdk.Tool{Name: name, Description: desc, InputSchema: map[string]any{"type": "object", "properties": props, "required": required}}
}

var str = map[string]any{"type": "string"}

// Tools shaped like the filesystem server's.
var fsTools = []*sdk.Tool{
	tool("read_file", "Read the complete contents of a file as text. DEPRECATED: Use read_text_file instead.", []string{"path"}, map[string]any{"path": str}),
	tool("read_text_file", "Read the complete contents of a file from the file system as text.", []string{"path"}, map[string]any{"path": str, "head": map[string]any{"type": "number"}}),
	tool("read_media_file", "Read an image or audio file.", []string{"path"}, map[string]any{"path": str}),
	tool("write_file", "Create a new file or completely overwrite an existing file with new content.", []string{"path", "content"}, map[string]any{"path": str, "content": str}),
	tool("list_directory", "Get a detailed listing of all files and directories in a specified path.", []string{"path"}, map[string]any{"path": str}),
	tool("move_file", "Move or rename files and directories.", []string{"source", "destination"}, map[string]any{"source": str, "destination": str}),
	tool("search_files", "Recursively search for files and directories matching a pattern.", []string{"path", "pattern"}, map[string]any{"path": str, "pattern": str}),
	tool("fetch", "Fetch a URL from the internet.", []string{"url"}, map[string]any{"url": str, "max_length": map[string]any{"type": "integer"}}),
}

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		task, tool string
		args       map[string]any
	}{
		{"Read the text file /srv/notes.txt.", "read_text_file", map[string]any{"path": "/srv/notes.txt"}},
		{"List the directory /srv/data", "list_directory", map[string]any{"path": "/srv/data"}},
		{"Fetch https://example.com/a.html and summarise it", "fetch", map[string]any{"url": "https://example.com/a.html"}},
		{`{"tool": "move_file", "arguments": {"source": "a", "destination": "b"}}`, "move_file", map[string]any{"source": "a", "destination": "b"}},
	} {
		call, err := mcp.Match{}.Choose(t.Context(), task(c.task), fsTools)
		if err != nil || call.Tool != c.tool || len(call.Arguments) != len(c.args) {
			t.Errorf("%q: %+v %v, want %s %v", c.task, call, err, c.tool, c.args)
			continue
		}
		for k, v := range c.args {
			if call.Arguments[k] != v {
				t.Errorf("%q: %s = %v, want %v", c.task, k, call.Arguments[k], v)
			}
		}
	}
	// Nothing to fill the required path with, and no tool named: no call.
	if call, err := (mcp.Match{}).Choose(t.Context(), task("Tell me a joke"), fsTools[:5]); !errors.Is(err, mcp.ErrNoTool) {
		t.Errorf("a task for no tool: %+v %v", call, err)
	}
}

func TestModelChoosesTheCall(t *testing.T) {
	var tools []string
	fake := llmtest.New(t, func(r llmtest.Request) llmtest.Response {
		tools = r.Tools
		switch {
		case strings.Contains(r.Text(), "loud"):
			return llmtest.Call("echo", map[string]any{"text": "chosen by the model"})
		case strings.Contains(r.Text(), "invent"):
			return llmtest.Call("teleport", map[string]any{})
		case strings.Contains(r.Text(), "mangle"):
			return llmtest.Response{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "echo", Arguments: "{not json"}}}
		}
		return llmtest.Text("I would rather chat.")
	})
	model, err := llm.NewModel(llm.Config{BaseURL: fake.URL, Model: "fake", Retries: -1})
	if err != nil {
		t.Fatal(err)
	}
	chooser := &mcp.Model{Model: model, Agent: "tools"}
	w, err := mcp.Dial(t.Context(), mcp.Config{URL: toolServer(t), Chooser: chooser})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	res, err := w.Run(t.Context(), task("Say it loud"))
	if err != nil || res.Conclusion != "CHOSEN BY THE MODEL" {
		t.Fatalf("%q %v", res.Conclusion, err)
	}
	if !slices.Equal(tools, []string{"block", "echo", "fail"}) {
		t.Errorf("the model was offered %v", tools)
	}
	if u := chooser.TakeUsage("tools", "g1"); u.LLMCalls != 1 || u.PromptTokens == 0 {
		t.Errorf("usage %+v", u)
	}
	for desc, want := range map[string]string{
		"invent a tool":   `no tool "teleport"`,
		"mangle the args": "not a JSON object",
		"just talk to me": "called no tool",
	} {
		if _, err := w.Run(t.Context(), task(desc)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", desc, err, want)
		}
	}
}

// Whatever a task says, the rules chooser answers a call of a listed tool
// or an error, and never panics.
func FuzzMatch(f *testing.F) {
	fuzzworker.Capture(f)
	for _, s := range []string{"Read the text file /srv/notes.txt.", `{"tool":"move_file","arguments":{"source":1}}`, "{", "fetch http://", "List ~/ and ../x and a.b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		call, err := mcp.Match{}.Choose(t.Context(), task(text), fsTools)
		if err == nil && call.Arguments == nil {
			t.Fatalf("%q: a call without arguments: %+v", text, call)
		}
	})
}
