package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/configs"
)

// TestFirstGoalAfterStartConcludes starts what `ioa serve --config
// configs/demo.yaml` starts, again and again, and submits a goal the moment
// the goal subject answers: it must conclude every time (issue 19: the goal
// service used to answer before the coordinator had registered). The last
// starts reuse one data dir, as a restart does.
func TestFirstGoalAfterStartConcludes(t *testing.T) {
	const fresh, restarts = 12, 4
	dir := t.TempDir()
	for i := range fresh + restarts {
		data := filepath.Join(dir, fmt.Sprint(i))
		if i >= fresh {
			data = filepath.Join(dir, fmt.Sprint(fresh-1))
		}
		firstGoal(t, data, i)
	}
}

func firstGoal(t *testing.T, data string, i int) {
	t.Helper()
	cfg, err := configs.LoadOver(nil, configs.DemoYAML)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Bus.DataDir, cfg.Bus.Listen = data, bus.NoListen
	st, err := startStack(t.Context(), cfg, stackOptions{services: true, sandbox: t.TempDir()}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("start %d: %v", i, err)
	}
	defer st.shutdown()
	nc, subj := st.bus.Conn(), st.bus.Subjects()
	// Ask until the goal service answers; no responders means not yet.
	probes := 0
	for {
		probes++
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		var list protocol.GoalListReply
		err := bus.Request(ctx, nc, subj.Goal(bus.GoalList), protocol.GoalListRequest{}, &list)
		cancel()
		if err == nil {
			break
		}
		if !errors.Is(err, bus.ErrNoResponders) {
			t.Fatalf("start %d: goal.list: %v", i, err)
		}
		time.Sleep(2 * time.Millisecond) // a pause between probes, not a deadline
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var res protocol.GoalResult
	if err := bus.Request(ctx, nc, subj.Goal(bus.GoalSubmit), protocol.GoalRequest{Goal: "Compute 6 * 7", Wait: true}, &res); err != nil {
		t.Fatalf("start %d: submit: %v", i, err)
	}
	if res.Status != protocol.GoalConcluded || !strings.Contains(res.Conclusion, "42") {
		t.Fatalf("start %d: first goal = %+v, want concluded with 42", i, res)
	}
	var h protocol.Health
	if err := bus.Request(ctx, nc, subj.Health(), nil, &h); err != nil || !h.Ready {
		t.Fatalf("start %d: health = %+v, %v; want ready", i, h, err)
	}
	t.Logf("start %d: goal service answered after %d probes; first goal %s in %s", i, probes, res.Status, res.Elapsed)
}
