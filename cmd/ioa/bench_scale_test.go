package main

import (
	"context"
	"errors"
	"io"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/orchestrator"
	"github.com/nats-io/nats.go/jetstream"
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

// testBenchEnv starts the bench's runtime for a test, stopped at its end;
// the context bounds the test to two minutes.
func testBenchEnv(t *testing.T) (context.Context, *benchEnv) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	env, err := startBenchEnv(ctx, t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.close)
	return ctx, env
}

// TestBenchGoalsAlone runs the one-goal-alone figures of ioa bench, back
// to back and after an idle pause, on a small run: every goal concludes and
// each phase reports a latency.
func TestBenchGoalsAlone(t *testing.T) {
	ctx, env := testBenchEnv(t)
	run, err := env.goalThroughput(ctx, 3, 1)
	if err != nil || run.failed != 0 {
		t.Fatalf("back to back: %d not concluded, err %v", run.failed, err)
	}
	if run.perSec <= 0 || run.lat.p50 <= 0 || run.lat.p99 < run.lat.p50 {
		t.Errorf("back to back: %.1f goals/s, latency %s", run.perSec, run.lat)
	}
	if run.sustained != 0 {
		t.Errorf("one goal at a time has no sustained rate, got %.1f/s", run.sustained)
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

// TestSustainedRate checks the rate with every goal in flight: the first
// conc and the last conc to conclude are left out, and a run too short
// for that has none.
func TestSustainedRate(t *testing.T) {
	var ends []time.Duration
	for i := range 10 {
		ends = append(ends, time.Duration(i+1)*100*time.Millisecond)
	}
	// Goals 3 to 8 conclude at 0.3 s to 0.8 s: 5 more in 0.5 s.
	if got := sustainedRate(ends, 2); math.Abs(got-10) > 1e-9 {
		t.Errorf("sustainedRate(2) = %v, want 10", got)
	}
	// A slow start is left out: the first two took 5 s.
	slow := []time.Duration{5 * time.Second, 5 * time.Second}
	for _, e := range ends[2:] {
		slow = append(slow, e+5*time.Second)
	}
	if got := sustainedRate(slow, 2); math.Abs(got-10) > 1e-9 {
		t.Errorf("sustainedRate(2) after a slow start = %v, want 10", got)
	}
	for _, conc := range []int{1, 4, 50} {
		if got := sustainedRate(ends, conc); got != 0 {
			t.Errorf("sustainedRate(%d) of 10 goals = %v, want 0 (no such window)", conc, got)
		}
	}
}

// TestInterleavedTakesTurns checks that each rig makes its n round trips in
// rounds, the rigs one after the other in every round, and that a failing
// step ends the measurement with its error.
func TestInterleavedTakesTurns(t *testing.T) {
	var order []int
	mk := func(id int, d time.Duration) *rig {
		return &rig{step: func() (time.Duration, error) {
			order = append(order, id)
			return d, nil
		}}
	}
	lat, cpu, err := interleaved(10, 3, mk(0, time.Microsecond), mk(1, 2*time.Microsecond))
	if err != nil {
		t.Fatal(err)
	}
	// 10 in 3 rounds: 4, 3 and 3 each, rig 0's block before rig 1's.
	want := []int{0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1}
	if !slices.Equal(order, want) {
		t.Errorf("order of steps %v, want %v", order, want)
	}
	if lat[0].p50 != time.Microsecond || lat[1].p50 != 2*time.Microsecond {
		t.Errorf("p50s %v and %v, want 1µs and 2µs", lat[0].p50, lat[1].p50)
	}
	if len(cpu) != 2 || cpu[0] < 0 || cpu[1] < 0 {
		t.Errorf("cpu per round trip %v", cpu)
	}
	// More rounds than round trips: one round trip a round.
	order = nil
	if _, _, err := interleaved(2, 20, mk(0, 1), mk(1, 1)); err != nil || !slices.Equal(order, []int{0, 1, 0, 1}) {
		t.Errorf("2 round trips in 20 rounds: order %v, err %v", order, err)
	}
	boom := errors.New("boom")
	calls := 0
	failing := &rig{step: func() (time.Duration, error) {
		if calls++; calls == 3 {
			return 0, boom
		}
		return 1, nil
	}}
	if _, _, err := interleaved(10, 2, mk(0, 1), failing); !errors.Is(err, boom) {
		t.Errorf("a failing step: err %v, want %v", err, boom)
	}
}

// TestTimeTurnsSmall runs the turn figure of ioa bench on a few turns: the
// raw request-reply, the floor and the refereed turn each make every round
// trip, and a turn costs more than the raw request-reply under it.
func TestTimeTurnsSmall(t *testing.T) {
	ctx, env := testBenchEnv(t)
	lat, cpu, err := env.timeTurns(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	// CPU is summed from the process's rusage: a block of a few cheap round
	// trips may read as 0 where the kernel accounts CPU in ticks.
	for i, name := range []string{"raw", "floor", "logged floor", "turn"} {
		if lat[i].p50 <= 0 || lat[i].p99 < lat[i].p50 || cpu[i] < 0 {
			t.Errorf("%s: latency %s, CPU %v per round trip", name, lat[i], cpu[i])
		}
	}
	if cpu[0]+cpu[1]+cpu[2]+cpu[3] <= 0 {
		t.Errorf("no CPU measured for 240 round trips: %v", cpu)
	}
	if lat[3].p50 <= lat[0].p50 {
		t.Errorf("a refereed turn (%v) took no longer than a raw request-reply (%v)", lat[3].p50, lat[0].p50)
	}
}

// TestLoggedFloorLogsAsTheReferee checks the bench's second floor against
// the referee itself: its log entry carries the headers a turn's entry
// carries, with a mark and message id of the same form, and a body of
// about the same size.
func TestLoggedFloorLogsAsTheReferee(t *testing.T) {
	ctx, env := testBenchEnv(t)
	last := func(stream string) *jetstream.RawStreamMsg {
		t.Helper()
		st, err := env.b.JetStream().Stream(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := st.GetMsg(ctx, info.State.LastSeq)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	turn, err := env.turnRig(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer turn.close()
	floor, err := env.floorRig(ctx, "logged", true)
	if err != nil {
		t.Fatal(err)
	}
	defer floor.close()
	for _, g := range []*rig{turn, floor, turn, floor} {
		if _, err := g.step(); err != nil {
			t.Fatal(err)
		}
	}
	real, ours := last(bus.StreamChats), last("BENCH_FLOOR_LOGGED")
	for _, h := range []string{orchestrator.MarkHeader, jetstream.MsgIDHeader, jetstream.ExpectedLastSubjSeqHeader} {
		if real.Header.Get(h) == "" || ours.Header.Get(h) == "" {
			t.Errorf("header %s: the referee's entry %q, the floor's %q", h, real.Header.Get(h), ours.Header.Get(h))
		}
	}
	if len(ours.Header.Get(orchestrator.MarkHeader)) != len(real.Header.Get(orchestrator.MarkHeader)) {
		t.Errorf("marks: the referee's %q, the floor's %q", real.Header.Get(orchestrator.MarkHeader), ours.Header.Get(orchestrator.MarkHeader))
	}
	if id := ours.Header.Get(jetstream.MsgIDHeader); id != "cbenchfloor01.2" || ours.Header.Get(jetstream.ExpectedLastSubjSeqHeader) == "0" {
		t.Errorf("the floor's second entry: message id %q, expected last sequence %q", id, ours.Header.Get(jetstream.ExpectedLastSubjSeqHeader))
	}
	if n, want := len(ours.Data), len(real.Data); n < want*3/4 || n > want*5/4 {
		t.Errorf("the floor logs %d bytes an entry, the referee %d: %s", n, want, ours.Data)
	}
}

// TestBenchRefusesBadSizes checks that every size flag of ioa bench is
// checked before anything is measured: the error names the flag and the
// bench prints no progress.
func TestBenchRefusesBadSizes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--turns", "0"}, "--turns: 0 is not a positive number"},
		{[]string{"--goals", "-3"}, "--goals: -3 is not a positive number"},
		{[]string{"--concurrency", "0"}, "--concurrency"},
		{[]string{"--searches", "0"}, "--searches"},
		{[]string{"--idle-agents", "0"}, "--idle-agents"},
		{[]string{"--open-chats", "-1"}, "--open-chats"},
		{[]string{"--search-sizes", "10k"}, `--search-sizes: "10k" is not a positive number`},
		{[]string{"--search-sizes", ","}, "--search-sizes: no sizes"},
		{[]string{"--scale", "--runs", "0"}, "--runs: 0 is not a positive number"},
		{[]string{"--scale", "--scale-turns", "-1"}, "--scale-turns"},
	} {
		_, stderr, err := runCLI(t, newBenchCmd(), append([]string{"bench"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("bench %v: err %v, want one with %q", tc.args, err, tc.want)
		}
		if stderr != "" {
			t.Errorf("bench %v measured before refusing: %q", tc.args, stderr)
		}
	}
}

// TestMemRow checks a memory row: a heap that did not grow is no figure,
// and its reference says which flag to raise.
func TestMemRow(t *testing.T) {
	if r := memRow("m", 2048, "200 chats of 2", "--open-chats"); r.value != "2.0 KiB" || r.reference != "200 chats of 2" {
		t.Errorf("memRow(2048) = %+v", r)
	}
	for _, b := range []float64{0, -68198} {
		r := memRow("m", b, "5 chats of 2", "--open-chats")
		if r.value != "n/a" {
			t.Errorf("memRow(%v).value = %q, want n/a", b, r.value)
		}
		if !strings.Contains(r.reference, "5 chats of 2") || !strings.Contains(r.reference, "--open-chats") {
			t.Errorf("memRow(%v).reference = %q", b, r.reference)
		}
	}
}
