package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	iotext "github.com/ioa-nats/ioa/interop/internal/text"
	"regexp"
	"slices"
	"strconv"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tmc/langchaingo/llms"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/llm"
	"github.com/ioa-nats/ioa/agentkit/protocol"
)

// Call is one tool call.
type Call struct {
	Tool      string         `json:"tool"`
	Arguments map[string]any `json:"arguments"`
}

// Chooser turns a task into a tool call.
type Chooser interface {
	Choose(ctx context.Context, t agentkit.Task, tools []*sdk.Tool) (Call, error)
}

// schema is the part of a tool's JSON Schema the choosers read.
type schema struct {
	Type       any                `json:"type"`
	Properties map[string]*schema `json:"properties"`
	Required   []string           `json:"required"`
	Items      *schema            `json:"items"`
	Enum       []any              `json:"enum"`
}

func inputSchema(t *sdk.Tool) schema {
	var s schema
	if b, err := json.Marshal(t.InputSchema); err == nil {
		_ = json.Unmarshal(b, &s)
	}
	return s
}

func (s *schema) typ() string {
	if s == nil {
		return ""
	}
	switch v := s.Type.(type) {
	case string:
		return v
	case []any:
		for _, x := range v {
			if str, ok := x.(string); ok && str != "null" {
				return str
			}
		}
	}
	return ""
}

// Match is the rules chooser: no model. A task whose text holds a JSON
// object {"tool": NAME, "arguments": {...}} gets exactly that call.
// Otherwise the tool is the one whose name's words the task's text
// contains best (then its description's), among the tools whose required
// arguments can be filled from the text: a path-like token for arguments
// named like a path or file (path, file, filename, source, directory, …),
// a URL for url or uri, a number for number and integer arguments, and
// the task's text itself for other strings.
type Match struct{}

var (
	jsonObjRE = regexp.MustCompile(`(?s)\{.*\}`)
	wordRE    = regexp.MustCompile(`[\p{L}\p{N}]+`)
	urlRE     = regexp.MustCompile(`[a-zA-Z][a-zA-Z0-9+.-]*://[^\s"'<>]+`)
	pathRE    = regexp.MustCompile(`(?:~|\.{1,2})?/[^\s"'<>]*[^\s"'<>.,;:!?)]|\b[\w.-]+\.[A-Za-z0-9]{1,8}\b`)
	numberRE  = regexp.MustCompile(`-?\d+(?:\.\d+)?`)
)

// Choose picks the call for t.
func (Match) Choose(_ context.Context, t agentkit.Task, tools []*sdk.Tool) (Call, error) {
	text := taskText(t)
	if m := jsonObjRE.FindString(text); m != "" {
		var c Call
		if json.Unmarshal([]byte(m), &c) == nil && c.Tool != "" {
			if c.Arguments == nil {
				c.Arguments = map[string]any{}
			}
			return c, nil
		}
	}
	words := wordSet(text)
	type cand struct {
		call  Call
		score float64
		order int
	}
	var cands []cand
	var reasons []string
	for i, tool := range tools {
		args, err := fill(inputSchema(tool), text)
		if err != nil {
			reasons = append(reasons, tool.Name+": "+err.Error())
			continue
		}
		cands = append(cands, cand{Call{tool.Name, args}, score(tool, words, text), i})
	}
	if len(cands) == 0 {
		return Call{}, fmt.Errorf("%w %q: %s", ErrNoTool, clip(text, 120), strings.Join(reasons, "; "))
	}
	best := slices.MaxFunc(cands, func(a, b cand) int {
		if a.score != b.score {
			if a.score < b.score {
				return -1
			}
			return 1
		}
		return b.order - a.order // earlier in the list wins
	})
	if best.score == 0 && len(cands) > 1 {
		return Call{}, fmt.Errorf("%w %q: it names none of the tools (%s)", ErrNoTool, clip(text, 120), toolNames(tools))
	}
	return best.call, nil
}

func taskText(t agentkit.Task) string {
	text := strings.TrimSpace(t.TaskDesc)
	if text == "" {
		text = strings.TrimSpace(t.TaskAbstract)
	}
	return text
}

// score is the share of the tool name's words found in the text (the
// main signal), plus a little for its description's words.
func score(tool *sdk.Tool, words map[string]bool, text string) float64 {
	name := wordRE.FindAllString(strings.ToLower(strings.ReplaceAll(tool.Name, "_", " ")), -1)
	var hit float64
	for _, w := range name {
		if words[stem(w)] {
			hit++
		}
	}
	s := 0.0
	if len(name) > 0 {
		s = hit / float64(len(name))
	}
	if strings.Contains(strings.ToLower(text), strings.ToLower(tool.Name)) {
		s += 1
	}
	desc := wordRE.FindAllString(strings.ToLower(iotext.FirstSentence(tool.Description)), -1)
	var dh float64
	for _, w := range desc {
		if len(w) > 3 && words[stem(w)] {
			dh++
		}
	}
	if len(desc) > 0 {
		s += 0.25 * dh / float64(len(desc))
	}
	// A deprecated tool loses to its replacement.
	if strings.Contains(strings.ToLower(tool.Description), "deprecated") {
		s -= 0.5
	}
	return s
}

func wordSet(text string) map[string]bool {
	out := map[string]bool{}
	for _, w := range wordRE.FindAllString(strings.ToLower(text), -1) {
		out[stem(w)] = true
	}
	return out
}

func stem(w string) string {
	if len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") {
		return w[:len(w)-1]
	}
	return w
}

var (
	pathNames = []string{"path", "file", "filename", "filepath", "file_path", "source", "src", "dir", "directory", "folder", "root"}
	urlNames  = []string{"url", "uri", "link", "href", "endpoint"}
)

func nameLike(name string, list []string) bool {
	n := strings.ToLower(name)
	for _, l := range list {
		if n == l || strings.HasSuffix(n, "_"+l) || strings.HasSuffix(n, l) && len(n) > len(l) && n[len(n)-len(l)-1] == '_' {
			return true
		}
	}
	return slices.Contains(list, strings.TrimSuffix(n, "s"))
}

// fill fills a tool's arguments from text; it fails when a required one
// cannot be.
func fill(s schema, text string) (map[string]any, error) {
	args := map[string]any{}
	paths := pathRE.FindAllString(text, -1)
	urls := urlRE.FindAllString(text, -1)
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		p := s.Properties[n]
		required := slices.Contains(s.Required, n)
		v, ok := value(n, p, text, paths, urls, required)
		if ok {
			args[n] = v
		} else if required {
			return nil, fmt.Errorf("cannot fill required argument %q from the task", n)
		}
	}
	for _, n := range s.Required {
		if _, ok := s.Properties[n]; !ok {
			return nil, fmt.Errorf("required argument %q has no schema", n)
		}
	}
	return args, nil
}

func value(name string, p *schema, text string, paths, urls []string, required bool) (any, bool) {
	switch p.typ() {
	case "string", "":
		if len(p.Enum) > 0 {
			for _, e := range p.Enum {
				if s, ok := e.(string); ok && strings.Contains(strings.ToLower(text), strings.ToLower(s)) {
					return s, true
				}
			}
			return nil, false
		}
		switch {
		case nameLike(name, urlNames):
			if len(urls) > 0 {
				return urls[0], true
			}
			return nil, false
		case nameLike(name, pathNames):
			if p := firstPath(paths, urls); p != "" {
				return p, true
			}
			return nil, false
		}
		if required {
			return text, true
		}
	case "array":
		if p.Items.typ() == "string" && nameLike(name, pathNames) {
			var out []any
			for _, x := range paths {
				if !isURLPart(x, urls) {
					out = append(out, x)
				}
			}
			if len(out) > 0 {
				return out, true
			}
		}
	case "number", "integer":
		if !required {
			return nil, false
		}
		if m := numberRE.FindString(text); m != "" {
			if p.typ() == "integer" {
				if n, err := strconv.Atoi(m); err == nil {
					return n, true
				}
				return nil, false
			}
			if f, err := strconv.ParseFloat(m, 64); err == nil {
				return f, true
			}
		}
	case "boolean":
		if required {
			return false, true
		}
	}
	return nil, false
}

func firstPath(paths, urls []string) string {
	for _, p := range paths {
		if !isURLPart(p, urls) {
			return p
		}
	}
	return ""
}

func isURLPart(p string, urls []string) bool {
	for _, u := range urls {
		if strings.Contains(u, p) {
			return true
		}
	}
	return false
}

func toolNames(tools []*sdk.Tool) string {
	n := make([]string, len(tools))
	for i, t := range tools {
		n[i] = t.Name
	}
	return strings.Join(n, ", ")
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// Model is the llm chooser: the model gets the task and the tools as
// function definitions and must call exactly one. It counts the calls'
// tokens for the runtime (agentkit.UsageMeter).
type Model struct {
	Model llms.Model
	// Agent names the agent in the usage it reports.
	Agent string
	meter llm.Meter
}

var _ agentkit.UsageMeter = (*Model)(nil)

// TakeUsage implements agentkit.UsageMeter.
func (m *Model) TakeUsage(agent, goalID string) protocol.Usage {
	return m.meter.TakeUsage(agent, goalID)
}

// Choose asks the model for the call.
func (m *Model) Choose(ctx context.Context, t agentkit.Task, tools []*sdk.Tool) (Call, error) {
	if m.Model == nil {
		return Call{}, errors.New("llm chooser: no model")
	}
	defs := make([]llms.Tool, 0, len(tools))
	for _, tool := range tools {
		params := tool.InputSchema
		if params == nil {
			params = map[string]any{"type": "object"}
		}
		defs = append(defs, llms.Tool{Type: "function", Function: &llms.FunctionDefinition{
			Name: tool.Name, Description: tool.Description, Parameters: params,
		}})
	}
	msgs := []llms.MessageContent{
		llms.TextParts(llms.ChatMessageTypeSystem, "You do one task of a team by calling exactly one of the tools you are given, with arguments taken from the task. Call a tool; do not answer in text."),
		llms.TextParts(llms.ChatMessageTypeHuman, fmt.Sprintf("Goal of the team: %s\nYour task: %s", t.Goal, taskText(t))),
	}
	choice, usage, err := llm.Generate(ctx, m.Model, msgs, llms.WithTools(defs))
	m.meter.Record(m.Agent, t.GoalID, usage)
	if err != nil {
		return Call{}, fmt.Errorf("llm chooser: %w", err)
	}
	if len(choice.ToolCalls) == 0 || choice.ToolCalls[0].FunctionCall == nil {
		return Call{}, fmt.Errorf("%w: the model called no tool (it answered %q)", ErrNoTool, clip(choice.Content, 200))
	}
	fc := choice.ToolCalls[0].FunctionCall
	c := Call{Tool: fc.Name, Arguments: map[string]any{}}
	if strings.TrimSpace(fc.Arguments) != "" {
		if err := json.Unmarshal([]byte(fc.Arguments), &c.Arguments); err != nil {
			return Call{}, fmt.Errorf("llm chooser: the model's arguments for %s are not a JSON object: %v", fc.Name, err)
		}
	}
	return c, nil
}
