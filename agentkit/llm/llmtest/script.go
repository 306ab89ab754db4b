package llmtest

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
)

// Queue answers with rs in order, then repeats the last one.
func Queue(rs ...Response) Handler {
	var mu sync.Mutex
	i := 0
	return func(Request) Response {
		mu.Lock()
		defer mu.Unlock()
		if len(rs) == 0 {
			return Status(http.StatusInternalServerError)
		}
		r := rs[min(i, len(rs)-1)]
		i++
		return r
	}
}

// Always answers r to every request.
func Always(r Response) Handler { return func(Request) Response { return r } }

// Answer is a completion whose content is v as JSON (a string as is).
func Answer(v any) Response {
	if s, ok := v.(string); ok {
		return Response{Content: s}
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return Response{Content: string(b)}
}

// Text is a completion with plain text content.
func Text(s string) Response { return Response{Content: s} }

// Call is a completion that calls one tool with args (marshalled to JSON).
func Call(name string, args any) Response {
	b, err := json.Marshal(args)
	if err != nil {
		panic(err)
	}
	return Response{ToolCalls: []ToolCall{{Name: name, Arguments: string(b)}}}
}

// Garbage is a completion with no JSON in it.
func Garbage() Response {
	return Text("I am not sure what to do here. Let me think about the goal and get back to you!")
}

// Truncated is v as JSON cut in half, as a model stopped by max_tokens
// writes it.
func Truncated(v any) Response {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return Text(string(b[:len(b)/2]))
}

// WrongTypes is a turn answer whose fields have types no repair can fix.
func WrongTypes() Response {
	return Text(`{"type": 7, "content": {"text": "hello"}, "next_speaker": {"name": 3}, "tasks": "do everything"}`)
}

// Status is an HTTP error with an OpenAI-style error body.
func Status(code int) Response { return Response{Status: code} }

// Hang never answers: the client's timeout has to end the call.
func Hang() Response { return Response{Hang: true} }

// Huge is a valid completion of about n bytes.
func Huge(n int) Response {
	content := strings.Repeat("blah ", n/5+1)
	b, _ := json.Marshal(map[string]any{
		"id": "chatcmpl-huge", "object": "chat.completion",
		"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": content}, "finish_reason": "stop"}},
		"usage":   map[string]int{"prompt_tokens": 1, "completion_tokens": n / 4},
	})
	return Response{RawBody: b}
}
