package main

import (
	"context"
	"io"
	"math"
	"strings"
	"testing"
	"time"
)

// TestScaleBenchSmall runs every curve of ioa bench --scale at a tiny size
// and checks that each has a row per size with sane values; it times
// nothing against a limit.
func TestScaleBenchSmall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o := scaleOpts{chats: []int{2, 5}, teams: []int{2, 3}, lengths: []int{3, 30}, agents: []int{3, 6},
		registry: []int{5, 10}, goals: []int{10, 20}, turns: 5, runs: 1, idle: 20 * time.Millisecond}
	curves, err := measureScale(ctx, o, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]int{"team-size": o.teams, "chat-length": o.lengths, "idle-agents": o.agents, "registry": o.registry, "open-chats": o.chats, "goals-run": o.goals}
	if len(curves) != len(want) {
		t.Fatalf("%d curves, want %d", len(curves), len(want))
	}
	for _, c := range curves {
		xs, ok := want[c.name]
		if !ok {
			t.Fatalf("unexpected curve %q", c.name)
		}
		if len(c.rows) != len(xs) {
			t.Fatalf("%s: %d rows for %d sizes", c.name, len(c.rows), len(xs))
		}
		for i, r := range c.rows {
			if len(r) != len(c.cols) {
				t.Fatalf("%s row %d: %d values for %d columns", c.name, i, len(r), len(c.cols))
			}
			for j, v := range r {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					t.Errorf("%s %d %s = %v", c.name, xs[i], c.cols[j].name, v)
				}
				// Latencies, CPU per operation and rates are positive;
				// heap deltas and idle CPU of a tiny run may be anything.
				if (c.cols[j].unit == "µs" || c.cols[j].unit == "cards/s" || c.cols[j].unit == "/s") && v <= 0 {
					t.Errorf("%s %d %s = %v, want > 0", c.name, xs[i], c.cols[j].name, v)
				}
			}
		}
		v := c.verdict()
		if !strings.Contains(v, "x the size") && !strings.Contains(v, "n/a") {
			t.Errorf("%s: verdict %q", c.name, v)
		}
		var sb strings.Builder
		c.print(&sb)
		if svg := c.svg(); !strings.HasPrefix(svg, "<svg") || !strings.Contains(svg, "<polyline") {
			t.Errorf("%s: svg %q", c.name, svg)
		}
	}
}

func TestGrowth(t *testing.T) {
	for _, c := range []struct {
		ys   []float64
		want string
	}{
		{[]float64{100, 110, 120}, "flat"},
		{[]float64{100, 300, 1000}, "sublinear"},
		{[]float64{100, 1000, 10000}, "linear"},
		{[]float64{100, 10000, 1000000}, "worse than linear"},
		{[]float64{100, 110, 1100}, "linear"}, // the steepest step counts
	} {
		if got := growth([]int{10, 100, 1000}, c.ys, false); !strings.HasPrefix(got, c.want) {
			t.Errorf("growth(%v) = %q, want %s", c.ys, got, c.want)
		}
	}
	if got := growth([]int{10, 100}, []float64{1000, 100}, true); !strings.HasPrefix(got, "linear") {
		t.Errorf("a rate falling 10x for 10x the size: %q, want linear", got)
	}
}

// TestBenchGoalsAlone runs the one-goal-alone figures of ioa bench, back
// to back and after an idle pause, on a small run: every goal concludes and
// each phase reports a latency.
func TestBenchGoalsAlone(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env, err := startBenchEnv(ctx, t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer env.close()
	perSec, back, failed, err := env.goalThroughput(ctx, 3, 1)
	if err != nil || failed != 0 {
		t.Fatalf("back to back: %d not concluded, err %v", failed, err)
	}
	if perSec <= 0 || back.p50 <= 0 || back.p99 < back.p50 {
		t.Errorf("back to back: %.1f goals/s, latency %s", perSec, back)
	}
	idle, failed, err := env.goalsAfterIdle(ctx, 3, 10*time.Millisecond)
	if err != nil || failed != 0 {
		t.Fatalf("after idle: %d not concluded, err %v", failed, err)
	}
	if idle.p50 <= 0 || idle.p99 < idle.p50 {
		t.Errorf("after idle: latency %s", idle)
	}
	// A cancelled context ends the idle series with its error.
	done, stop := context.WithCancel(ctx)
	stop()
	if _, _, err := env.goalsAfterIdle(done, 3, time.Millisecond); err == nil {
		t.Error("goalsAfterIdle with a cancelled context: no error")
	}
}
