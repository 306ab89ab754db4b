package registry

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/bus/bustest"
)

func TestLifecycle(t *testing.T) {
	b, _ := newRegistry(t, Config{})
	nc := b.Conn()

	c := card("weather", "Forecasts the weather for any city", "weather")
	first := register(t, nc, b, c)
	if first.Name != "weather" || first.Revision == 0 || first.RegisteredAt.IsZero() {
		t.Fatalf("register reply %+v", first)
	}
	info := call[protocol.AgentInfo](t, nc, b, bus.RegistryGet, protocol.NameRequest{Name: "weather"})
	if !info.Online || info.Description != c.Description || info.LastSeen.IsZero() {
		t.Fatalf("get %+v", info)
	}

	c.Description = "Forecasts the weather and the tides"
	second := register(t, nc, b, c)
	if second.Revision <= first.Revision || !second.RegisteredAt.Equal(first.RegisteredAt) {
		t.Fatalf("re-register %+v after %+v: want a newer revision and the first registration time", second, first)
	}
	info = call[protocol.AgentInfo](t, nc, b, bus.RegistryGet, protocol.NameRequest{Name: "weather"})
	if info.Description != c.Description {
		t.Fatalf("get after update: %q", info.Description)
	}

	hb := call[protocol.HeartbeatReply](t, nc, b, bus.RegistryHeartbeat, protocol.NameRequest{Name: "weather"})
	if hb.TTL.D() != DefaultHeartbeatTTL {
		t.Fatalf("heartbeat ttl %v", hb.TTL)
	}

	call[struct{}](t, nc, b, bus.RegistryDeregister, protocol.NameRequest{Name: "weather"})
	for _, ep := range []string{bus.RegistryGet, bus.RegistryHeartbeat, bus.RegistryDeregister} {
		wantError(t, raw(t, nc, b, ep, []byte(`{"name":"weather"}`)), 404, "not_found")
	}
	if got := searchNames(t, nc, b, protocol.SearchRequest{Query: "weather", IncludeOffline: true}); len(got) != 0 {
		t.Fatalf("search after deregister: %v", got)
	}
}

// A process that stops after its replacement registered the name (a
// rolling restart) must not take the name away from the replacement.
func TestDeregisterKeepsANewerIncarnation(t *testing.T) {
	b, _ := newRegistry(t, Config{})
	nc := b.Conn()
	c := card("weather", "Forecasts the weather for any city", "weather")
	c.Incarnation = "old"
	register(t, nc, b, c)
	c.Incarnation = "new"
	register(t, nc, b, c)
	// The old process hears of the new one from its heartbeat.
	if hb := call[protocol.HeartbeatReply](t, nc, b, bus.RegistryHeartbeat, protocol.NameRequest{Name: "weather"}); hb.Incarnation != "new" {
		t.Fatalf("heartbeat reply %+v, want the card's incarnation", hb)
	}

	m := raw(t, nc, b, bus.RegistryDeregister, bus.Encode(protocol.NameRequest{Name: "weather", Incarnation: "old"}))
	wantError(t, m, 409, "conflict")
	info := call[protocol.AgentInfo](t, nc, b, bus.RegistryGet, protocol.NameRequest{Name: "weather"})
	if !info.Online || info.Incarnation != "new" {
		t.Fatalf("after the old incarnation left: %+v, want the new one registered and online", info)
	}

	call[struct{}](t, nc, b, bus.RegistryDeregister, protocol.NameRequest{Name: "weather", Incarnation: "new"})
	wantError(t, raw(t, nc, b, bus.RegistryGet, []byte(`{"name":"weather"}`)), 404, "not_found")

	// Without an incarnation a deregister deletes whichever card is there.
	register(t, nc, b, c)
	call[struct{}](t, nc, b, bus.RegistryDeregister, protocol.NameRequest{Name: "weather"})
	wantError(t, raw(t, nc, b, bus.RegistryGet, []byte(`{"name":"weather"}`)), 404, "not_found")
}

func TestMicroDiscovery(t *testing.T) {
	b, _ := newRegistry(t, Config{})
	var info micro.Info
	if err := bus.Request(t.Context(), b.Conn(), "$SRV.INFO."+ServiceName, nil, &info); err != nil {
		t.Fatal(err)
	}
	var subjects []string
	for _, e := range info.Endpoints {
		subjects = append(subjects, e.Subject)
		if e.QueueGroup != QueueGroup {
			t.Errorf("endpoint %s in queue group %q", e.Name, e.QueueGroup)
		}
	}
	slices.Sort(subjects)
	want := []string{"ioa.registry.deregister", "ioa.registry.deregister.*", "ioa.registry.get", "ioa.registry.heartbeat",
		"ioa.registry.heartbeat.*", "ioa.registry.list", "ioa.registry.register", "ioa.registry.register.*", "ioa.registry.search"}
	if !slices.Equal(subjects, want) {
		t.Fatalf("endpoints %v, want %v", subjects, want)
	}
}

// Two instances share the queue group; each converges on the KV, one going
// away leaves the other serving, and a new one catches up at Start.
func TestInstancesConverge(t *testing.T) {
	b := bustest.New(t)
	nc := b.Conn()
	a := start(t, b, Config{})
	c := start(t, b, Config{})

	registerFleet(t, nc, b)
	for _, s := range []*Service{a, c} {
		eventually(t, 5*time.Second, "both instances see the fleet", func() bool { return s.Len() == len(fleet) })
		if got := searchVia(t, s, protocol.SearchRequest{Query: "convert kilometres to miles", Limit: 1}); !slices.Equal(got, []string{"calculator"}) {
			t.Errorf("instance search: %v", got)
		}
	}
	// Requests spread over both instances; each answers the same.
	for i := range 10 {
		if got := searchNames(t, nc, b, protocol.SearchRequest{Query: "translate this French letter", Limit: 1}); !slices.Equal(got, []string{"translator"}) {
			t.Fatalf("search %d: %v", i, got)
		}
	}

	if err := a.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := a.Shutdown(t.Context()); err != nil {
		t.Fatalf("second shutdown: %v", err)
	}
	call[struct{}](t, nc, b, bus.RegistryDeregister, protocol.NameRequest{Name: "poet"})
	register(t, nc, b, card("tides", "Predicts tide times and heights for harbours"))
	for i := range 5 {
		if got := searchNames(t, nc, b, protocol.SearchRequest{Query: "tide tables for the harbour", Limit: 1}); !slices.Equal(got, []string{"tides"}) {
			t.Fatalf("search %d after one instance stopped: %v", i, got)
		}
	}

	// A new instance is caught up when Start returns.
	d := start(t, b, Config{})
	if d.Len() != len(fleet) {
		t.Fatalf("restarted instance knows %d agents, want %d", d.Len(), len(fleet))
	}
	if got := searchVia(t, d, protocol.SearchRequest{Query: "song lyrics", IncludeOffline: true}); slices.Contains(got, "poet") {
		t.Errorf("deregistered agent found by the new instance: %v", got)
	}
	if got := searchVia(t, d, protocol.SearchRequest{Query: "tide tables for the harbour", Limit: 1}); !slices.Equal(got, []string{"tides"}) {
		t.Errorf("new instance search: %v", got)
	}
	if err := a.Start(t.Context()); !errors.Is(err, ErrClosed) {
		t.Errorf("Start after Shutdown: %v, want ErrClosed", err)
	}
	if err := d.Start(t.Context()); !errors.Is(err, ErrStarted) {
		t.Errorf("second Start: %v, want ErrStarted", err)
	}
}

// Cards survive a restart of NATS itself; liveness does not, until the
// next heartbeat.
func TestRestartOnSameStore(t *testing.T) {
	dir := t.TempDir()
	open := func() *bus.Bus {
		b, err := bus.Start(t.Context(), bus.Config{DataDir: dir, Listen: bus.NoListen})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	b := open()
	s := start(t, b, Config{})
	registerFleet(t, b.Conn(), b)
	if err := s.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	b = open()
	t.Cleanup(func() { b.Close() })
	s = start(t, b, Config{})
	if s.Len() != len(fleet) {
		t.Fatalf("after restart %d agents, want %d", s.Len(), len(fleet))
	}
	nc := b.Conn()
	q := protocol.SearchRequest{Query: "weather forecast for Paris"}
	if got := searchNames(t, nc, b, q); len(got) != 0 {
		t.Errorf("no heartbeat since restart, yet online: %v", got)
	}
	q.IncludeOffline = true
	if got := searchNames(t, nc, b, q); len(got) == 0 || got[0] != "weather" {
		t.Errorf("include_offline after restart: %v", got)
	}
	call[protocol.HeartbeatReply](t, nc, b, bus.RegistryHeartbeat, protocol.NameRequest{Name: "weather"})
	q.IncludeOffline = false
	eventually(t, 5*time.Second, "heartbeat brings the agent online", func() bool {
		got := searchNames(t, nc, b, q)
		return slices.Equal(got, []string{"weather"})
	})
}

func TestHeartbeatTTL(t *testing.T) {
	const ttl = 2 * time.Second // long enough that a fresh card is still online when searched under -race
	b, _ := newRegistry(t, Config{HeartbeatTTL: ttl})
	nc := b.Conn()
	register(t, nc, b, fleet[0])
	register(t, nc, b, fleet[1])
	q := protocol.SearchRequest{Query: "weather forecast"}
	if got := searchNames(t, nc, b, q); len(got) == 0 || got[0] != "weather" {
		t.Fatalf("fresh registration not found: %v", got)
	}
	hb := call[protocol.HeartbeatReply](t, nc, b, bus.RegistryHeartbeat, protocol.NameRequest{Name: "weather"})
	if hb.TTL.D() != ttl {
		t.Fatalf("ttl %v, want %v", hb.TTL, ttl)
	}

	eventually(t, 10*ttl, "agent goes offline without heartbeats", func() bool {
		return len(searchNames(t, nc, b, q)) == 0
	})
	info := call[protocol.AgentInfo](t, nc, b, bus.RegistryGet, protocol.NameRequest{Name: "weather"})
	if info.Online {
		t.Errorf("get: online after ttl: %+v", info)
	}
	q.IncludeOffline = true
	if got := searchNames(t, nc, b, q); len(got) == 0 || got[0] != "weather" {
		t.Errorf("include_offline: %v", got)
	}
	list := call[protocol.ListReply](t, nc, b, bus.RegistryList, protocol.ListRequest{OnlineOnly: true})
	if list.Total != 0 {
		t.Errorf("online_only list: %+v", list)
	}

	call[protocol.HeartbeatReply](t, nc, b, bus.RegistryHeartbeat, protocol.NameRequest{Name: "weather"})
	eventually(t, 5*time.Second, "heartbeat brings it back", func() bool {
		l := call[protocol.ListReply](t, nc, b, bus.RegistryList, protocol.ListRequest{OnlineOnly: true})
		return l.Total == 1 && l.Agents[0].Name == "weather" && l.Agents[0].Online
	})
}

func TestSearchFilters(t *testing.T) {
	b, _ := newRegistry(t, Config{})
	nc := b.Conn()
	registerFleet(t, nc, b)
	register(t, nc, b, protocol.AgentCard{Name: "sql-tutor", Description: "Teaches SQL to beginners with exercises on queries", Type: protocol.TypeAssistant, Tags: []string{"database", "education"}})

	all := call[protocol.SearchReply](t, nc, b, bus.RegistrySearch, protocol.SearchRequest{Query: "write an SQL query", Limit: 100})
	seen := map[string]bool{}
	for i, r := range all.Results {
		if seen[r.Name] {
			t.Errorf("%s twice", r.Name)
		}
		seen[r.Name] = true
		if r.Score < 0 || r.Score > 1 || (i > 0 && r.Score > all.Results[i-1].Score) {
			t.Errorf("scores not sorted in [0,1]: %+v", all.Results)
		}
		if r.Description == "" || r.Type == "" || r.Tags == nil || r.Capabilities == nil || !r.Online {
			t.Errorf("result without card fields: %+v", r)
		}
	}
	if len(all.Results) < 2 || all.Results[0].Name != "sql-writer" {
		t.Fatalf("sql search: %+v", all.Results)
	}

	tests := []struct {
		name string
		req  protocol.SearchRequest
		want func(got []string) bool
	}{
		{"type", protocol.SearchRequest{Query: "write an SQL query", Type: protocol.TypeAssistant},
			func(got []string) bool {
				return len(got) > 0 && got[0] == "sql-tutor" && !slices.Contains(got, "sql-writer")
			}},
		{"tags all required", protocol.SearchRequest{Query: "sql", Tags: []string{"database", "education"}},
			func(got []string) bool { return slices.Equal(got, []string{"sql-tutor"}) }},
		{"tag case", protocol.SearchRequest{Query: "sql", Tags: []string{"SQL"}},
			func(got []string) bool { return slices.Equal(got, []string{"sql-writer"}) }},
		{"exclude", protocol.SearchRequest{Query: "write an SQL query", Exclude: []string{"sql-writer"}},
			func(got []string) bool {
				return len(got) > 0 && got[0] == "sql-tutor" && !slices.Contains(got, "sql-writer")
			}},
		{"limit", protocol.SearchRequest{Query: "writes", Limit: 1},
			func(got []string) bool { return len(got) == 1 }},
		{"queries ranked together", protocol.SearchRequest{Queries: []string{"poem about the sea", "song lyrics"}},
			func(got []string) bool { return len(got) > 0 && got[0] == "poet" }},
		{"no match for tag", protocol.SearchRequest{Query: "sql", Tags: []string{"nope"}},
			func(got []string) bool { return len(got) == 0 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := searchNames(t, nc, b, tt.req); !tt.want(got) {
				t.Errorf("%+v: got %v", tt.req, got)
			}
		})
	}
}

func TestReregisterUpdatesIndex(t *testing.T) {
	b, _ := newRegistry(t, Config{})
	nc := b.Conn()
	registerFleet(t, nc, b)
	q := protocol.SearchRequest{Query: "astronomy: when is the next solar eclipse", Limit: 1}
	if got := searchNames(t, nc, b, q); slices.Equal(got, []string{"poet"}) {
		t.Fatalf("poet found before its update: %v", got)
	}
	register(t, nc, b, protocol.AgentCard{Name: "poet", Description: "Astronomy assistant: eclipses, planets and star charts", Tags: []string{"astronomy"}})
	if got := searchNames(t, nc, b, q); !slices.Equal(got, []string{"poet"}) {
		t.Fatalf("after re-register: %v", got)
	}
	if got := searchNames(t, nc, b, protocol.SearchRequest{Query: "song lyrics", Limit: 1}); slices.Equal(got, []string{"poet"}) {
		t.Fatalf("old description still indexed: %v", got)
	}
}

func TestListPaging(t *testing.T) {
	b, _ := newRegistry(t, Config{})
	nc := b.Conn()
	var want []string
	for i := range 25 {
		name := fmt.Sprintf("agent-%02d", i)
		want = append(want, name)
		register(t, nc, b, card(name, "does task number "+name))
	}
	var got []string
	for offset := 0; ; offset += 10 {
		page := call[protocol.ListReply](t, nc, b, bus.RegistryList, protocol.ListRequest{Offset: offset, Limit: 10})
		if page.Total != 25 {
			t.Fatalf("total %d", page.Total)
		}
		if len(page.Agents) == 0 {
			break
		}
		for _, a := range page.Agents {
			if !a.Online {
				t.Errorf("%s offline", a.Name)
			}
			got = append(got, a.Name)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("pages %v, want %v", got, want)
	}
	// An empty body is {}: the first 100.
	m := raw(t, nc, b, bus.RegistryList, nil)
	if bus.ReplyError(m) != nil {
		t.Fatalf("empty list body: %s", m.Data)
	}
	if all := call[protocol.ListReply](t, nc, b, bus.RegistryList, struct{}{}); len(all.Agents) != 25 {
		t.Fatalf("default page: %d", len(all.Agents))
	}
}

func TestQuota(t *testing.T) {
	b, _ := newRegistry(t, Config{MaxAgentsPerConn: 2})
	one, err := b.NewConn("one")
	if err != nil {
		t.Fatal(err)
	}
	register(t, one, b, card("a1", "first"))
	register(t, one, b, card("a2", "second"))
	register(t, one, b, card("a2", "second, updated")) // an update is not a new agent
	wantError(t, raw(t, one, b, bus.RegistryRegister, bus.Encode(card("a3", "third"))), 429, "quota_exceeded")

	two, err := b.NewConn("two")
	if err != nil {
		t.Fatal(err)
	}
	register(t, two, b, card("b1", "other connection"))
	call[struct{}](t, one, b, bus.RegistryDeregister, protocol.NameRequest{Name: "a1"})
	register(t, one, b, card("a3", "third, after a deregister"))
}

func TestShutdownBeforeStart(t *testing.T) {
	s, err := New(bustest.New(t), Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Start after Shutdown: %v", err)
	}
	if _, err := New(bustest.New(t), Config{HeartbeatTTL: -1}); err == nil {
		t.Fatal("negative TTL accepted")
	}
}

// A heartbeat the presence bucket cannot store (its stream gone, as while a
// cluster elects its leader) still keeps the agent online in the instance
// that received it, and the agent is told of the failure.
func TestHeartbeatKeptWhenPresenceUnavailable(t *testing.T) {
	const ttl = 2 * time.Second
	b, _ := newRegistry(t, Config{HeartbeatTTL: ttl})
	nc := b.Conn()
	register(t, nc, b, fleet[0])
	if err := b.JetStream().DeleteStream(t.Context(), "KV_"+bus.BucketPresence); err != nil {
		t.Fatal(err)
	}
	m := raw(t, nc, b, bus.RegistryHeartbeat, []byte(`{"name":"weather"}`))
	wantError(t, m, 503, "unavailable")
	info := call[protocol.AgentInfo](t, nc, b, bus.RegistryGet, protocol.NameRequest{Name: "weather"})
	if !info.Online {
		t.Fatalf("after a heartbeat kept in memory: %+v, want online", info)
	}
	// Without further heartbeats it goes offline at the TTL as usual.
	eventually(t, 10*ttl, "agent goes offline without heartbeats", func() bool {
		return !call[protocol.AgentInfo](t, nc, b, bus.RegistryGet, protocol.NameRequest{Name: "weather"}).Online
	})
}

// TestInstanceKilled runs two registry instances and drops one's connection
// at once, as a SIGKILL would (no drain, no clean stop): every request after
// that is answered by the other, from its own index, including cards
// registered after the kill.
func TestInstanceKilled(t *testing.T) {
	b := bustest.New(t)
	nc := b.Conn()
	a, err := New(b, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = a.Shutdown(ctx) // its connection is gone: errors are expected
	})
	c := start(t, b, Config{})
	registerFleet(t, nc, b)
	for _, s := range []*Service{a, c} {
		eventually(t, 5*time.Second, "both instances see the fleet", func() bool { return s.Len() == len(fleet) })
	}
	a.nc.Close()
	// A request the server routed to a's subscription before it noticed the
	// connection gone is lost, as with any responder killed mid-flight:
	// the first search may need sending again. After that nothing is lost.
	eventually(t, 10*time.Second, "a search answered after the kill", func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		return bus.Request(ctx, nc, b.Subjects().Registry(bus.RegistrySearch), protocol.SearchRequest{Query: "translate this French letter", Limit: 1}, nil) == nil
	})
	for i := range 20 {
		if got := searchNames(t, nc, b, protocol.SearchRequest{Query: "translate this French letter", Limit: 1}); !slices.Equal(got, []string{"translator"}) {
			t.Fatalf("search %d after one instance was killed: %v", i, got)
		}
		info := call[protocol.AgentInfo](t, nc, b, bus.RegistryGet, protocol.NameRequest{Name: "weather"})
		if !info.Online {
			t.Fatalf("get %d after the kill: weather offline", i)
		}
	}
	register(t, nc, b, card("tides", "Predicts tide times and heights for harbours"))
	call[protocol.HeartbeatReply](t, nc, b, bus.RegistryHeartbeat, protocol.NameRequest{Name: "tides"})
	if got := searchNames(t, nc, b, protocol.SearchRequest{Query: "tide tables for the harbour", Limit: 1}); !slices.Equal(got, []string{"tides"}) {
		t.Fatalf("search for a card registered after the kill: %v", got)
	}
	if c.Len() != len(fleet)+1 {
		t.Fatalf("the surviving instance knows %d agents, want %d", c.Len(), len(fleet)+1)
	}
}
