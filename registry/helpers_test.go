package registry

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/bus/bustest"
)

// start runs a registry instance on b for the rest of the test.
func start(t testing.TB, b *bus.Bus, cfg Config) *Service {
	t.Helper()
	s, err := New(b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return s
}

// newRegistry is a fresh bus with one registry instance.
func newRegistry(t testing.TB, cfg Config) (*bus.Bus, *Service) {
	t.Helper()
	b := bustest.New(t)
	return b, start(t, b, cfg)
}

// call sends in to a registry endpoint and decodes a successful reply.
func call[T any](t testing.TB, nc *nats.Conn, b *bus.Bus, endpoint string, in any) T {
	t.Helper()
	var out T
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := bus.Request(ctx, nc, b.Subjects().Registry(endpoint), in, &out); err != nil {
		t.Fatalf("%s %s: %v", endpoint, bus.Encode(in), err)
	}
	return out
}

// raw sends a body as is and returns the reply.
func raw(t testing.TB, nc *nats.Conn, b *bus.Bus, endpoint string, body []byte) *nats.Msg {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	m, err := nc.RequestWithContext(ctx, b.Subjects().Registry(endpoint), body)
	if err != nil {
		t.Fatalf("%s %q: %v", endpoint, body, err)
	}
	return m
}

// wantError checks that a reply is an error with status and code, in the
// header and in the JSON body.
func wantError(t testing.TB, m *nats.Msg, status int, code string) {
	t.Helper()
	if got := m.Header.Get(bus.HeaderErrorCode); got != strconv.Itoa(status) {
		t.Errorf("%s = %q, want %d (body %s)", bus.HeaderErrorCode, got, status, m.Data)
	}
	if m.Header.Get(bus.HeaderError) == "" {
		t.Errorf("no %s header (body %s)", bus.HeaderError, m.Data)
	}
	var body protocol.ErrorBody
	if err := json.Unmarshal(m.Data, &body); err != nil {
		t.Fatalf("error body %q: %v", m.Data, err)
	}
	if body.Error.Code != code || body.Error.Message == "" {
		t.Errorf("error body %s, want code %q and a message", m.Data, code)
	}
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func card(name, desc string, tags ...string) protocol.AgentCard {
	return protocol.AgentCard{Name: name, Description: desc, Type: protocol.TypeTool, Tags: tags}
}

func register(t testing.TB, nc *nats.Conn, b *bus.Bus, c protocol.AgentCard) protocol.RegisterReply {
	t.Helper()
	return call[protocol.RegisterReply](t, nc, b, bus.RegistryRegister, c)
}

func searchNames(t testing.TB, nc *nats.Conn, b *bus.Bus, req protocol.SearchRequest) []string {
	t.Helper()
	r := call[protocol.SearchReply](t, nc, b, bus.RegistrySearch, req)
	names := make([]string, len(r.Results))
	for i, x := range r.Results {
		names[i] = x.Name
	}
	return names
}

// searchVia runs a search in one instance, bypassing the queue group.
func searchVia(t testing.TB, s *Service, req protocol.SearchRequest) []string {
	t.Helper()
	sr := &searchRequest{SearchRequest: req}
	if req.Limit != 0 {
		sr.Limit = &req.Limit
	}
	r, err := s.search(t.Context(), nil, sr)
	if err != nil {
		t.Fatalf("search via instance: %v", err)
	}
	names := make([]string, len(r.Results))
	for i, x := range r.Results {
		names[i] = x.Name
	}
	return names
}

// A few cards with distinct skills.
var fleet = []protocol.AgentCard{
	{Name: "weather", Description: "Forecasts the weather: temperature, rain and wind for any city", Type: protocol.TypeTool, Tags: []string{"weather", "forecast"}, Capabilities: []string{"weather forecast"}},
	{Name: "translator", Description: "Translates text between English, French, German and Spanish", Type: protocol.TypeAssistant, Tags: []string{"language", "translation"}, Capabilities: []string{"translation"}},
	{Name: "sql-writer", Description: "Writes SQL queries for a database schema from a question in plain English", Type: protocol.TypeTool, Tags: []string{"database", "sql"}, Capabilities: []string{"text to sql"}},
	{Name: "poet", Description: "Writes poems and song lyrics on any theme", Type: protocol.TypeAssistant, Tags: []string{"writing", "creative"}, Capabilities: []string{"poetry"}},
	{Name: "calculator", Description: "Does arithmetic and converts units such as kilometres to miles", Type: protocol.TypeTool, Tags: []string{"math", "units"}, Capabilities: []string{"arithmetic", "unit conversion"}},
	{Name: "reviewer", Description: "Reviews source code for bugs, style and security problems", Type: protocol.TypeHuman, Tags: []string{"code", "review"}, Capabilities: []string{"code review"}},
}

func registerFleet(t testing.TB, nc *nats.Conn, b *bus.Bus) {
	t.Helper()
	for _, c := range fleet {
		register(t, nc, b, c)
	}
}
