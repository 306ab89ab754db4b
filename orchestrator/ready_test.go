package orchestrator_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/agentkit/rules"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/orchestrator"
	"github.com/nats-io/nats.go"
)

// registryGets counts the registry.get requests for each name, as a plain
// (non-queue) subscriber beside the registry sees them.
type registryGets struct {
	mu sync.Mutex
	n  map[string]int
}

func watchGets(t *testing.T, w *world) *registryGets {
	t.Helper()
	g := &registryGets{n: map[string]int{}}
	sub, err := w.nc.Subscribe(w.b.Subjects().Registry(bus.RegistryGet), func(m *nats.Msg) {
		var req protocol.NameRequest
		if json.Unmarshal(m.Data, &req) == nil {
			g.mu.Lock()
			g.n[req.Name]++
			g.mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return g
}

func (g *registryGets) count(name string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.n[name]
}

func health(t *testing.T, w *world) protocol.Health {
	t.Helper()
	var h protocol.Health
	if err := requestJSON(t, w, "health", nil, &h); err != nil {
		t.Fatalf("health: %v", err)
	}
	return h
}

// TestGoalServiceOpensOnceExpectedAgentsAreOnline: with Expect, goal.submit
// has no responders and <p>.health says starting (naming whom it waits
// for) until the coordinator and the expected agent are online; then
// health says ready and the first goal concludes.
func TestGoalServiceOpensOnceExpectedAgentsAreOnline(t *testing.T) {
	w := newWorld(t, orchestrator.Config{Expect: []string{"coordinator", "multiplier"}})
	h := health(t, w)
	if h.Ready || h.Status != protocol.HealthStarting || !slices.Equal(h.Waiting, []string{"coordinator", "multiplier"}) {
		t.Fatalf("health before the agents run = %+v, want starting, waiting for coordinator and multiplier", h)
	}
	var reply protocol.SubmitReply
	err := requestJSON(t, w, "goal.submit", protocol.GoalRequest{Goal: "Compute 6 * 7"}, &reply)
	if !errors.Is(err, bus.ErrNoResponders) {
		t.Fatalf("goal.submit before ready: err = %v (reply %+v), want no responders", err, reply)
	}
	runAgents(t, w, orchestrator.Coordinator("coordinator", rules.New(rules.Config{})),
		funcAgent("multiplier", "Multiplies two numbers: computes a product.", []string{"multiplication", "arithmetic"}, multiply))
	waitFor(t, "health to say ready", func() bool { return health(t, w).Ready })
	h = health(t, w)
	if h.Status != protocol.HealthReady || len(h.Waiting) != 0 || h.Since.IsZero() {
		t.Fatalf("health once ready = %+v", h)
	}
	res := w.submitWait(t, protocol.GoalRequest{Goal: "Compute 6 * 7"})
	if res.Status != protocol.GoalConcluded || !strings.Contains(res.Conclusion, "42") {
		t.Fatalf("first goal = %+v, want concluded with 42", res)
	}
}

// multiply computes the product a task names.
func multiply(t agentkit.Task) (string, error) {
	m := mulRE.FindStringSubmatch(t.TaskDesc)
	if m == nil {
		return "", fmt.Errorf("no product in %q", t.TaskDesc)
	}
	a, _ := strconv.Atoi(m[1])
	b, _ := strconv.Atoi(m[2])
	return strconv.Itoa(a * b), nil
}

// TestTeamupWaitsForALauncherStillRegistering: a launcher that answers its
// launch before its registration is through (the race of issue 19) gets
// its team once it registers; a member nobody expects fails at once. The
// launcher is the coordinator, an expected agent: goal.submit refuses any
// other launcher it names that is not registered
// (TestSubmitRefusesNamedAgentsNotThere).
func TestTeamupWaitsForALauncherStillRegistering(t *testing.T) {
	w := newWorld(t, orchestrator.Config{Coordinator: "lead"})
	gets := watchGets(t, w)
	lead := newWireAgent(t, w.b, card("lead", "Leads a team."))
	lead.speak = func(protocol.Chat) *protocol.AgentMessage {
		return &protocol.AgentMessage{Type: protocol.MsgConclusion, Content: "led"}
	}
	lead.listen() // answers launches, not registered yet
	var sub protocol.SubmitReply
	if err := requestJSON(t, w, "goal.submit", protocol.GoalRequest{Goal: "Lead the way", Launcher: "lead"}, &sub); err != nil {
		t.Fatal(err)
	}
	// Team-up asks about lead, finds nobody, and asks again.
	waitFor(t, "team-up to ask the registry about lead twice", func() bool { return gets.count("lead") >= 2 })
	if err := bus.Request(t.Context(), lead.nc, w.b.Subjects().Registry(bus.RegistryRegister), lead.card, nil); err != nil {
		t.Fatal(err)
	}
	var st protocol.GoalStatus
	waitFor(t, "the goal to end", func() bool {
		err := requestJSON(t, w, "goal.get", protocol.GoalIDRequest{GoalID: sub.GoalID}, &st)
		return err == nil && protocol.GoalEnded(st.Status)
	})
	if st.Status != protocol.GoalConcluded || st.Result == nil || st.Result.Conclusion != "led" {
		t.Fatalf("goal with a launcher that registered late: %+v (result %+v)", st, st.Result)
	}

	// A member that is not expected is not waited for. The goal does not
	// name it (goal.submit would refuse it): its launcher teams up with it.
	other := newWireAgent(t, w.b, card("other-lead", "Leads a team with a ghost."))
	other.team = []string{"ghost"}
	other.start(t.Context())
	res := w.submitWait(t, protocol.GoalRequest{Goal: "Lead a ghost", Launcher: "other-lead"})
	if res.Status != protocol.GoalFailed || !strings.Contains(res.Reason, "member ghost is not registered") {
		t.Fatalf("goal with an unknown member = %+v, want failed: member ghost is not registered", res)
	}
	// The watcher hears the registry's requests on a connection of its
	// own, so the last one may reach it after the goal's result.
	waitFor(t, "the watcher to see team-up ask about ghost", func() bool { return gets.count("ghost") >= 1 })
	time.Sleep(100 * time.Millisecond)
	if n := gets.count("ghost"); n != 1 {
		t.Fatalf("team-up asked the registry about ghost %d times, want once", n)
	}
}
