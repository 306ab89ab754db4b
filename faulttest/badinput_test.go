package faulttest

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/internal/fuzzworker"
	"github.com/nats-io/nats.go"
)

// endpoint is a request subject and what its bad bodies are built from.
type endpoint struct {
	name    string
	subject string
	key     string // a field of the request; strKey says it takes a string
	strKey  bool
	// empty is the status an empty body gets: 0 for a success (an empty
	// body means {} there), else the error status.
	empty int
	// text: any body that does not start with '{' is a plain-text goal.
	text bool
}

func endpoints(subj bus.Subjects) []endpoint {
	reg := func(e string) string { return subj.Registry(e) }
	goal := func(e string) string { return subj.Goal(e) }
	out, _ := subj.Outbox("badin", "c1")
	hist, _ := subj.History("badin", "c1")
	invite, _ := subj.AgentInviteSubject("coordinator")
	launch, _ := subj.AgentLaunchSubject("coordinator")
	return []endpoint{
		{"registry.register", reg(bus.RegistryRegister), "name", true, 400, false},
		{"registry.deregister", reg(bus.RegistryDeregister), "name", true, 400, false},
		{"registry.heartbeat", reg(bus.RegistryHeartbeat), "name", true, 400, false},
		{"registry.get", reg(bus.RegistryGet), "name", true, 400, false},
		{"registry.list", reg(bus.RegistryList), "limit", false, 0, false},
		{"registry.search", reg(bus.RegistrySearch), "query", true, 400, false},
		{"goal.submit", goal(bus.GoalSubmit), "goal", true, 400, true},
		{"goal.get", goal(bus.GoalGet), "goal_id", true, 400, false},
		{"goal.list", goal(bus.GoalList), "limit", false, 0, false},
		{"goal.cancel", goal(bus.GoalCancel), "goal_id", true, 400, false},
		{"teamup", subj.Teamup(), "goal_id", true, 400, false},
		{"outbox", out, "id", true, 400, false},
		{"history", hist, "after_seq", false, 404, false}, // {} on an unknown chat
		{"invite", invite, "comm_id", true, 400, false},
		{"launch", launch, "goal_id", true, 400, false},
	}
}

// badBody is a malformed body and the error status it must get.
type badBody struct {
	name   string
	body   []byte
	status int
	object bool // starts with '{' (a plain-text goal otherwise)
}

func badBodies(e endpoint) []badBody {
	wrong := `5`
	if !e.strKey {
		wrong = `"five"`
	}
	deep := strings.Repeat(`{"a":`, 40) + "1" + strings.Repeat("}", 40)
	return []badBody{
		{"empty", nil, e.empty, false},
		{"blank", []byte(" \n\t"), e.empty, false},
		{"null", []byte("null"), 400, false},
		{"array", []byte(`[]`), 400, false},
		{"array of objects", []byte(`[{"` + e.key + `":1}]`), 400, false},
		{"string", []byte(`"text"`), 400, false},
		{"wrong type", []byte(`{"` + e.key + `":` + wrong + `}`), 400, true},
		{"duplicate keys", []byte(`{"` + e.key + `":1,"` + e.key + `":2}`), 400, true},
		{"invalid UTF-8", []byte("{\"" + e.key + "\":\"\xff\xfe\"}"), 400, true},
		{"invalid UTF-8 key", []byte("{\"\xc3\x28\":1}"), 400, true},
		{"40 deep", []byte(`{"` + e.key + `":` + deep + `}`), 400, true},
		{"1e400", []byte(`{"` + e.key + `":1e400}`), 400, true},
		{"truncated", []byte(`{"` + e.key + `":`), 400, true},
		{"trailing data", []byte(`{"` + e.key + `":1} {}`), 400, true},
		{"over 64 KiB", []byte(`{"` + e.key + `":"` + strings.Repeat("x", 70<<10) + `"}`), 413, true},
	}
}

// counts is what bad input must not change.
type counts struct{ goals, agents, chatMsgs int }

func snapshot(t *testing.T, s *stack) counts {
	t.Helper()
	var gl protocol.GoalListReply
	if err := request(s.nc, s.subj.Goal(bus.GoalList), protocol.GoalListRequest{Status: "all", Limit: 1000}, &gl); err != nil {
		t.Fatal(err)
	}
	var rl protocol.ListReply
	if err := request(s.nc, s.subj.Registry(bus.RegistryList), protocol.ListRequest{Limit: 1000}, &rl); err != nil {
		t.Fatal(err)
	}
	st, err := s.b.JetStream().Stream(t.Context(), bus.StreamChats)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return counts{goals: len(gl.Goals), agents: rl.Total, chatMsgs: int(info.State.Msgs)}
}

// checkReply checks a reply against the error convention: status in the
// Nats-Service-Error-Code header, the code in the JSON body.
func checkReply(m *nats.Msg, status int) string {
	if status == 0 {
		if bus.ReplyError(m) != nil {
			return "want success, got error " + m.Header.Get(bus.HeaderErrorCode) + " " + string(m.Data)
		}
		return ""
	}
	if m.Header == nil || m.Header.Get(bus.HeaderError) == "" {
		return "want an error reply, got success: " + trunc(m.Data)
	}
	if got := m.Header.Get(bus.HeaderErrorCode); got != strconv.Itoa(status) {
		return "status " + got + ", want " + strconv.Itoa(status) + ": " + m.Header.Get(bus.HeaderError)
	}
	var body protocol.ErrorBody
	if err := json.Unmarshal(m.Data, &body); err != nil || body.Error.Code == "" {
		return "error body without a code: " + trunc(m.Data)
	}
	return ""
}

func trunc(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "..."
	}
	return string(b)
}

// TestFaultBadInputEverySubject sends malformed bodies to every request
// subject: each gets the documented error reply, and nothing changes.
func TestFaultBadInputEverySubject(t *testing.T) {
	s := newStack(t, stackOpts{coordinator: true})
	// registry.list reads the registry's view, which may trail
	// registry.get by a moment after a registration.
	waitFor(t, 10*time.Second, "registry.list to list the coordinator", func() bool { return snapshot(t, s).agents == 1 })
	before := snapshot(t, s)
	n := 0
	for _, e := range endpoints(s.subj) {
		for _, bb := range badBodies(e) {
			if e.text && !bb.object && len(strings.TrimSpace(string(bb.body))) > 0 && bb.name != "null" {
				// docs/protocol.md section 6: such a body is a plain-text goal.
				continue
			}
			t.Run(e.name+"/"+bb.name, func(t *testing.T) {
				m, err := s.nc.Request(e.subject, bb.body, 10*time.Second)
				if err != nil {
					t.Fatalf("no reply: %v", err)
				}
				if problem := checkReply(m, bb.status); problem != "" {
					t.Error(problem)
				}
			})
			n++
		}
	}
	after := snapshot(t, s)
	t.Logf("%d bad requests on %d subjects; before %+v after %+v", n, len(endpoints(s.subj)), before, after)
	if after != before {
		t.Errorf("bad input changed the state: before %+v, after %+v", before, after)
	}
}

// FuzzRequestSubjects sends fuzzed bodies to request subjects on one
// shared server: a reply always arrives, and an error reply follows the
// convention.
func FuzzRequestSubjects(f *testing.F) {
	fuzzworker.Capture(f)
	s := newStack(f, stackOpts{coordinator: true})
	subj := s.subj
	out, _ := subj.Outbox("fuzz", "c1")
	hist, _ := subj.History("fuzz", "c1")
	invite, _ := subj.AgentInviteSubject("coordinator")
	subjects := []string{
		subj.Registry(bus.RegistryGet), subj.Registry(bus.RegistryList), subj.Registry(bus.RegistrySearch),
		subj.Registry(bus.RegistryHeartbeat), subj.Goal(bus.GoalGet), subj.Goal(bus.GoalList),
		subj.Goal(bus.GoalCancel), subj.Teamup(), out, hist, invite,
	}
	for i := range subjects {
		f.Add(uint8(i), []byte(`{}`))
		f.Add(uint8(i), []byte(`{"name":"x","goal_id":"g1","comm_id":"c1","id":"m1","type":"discussion","query":"q"}`))
		f.Add(uint8(i), []byte(`null`))
	}
	f.Add(uint8(0), []byte("{\"name\":\"\xff\"}"))
	f.Add(uint8(1), []byte(`{"limit":1e400}`))
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		subject := subjects[int(which)%len(subjects)]
		// Under the fuzz worker's own 10 s limit, past which it panics
		// without saying why.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		m, err := s.nc.RequestWithContext(ctx, subject, body)
		if err != nil {
			t.Fatalf("%s: no reply to %q: %v", subject, trunc(body), err)
		}
		if m.Header != nil && m.Header.Get(bus.HeaderError) != "" {
			if problem := checkReply(m, mustAtoi(m.Header.Get(bus.HeaderErrorCode))); problem != "" {
				t.Fatalf("%s: %s", subject, problem)
			}
		}
	})
}

func mustAtoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil || n == 0 {
		return -1
	}
	return n
}
