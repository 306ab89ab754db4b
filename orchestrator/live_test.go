package orchestrator_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/internal/stacktest"
	"github.com/ioa-nats/ioa/orchestrator"
)

// Start-up and `goal.list status=running` read the index of live goals
// (live.<id> keys in ioa_goals), not every goal kept. A bucket written
// without the index (an older version) is indexed once at start-up, so its
// running goals are resumed; goals that end leave the index.
func TestLiveGoalIndex(t *testing.T) {
	b := startBusAndRegistry(t)
	first := startInstance(t, b, orchestrator.Config{}, nil)
	st := &stacktest.Stack{Bus: b, URL: b.ClientURL()}
	release := make(chan struct{})
	st.RunAgents(t, nil, funcAgent("stepper", "Does the numbered steps of jobs.", []string{"steps"},
		func(task agentkit.Task) (string, error) {
			if strings.HasPrefix(task.TaskDesc, "Do step nine") {
				<-release
			}
			return "done", nil
		}))
	st.WaitOnline(t, "coordinator")
	nc := b.Conn()
	submit := func(goal string) string {
		var r protocol.SubmitReply
		if err := bus.Request(t.Context(), nc, b.Subjects().Goal(bus.GoalSubmit), protocol.GoalRequest{Goal: goal, Team: []string{"stepper"}}, &r); err != nil {
			t.Fatal(err)
		}
		return r.GoalID
	}
	get := func(id string) protocol.GoalStatus {
		var g protocol.GoalStatus
		if err := bus.Request(t.Context(), nc, b.Subjects().Goal(bus.GoalGet), protocol.GoalIDRequest{GoalID: id}, &g); err != nil {
			t.Fatal(err)
		}
		return g
	}
	var done []string
	for i := range 3 {
		done = append(done, submit(fmt.Sprintf("Do step one of job %d.", i)))
	}
	waiting := submit("Do step nine of job 9.")
	waitFor(t, "three goals to end", func() bool {
		for _, id := range done {
			if !protocol.GoalEnded(get(id).Status) {
				return false
			}
		}
		return true
	})
	kv, err := b.JetStream().KeyValue(t.Context(), bus.BucketGoals)
	if err != nil {
		t.Fatal(err)
	}
	liveKeys := func() []string {
		keys, err := kv.ListKeysFiltered(t.Context(), "live.*")
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for k := range keys.Keys() {
			out = append(out, k)
		}
		return out
	}
	// An ended goal leaves the index after its record says ended (and
	// after its submitter is answered), so the index is waited for.
	waitFor(t, "the index to hold only the running goal, live."+waiting, func() bool {
		got := liveKeys()
		return len(got) == 1 && got[0] == "live."+waiting
	})
	var list protocol.GoalListReply
	if err := bus.Request(t.Context(), nc, b.Subjects().Goal(bus.GoalList), protocol.GoalListRequest{Status: "running"}, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Goals) != 1 || list.Goals[0].GoalID != waiting {
		t.Errorf("running goals %+v, want only %s", list.Goals, waiting)
	}
	// As an older version left it: no index at all. The next instance
	// indexes the bucket and resumes the running goal.
	first.orch.Kill()
	first.stop()
	<-first.done
	for _, k := range append(liveKeys(), "_ioa.live-index") {
		if err := kv.Purge(t.Context(), k); err != nil {
			t.Fatal(err)
		}
	}
	startInstance(t, b, orchestrator.Config{}, nil)
	waitFor(t, "the index to be rebuilt", func() bool {
		got := liveKeys()
		return len(got) == 1 && got[0] == "live."+waiting
	})
	close(release)
	waitFor(t, "the running goal to end", func() bool { return protocol.GoalEnded(get(waiting).Status) })
	if g := get(waiting); g.Status != protocol.GoalConcluded {
		t.Errorf("the resumed goal ended %s: %+v", g.Status, g.Result)
	}
	waitFor(t, "the index to empty", func() bool { return len(liveKeys()) == 0 })
}
