package llm

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ioa-nats/ioa/agentkit/protocol"
)

// Limits on what a model's move may carry, so that a verbose model cannot
// push a message past the referee's size limit.
const (
	maxContentChars  = 8000
	maxPlanChars     = 2000
	maxAbstractChars = 200
	maxDescChars     = 2000
	maxTasks         = 8
)

// ErrNoJSON and ErrTruncatedJSON describe answers that hold no usable JSON
// object.
var (
	ErrNoJSON        = errors.New("the answer holds no JSON object")
	ErrTruncatedJSON = errors.New("the answer's JSON object is cut off")
)

// extractJSON returns the first complete JSON object in text, after code
// fences and prose around it.
func extractJSON(text string) (string, error) {
	start := strings.IndexByte(text, '{')
	if start < 0 {
		return "", ErrNoJSON
	}
	depth, inStr, esc := 0, false, false
	for i := start; i < len(text); i++ {
		c := text[i]
		switch {
		case inStr && esc:
			esc = false
		case inStr && c == '\\':
			esc = true
		case inStr && c == '"':
			inStr = false
		case inStr:
		case c == '"':
			inStr = true
		case c == '{':
			depth++
		case c == '}':
			depth--
			if depth == 0 {
				return text[start : i+1], nil
			}
		}
	}
	return "", ErrTruncatedJSON
}

// typeAliases maps what models write to the protocol's message types.
var typeAliases = map[string]string{
	"discussion":            protocol.MsgDiscussion,
	"discuss":               protocol.MsgDiscussion,
	"sync_task_assign":      protocol.MsgSyncTaskAssign,
	"sync_task_assignment":  protocol.MsgSyncTaskAssign,
	"sync_task":             protocol.MsgSyncTaskAssign,
	"async_task_assign":     protocol.MsgAsyncAssign,
	"async_task_assignment": protocol.MsgAsyncAssign,
	"async_task":            protocol.MsgAsyncAssign,
	"pause":                 protocol.MsgPause,
	"pause_and_trigger":     protocol.MsgPause,
	"conclusion":            protocol.MsgConclusion,
	"conclude":              protocol.MsgConclusion,
}

// ParseAnswer reads a model's turn answer into a message, repairing what
// can be repaired without guessing: code fences and prose around the
// object, type aliases ("sync_task_assignment"), a next_speaker or
// triggers given as a string, a single task given as an object, numbers
// where strings belong, a leading "@" on names. Anything else is an error
// that says which field is wrong, to be fed back to the model.
func ParseAnswer(text string) (protocol.AgentMessage, error) {
	raw, err := extractJSON(text)
	if err != nil {
		return protocol.AgentMessage{}, err
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		return protocol.AgentMessage{}, fmt.Errorf("the answer is not valid JSON: %v", err)
	}
	var m protocol.AgentMessage
	typ, ok := obj["type"].(string)
	if !ok {
		return m, errors.New(`"type" must be a string: one of discussion, sync_task_assign, async_task_assign, pause, conclusion`)
	}
	key := strings.ReplaceAll(strings.ToLower(strings.TrimSpace(typ)), "-", "_")
	if m.Type, ok = typeAliases[key]; !ok {
		return m, fmt.Errorf(`"type" %q is not one of discussion, sync_task_assign, async_task_assign, pause, conclusion`, typ)
	}
	if m.Content, err = textField(obj, "content"); err != nil {
		return m, err
	}
	if m.UpdatedPlan, err = textField(obj, "updated_plan"); err != nil {
		return m, err
	}
	if m.NextSpeaker, err = namesField(obj, "next_speaker"); err != nil {
		return m, err
	}
	if m.Triggers, err = namesField(obj, "triggers"); err != nil {
		return m, err
	}
	if m.Tasks, err = tasksField(obj["tasks"]); err != nil {
		return m, err
	}
	return m, nil
}

// textField reads a string; a number or a list of strings is accepted.
func textField(obj map[string]any, k string) (string, error) {
	switch v := obj[k].(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	case json.Number:
		return v.String(), nil
	case []any:
		parts := make([]string, 0, len(v))
		for _, e := range v {
			s, ok := scalar(e)
			if !ok {
				return "", fmt.Errorf("%q must be a string", k)
			}
			parts = append(parts, s)
		}
		return strings.Join(parts, "\n"), nil
	default:
		return "", fmt.Errorf("%q must be a string, not %s", k, kind(v))
	}
}

// namesField reads a list of names or ids; a single string is a list of one.
func namesField(obj map[string]any, k string) ([]string, error) {
	var out []string
	add := func(e any) error {
		s, ok := scalar(e)
		if !ok {
			return fmt.Errorf("%q must be a list of strings", k)
		}
		if s = strings.TrimPrefix(strings.TrimSpace(s), "@"); s != "" {
			out = append(out, s)
		}
		return nil
	}
	switch v := obj[k].(type) {
	case nil:
	case []any:
		for _, e := range v {
			if err := add(e); err != nil {
				return nil, err
			}
		}
	default:
		if err := add(v); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func tasksField(v any) ([]protocol.Task, error) {
	var list []any
	switch v := v.(type) {
	case nil:
		return nil, nil
	case []any:
		list = v
	case map[string]any:
		list = []any{v}
	default:
		return nil, fmt.Errorf(`"tasks" must be a list of objects {task_id, assignee, task_abstract, task_desc}, not %s`, kind(v))
	}
	tasks := make([]protocol.Task, 0, len(list))
	for i, e := range list {
		o, ok := e.(map[string]any)
		if !ok {
			return nil, fmt.Errorf(`"tasks"[%d] must be an object {task_id, assignee, task_abstract, task_desc}, not %s`, i, kind(e))
		}
		var t protocol.Task
		for _, f := range []struct {
			dst  *string
			keys []string
		}{
			{&t.TaskID, []string{"task_id", "id"}},
			{&t.Assignee, []string{"assignee", "agent"}},
			{&t.TaskAbstract, []string{"task_abstract", "abstract", "title"}},
			{&t.TaskDesc, []string{"task_desc", "description", "desc", "task"}},
		} {
			for _, k := range f.keys {
				if x, present := o[k]; present && x != nil {
					s, ok := scalar(x)
					if !ok {
						return nil, fmt.Errorf(`"tasks"[%d].%s must be a string, not %s`, i, k, kind(x))
					}
					*f.dst = strings.TrimSpace(s)
					break
				}
			}
		}
		t.Assignee = strings.TrimPrefix(t.Assignee, "@")
		tasks = append(tasks, t)
	}
	return tasks, nil
}

func scalar(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case json.Number:
		return v.String(), true
	}
	return "", false
}

func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// Complete fits a parsed move to the chat: names matched to members
// regardless of case, a member's discussion with no next speaker handed to
// the launcher, missing task ids chosen, text clipped to the limits. Then
// it applies the move to a copy of the chat, so that only a move the
// referee would accept is returned.
func Complete(c protocol.Chat, self string, m protocol.AgentMessage) (protocol.AgentMessage, error) {
	member := func(n string) string {
		if i := slices.IndexFunc(c.Members, func(x string) bool { return strings.EqualFold(x, n) }); i >= 0 {
			return c.Members[i]
		}
		return n
	}
	for i, n := range m.NextSpeaker {
		m.NextSpeaker[i] = member(n)
	}
	if m.Type == protocol.MsgDiscussion && len(m.NextSpeaker) == 0 && self != c.Launcher {
		m.NextSpeaker = []string{c.Launcher}
	}
	if m.Type != protocol.MsgDiscussion {
		m.NextSpeaker = nil
	}
	if m.Type != protocol.MsgPause {
		m.Triggers = nil
	}
	if m.Type != protocol.MsgSyncTaskAssign && m.Type != protocol.MsgAsyncAssign {
		m.Tasks = nil
	}
	if len(m.Tasks) > maxTasks {
		return m, fmt.Errorf("at most %d tasks per assignment, got %d", maxTasks, len(m.Tasks))
	}
	used := map[string]bool{}
	for _, t := range c.Tasks {
		used[t.TaskID] = true
	}
	for _, t := range m.Tasks {
		used[t.TaskID] = true
	}
	n := len(c.Tasks)
	for i := range m.Tasks {
		t := &m.Tasks[i]
		t.Assignee = member(t.Assignee)
		if t.TaskID == "" {
			for {
				n++
				id := "t" + strconv.Itoa(n)
				if !used[id] {
					t.TaskID, used[id] = id, true
					break
				}
			}
		}
		t.TaskAbstract = clip(oneLine(t.TaskAbstract), maxAbstractChars)
		t.TaskDesc = clip(t.TaskDesc, maxDescChars)
		if t.TaskDesc == "" {
			t.TaskDesc = t.TaskAbstract
		}
	}
	m.Content = clip(strings.TrimSpace(m.Content), maxContentChars)
	m.UpdatedPlan = clip(strings.TrimSpace(m.UpdatedPlan), maxPlanChars)
	if m.Type == protocol.MsgConclusion && m.Content == "" {
		return m, errors.New(`a conclusion needs the final answer in "content"`)
	}
	probe := m
	probe.Sender, probe.Seq = self, c.LastSeq+1
	if _, err := protocol.Apply(c, probe); err != nil {
		return m, err
	}
	return m, nil
}

// clip cuts s to at most n bytes on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = " [...]"
	cut := max(n-len(mark), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// oneLine folds s onto one line.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n\t") {
		return strings.TrimSpace(s)
	}
	return strings.Join(strings.Fields(s), " ")
}
