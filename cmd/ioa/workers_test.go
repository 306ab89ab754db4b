package main

import (
	"strings"
	"testing"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/protocol"
)

// An agent that teams up for larger tasks and does one-step tasks with a
// built-in (the demo's trip-planner) refuses in its own name: without it,
// "Plan a 3 day trip to Rome" failed with the calculator's words alone.
func TestTeamingAgentsBuiltinRefusesInItsName(t *testing.T) {
	cfg := demoConfig(t)
	run := func(name, task string) (agentkit.Result, error) {
		t.Helper()
		i := -1
		for j, a := range cfg.Agents {
			if a.Name == name {
				i = j
			}
		}
		if i < 0 {
			t.Fatalf("no agent %s in the demo config", name)
		}
		w, err := workerFor(cfg, cfg.Agents[i], t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return w.Run(t.Context(), agentkit.Task{Task: protocol.Task{TaskID: "t1", TaskDesc: task}})
	}
	const noExpr = `no arithmetic expression found in "Plan a 3 day trip to Rome"`
	_, err := run("trip-planner", "Plan a 3 day trip to Rome")
	want := "trip-planner teams up for tasks of several steps and does one-step tasks with the built-in calculator worker: " + noExpr
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("trip-planner: %v, want it to start %q", err, want)
	}
	if _, err := run("calculator", "Plan a 3 day trip to Rome"); err == nil || !strings.HasPrefix(err.Error(), noExpr) {
		t.Errorf("calculator: %v, want it to start %q", err, noExpr)
	}
	if res, err := run("trip-planner", "Compute 19.5 * 4"); err != nil || !strings.Contains(res.Conclusion, "78") {
		t.Errorf("trip-planner on arithmetic: %+v, %v", res, err)
	}
}
