package llmtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Request is a chat completion request as the server received it.
type Request struct {
	Model               string
	Messages            []Message
	Tools               []string // function names
	ToolChoice          json.RawMessage
	MaxTokens           *int
	MaxCompletionTokens *int
	Temperature         *float64
	ResponseFormat      json.RawMessage
	Header              http.Header
	Body                []byte
}

// Message is one message of a request.
type Message struct {
	Role       string
	Content    string
	Name       string
	ToolCallID string
	ToolCalls  []ToolCall
}

// ToolCall is a tool call in a request or a response.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string
}

var agentRE = regexp.MustCompile(`^You are ([a-z0-9][a-z0-9_-]{0,63})`)

// Agent is the name in the system prompt's "You are <name>", or "".
func (r Request) Agent() string {
	for _, m := range r.Messages {
		if m.Role == "system" {
			if s := agentRE.FindStringSubmatch(m.Content); s != nil {
				return s[1]
			}
		}
	}
	return ""
}

// Text is every message's content, joined.
func (r Request) Text() string {
	var b strings.Builder
	for _, m := range r.Messages {
		b.WriteString(m.Content)
		b.WriteByte('\n')
	}
	return b.String()
}

// Last is the last message's content.
func (r Request) Last() string {
	if len(r.Messages) == 0 {
		return ""
	}
	return r.Messages[len(r.Messages)-1].Content
}

// ForcedTool is the function tool_choice names, or "".
func (r Request) ForcedTool() string {
	var tc struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if json.Unmarshal(r.ToolChoice, &tc) != nil {
		return ""
	}
	return tc.Function.Name
}

// ToolResults counts the tool messages, i.e. how many tool calls were
// answered before this request.
func (r Request) ToolResults() int {
	n := 0
	for _, m := range r.Messages {
		if m.Role == "tool" {
			n++
		}
	}
	return n
}

// Usage is the token usage a response reports.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

// Response is what the server answers.
type Response struct {
	// Status is the HTTP status; 0 means 200.
	Status int
	// Content and ToolCalls make the assistant message.
	Content   string
	ToolCalls []ToolCall
	// Usage is reported as is; nil reports an estimate: the request body
	// and the content at four bytes a token.
	Usage *Usage
	// RawBody, when set, is sent instead of a completion (with Status).
	RawBody []byte
	// Hang answers nothing until the client gives up or the server closes.
	Hang bool
	// Delay waits before answering.
	Delay time.Duration
}

// Handler scripts the server.
type Handler func(Request) Response

// Server is a running fake. Its URL ends in /v1, as base URLs do.
type Server struct {
	URL  string
	t    testing.TB
	srv  *httptest.Server
	h    Handler
	done chan struct{}

	mu       sync.Mutex
	reqs     []Request
	reported Usage
	answered int // 200 completions sent
}

// New starts a server for the test and closes it when the test ends.
func New(t testing.TB, h Handler) *Server {
	t.Helper()
	s := &Server{t: t, h: h, done: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.serve)
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL + "/v1"
	t.Cleanup(s.Close)
	return s
}

// Close unblocks hanging handlers and stops the server. It is idempotent.
func (s *Server) Close() {
	s.mu.Lock()
	select {
	case <-s.done:
		s.mu.Unlock()
		return
	default:
		close(s.done)
	}
	s.mu.Unlock()
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Reported returns the usage the server reported in its completions and
// how many completions it sent.
func (s *Server) Reported() (Usage, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reported, s.answered
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req, err := decode(body)
	if err != nil {
		s.t.Errorf("llmtest: bad request body: %v", err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req.Header = r.Header.Clone()
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	n := len(s.reqs)
	s.mu.Unlock()
	resp := s.h(req)
	if resp.Delay > 0 || resp.Hang {
		var wait <-chan time.Time
		if !resp.Hang {
			wait = time.After(resp.Delay)
		}
		select {
		case <-wait:
		case <-r.Context().Done():
			return
		case <-s.done:
			return
		}
	}
	status := resp.Status
	if status == 0 {
		status = http.StatusOK
	}
	w.Header().Set("Content-Type", "application/json")
	if resp.RawBody != nil {
		w.WriteHeader(status)
		_, _ = w.Write(resp.RawBody)
		return
	}
	if status != http.StatusOK {
		w.WriteHeader(status)
		_, _ = fmt.Fprintf(w, `{"error":{"message":"scripted status %d","type":"server_error"}}`, status)
		return
	}
	u := resp.Usage
	if u == nil {
		u = &Usage{PromptTokens: len(body)/4 + 1, CompletionTokens: (len(resp.Content)+len(fmt.Sprint(resp.ToolCalls)))/4 + 1}
	}
	type fn struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	type call struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function fn     `json:"function"`
	}
	msg := struct {
		Role      string `json:"role"`
		Content   string `json:"content"`
		ToolCalls []call `json:"tool_calls,omitempty"`
	}{Role: "assistant", Content: resp.Content}
	finish := "stop"
	for i, tc := range resp.ToolCalls {
		id := tc.ID
		if id == "" {
			id = "call_" + strconv.Itoa(n) + "_" + strconv.Itoa(i)
		}
		msg.ToolCalls = append(msg.ToolCalls, call{ID: id, Type: "function", Function: fn{tc.Name, tc.Arguments}})
		finish = "tool_calls"
	}
	out := map[string]any{
		"id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": req.Model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
		"usage": map[string]int{"prompt_tokens": u.PromptTokens, "completion_tokens": u.CompletionTokens,
			"total_tokens": u.PromptTokens + u.CompletionTokens},
	}
	b, _ := json.Marshal(out)
	_, err = w.Write(b)
	if err == nil {
		s.mu.Lock()
		s.reported.PromptTokens += u.PromptTokens
		s.reported.CompletionTokens += u.CompletionTokens
		s.answered++
		s.mu.Unlock()
	}
}

func decode(body []byte) (Request, error) {
	var raw struct {
		Model    string `json:"model"`
		Messages []struct {
			Role       string          `json:"role"`
			Content    json.RawMessage `json:"content"`
			Name       string          `json:"name"`
			ToolCallID string          `json:"tool_call_id"`
			ToolCalls  []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"messages"`
		Tools []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
		ToolChoice          json.RawMessage `json:"tool_choice"`
		MaxTokens           *int            `json:"max_tokens"`
		MaxCompletionTokens *int            `json:"max_completion_tokens"`
		Temperature         *float64        `json:"temperature"`
		ResponseFormat      json.RawMessage `json:"response_format"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return Request{}, err
	}
	req := Request{Model: raw.Model, ToolChoice: raw.ToolChoice, MaxTokens: raw.MaxTokens, MaxCompletionTokens: raw.MaxCompletionTokens,
		Temperature: raw.Temperature, ResponseFormat: raw.ResponseFormat, Body: body}
	for _, t := range raw.Tools {
		req.Tools = append(req.Tools, t.Function.Name)
	}
	for _, m := range raw.Messages {
		msg := Message{Role: m.Role, Name: m.Name, ToolCallID: m.ToolCallID, Content: contentText(m.Content)}
		for _, tc := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		req.Messages = append(req.Messages, msg)
	}
	return req, nil
}

// contentText reads content given as a string or as a list of parts.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) == nil {
		var b strings.Builder
		for _, p := range parts {
			b.WriteString(p.Text)
		}
		return b.String()
	}
	return ""
}
