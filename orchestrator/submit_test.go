package orchestrator_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/internal/stacktest"
	"github.com/ioa-nats/ioa/orchestrator"
	"github.com/ioa-nats/ioa/registry"
)

// goalKeys lists every key of the goals bucket: the goal records and their
// live index.
func goalKeys(t *testing.T, w *world) []string {
	t.Helper()
	keys, err := w.goalsBucket(t).ListKeys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for k := range keys.Keys() {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestSubmitRefusesNamedAgentsNotThere: goal.submit refuses a goal whose
// team or launcher names an agent the registry does not know (404) or
// lists as offline (409), with or without wait, before it records anything.
// A goal that names nobody, or only the default launcher, costs no
// registry request.
func TestSubmitRefusesNamedAgentsNotThere(t *testing.T) {
	const ttl = 300 * time.Millisecond
	s := stacktest.Start(t, stacktest.Options{Registry: registry.Config{HeartbeatTTL: ttl}})
	w := &world{Stack: s, b: s.Bus, nc: s.Bus.Conn()}
	// Registered and never heartbeating: offline after ttl.
	if err := bus.Request(t.Context(), w.nc, w.b.Subjects().Registry(bus.RegistryRegister), card("sleeper", "Registers, then sleeps."), nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "sleeper to be offline", func() bool {
		var info protocol.AgentInfo
		err := bus.Request(t.Context(), w.nc, w.b.Subjects().Registry(bus.RegistryGet), protocol.NameRequest{Name: "sleeper"}, &info)
		return err == nil && !info.Online
	})
	before := goalKeys(t, w)

	for _, c := range []struct {
		name string
		req  protocol.GoalRequest
		want *protocol.Error
		msg  string
	}{
		{"unregistered team member", protocol.GoalRequest{Team: []string{"ghost"}}, protocol.ErrNotFound, `no agent named "ghost" is registered`},
		{"unregistered launcher", protocol.GoalRequest{Launcher: "ghost"}, protocol.ErrNotFound, `no agent named "ghost" is registered`},
		{"unregistered, waiting", protocol.GoalRequest{Team: []string{"ghost"}, Wait: true}, protocol.ErrNotFound, `no agent named "ghost" is registered`},
		{"unregistered, with a key", protocol.GoalRequest{Team: []string{"ghost"}, IdempotencyKey: "k-1"}, protocol.ErrNotFound, `no agent named "ghost" is registered`},
		{"offline team member", protocol.GoalRequest{Team: []string{"sleeper"}}, protocol.ErrConflict, `agent "sleeper" is registered but offline (last seen `},
		{"offline launcher", protocol.GoalRequest{Launcher: "sleeper"}, protocol.ErrConflict, `agent "sleeper" is registered but offline (last seen `},
		{"offline, waiting", protocol.GoalRequest{Launcher: "sleeper", Wait: true}, protocol.ErrConflict, `agent "sleeper" is registered but offline`},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.req.Goal = "Compute 6 * 7"
			// A waiting submit that was accepted would wait for the goal.
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			var raw json.RawMessage
			err := bus.Request(ctx, w.nc, w.b.Subjects().Goal(bus.GoalSubmit), c.req, &raw)
			pe := protocol.AsError(err)
			if !errors.Is(err, c.want) || pe.Status != c.want.Status || !strings.HasPrefix(pe.Message, c.msg) {
				t.Fatalf("submit %+v: err = %v (status %d), reply %s; want %d %s: %s…", c.req, err, pe.Status, raw, c.want.Status, c.want.Code, c.msg)
			}
		})
	}
	if after := goalKeys(t, w); !slices.Equal(after, before) {
		t.Fatalf("refused submits wrote to the goals bucket: keys %q, were %q", after, before)
	}
	var list protocol.GoalListReply
	if err := bus.Request(t.Context(), w.nc, w.b.Subjects().Goal(bus.GoalList), protocol.GoalListRequest{}, &list); err != nil || len(list.Goals) != 0 {
		t.Fatalf("goal.list after refused submits: %+v, %v; want none", list.Goals, err)
	}

	// Nobody named, or the default launcher named: no registry request.
	gets := watchGets(t, w)
	for _, req := range []protocol.GoalRequest{{Goal: "Compute 6 * 7"}, {Goal: "Compute 6 * 8", Launcher: "coordinator"}} {
		var sub protocol.SubmitReply
		if err := bus.Request(t.Context(), w.nc, w.b.Subjects().Goal(bus.GoalSubmit), req, &sub); err != nil || sub.Status != protocol.GoalAccepted {
			t.Fatalf("submit %+v: %+v, %v; want accepted", req, sub, err)
		}
	}
	time.Sleep(100 * time.Millisecond) // a request would reach the watcher by now
	gets.mu.Lock()
	defer gets.mu.Unlock()
	if len(gets.n) != 0 {
		t.Fatalf("goals that name nobody asked the registry about %v", gets.n)
	}
}

// TestSubmitReplySaysTheTimeoutInForce: goal.submit's reply carries the
// goal's timeout, a larger one asked for lowered to limits.goal_timeout, in
// the same encoding as GoalStatus.timeout; so does the reply to a submit
// sent again with its idempotency key.
func TestSubmitReplySaysTheTimeoutInForce(t *testing.T) {
	const limit = 2 * time.Minute
	w := newWorld(t, orchestrator.Config{GoalTimeout: limit})
	submit := func(req protocol.GoalRequest) (protocol.SubmitReply, map[string]any) {
		t.Helper()
		var raw json.RawMessage
		if err := bus.Request(t.Context(), w.nc, w.b.Subjects().Goal(bus.GoalSubmit), req, &raw); err != nil {
			t.Fatalf("submit %+v: %v", req, err)
		}
		var sub protocol.SubmitReply
		var fields map[string]any
		if err := json.Unmarshal(raw, &sub); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &fields); err != nil {
			t.Fatal(err)
		}
		return sub, fields
	}
	for _, c := range []struct {
		asked, want time.Duration
	}{
		{2 * time.Hour, limit}, // clamped
		{time.Minute, time.Minute},
		{0, limit}, // the default
	} {
		sub, fields := submit(protocol.GoalRequest{Goal: "Compute 6 * 7", Timeout: protocol.Duration(c.asked)})
		if sub.Timeout.D() != c.want || fields["timeout"] != c.want.String() {
			t.Errorf("timeout %s asked: reply %v, want timeout %s", c.asked, fields, c.want)
		}
		st := goalGet(t, w, sub.GoalID)
		if st.Timeout != sub.Timeout {
			t.Errorf("goal %s has timeout %s, its submit reply said %s", sub.GoalID, st.Timeout, sub.Timeout)
		}
	}
	req := protocol.GoalRequest{Goal: "Compute 6 * 9", Timeout: protocol.Duration(time.Hour), IdempotencyKey: "k-timeout"}
	first, _ := submit(req)
	again, _ := submit(req)
	if again.GoalID != first.GoalID || again.Timeout.D() != limit {
		t.Errorf("sent again with its key: %+v, want %s with timeout %s", again, first.GoalID, limit)
	}
}
