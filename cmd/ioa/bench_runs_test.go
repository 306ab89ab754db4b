package main

import (
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestMedianRun(t *testing.T) {
	for _, tc := range []struct {
		keys         []float64
		higherBetter bool
		want         int // index of the run picked
	}{
		{[]float64{5}, false, 0},
		{[]float64{3, 1, 2}, false, 2},
		{[]float64{1, 3, 2}, true, 2},
		{[]float64{2, 2, 9}, false, 1},    // ties keep run order
		{[]float64{4, 1, 3, 2}, false, 2}, // even: the worse of the middle two, 3 for a latency
		{[]float64{4, 1, 3, 2}, true, 3},  // and 2 for a rate
	} {
		runs := make([]int, len(tc.keys))
		for i := range runs {
			runs[i] = i
		}
		got, keys := medianRun(runs, func(i int) float64 { return tc.keys[i] }, tc.higherBetter)
		if got != tc.want {
			t.Errorf("medianRun(%v, higherBetter %v) picked run %d, want %d", tc.keys, tc.higherBetter, got, tc.want)
		}
		if !slices.Equal(keys, tc.keys) {
			t.Errorf("medianRun(%v) keys %v, want them in run order", tc.keys, keys)
		}
	}
}

// run is a timedRun whose figures all derive from one number, so a row
// shows which run it came from.
func run(turnUS, rawUS int, perSec float64, soloMS int) timedRun {
	us := func(n int) time.Duration { return time.Duration(n) * time.Microsecond }
	return timedRun{
		raw: latencies{us(rawUS), us(2 * rawUS)}, floor: latencies{us(4 * rawUS), us(8 * rawUS)},
		turn: latencies{us(turnUS), us(3 * turnUS)}, turnCPU: us(turnUS + 1), floorCPU: us(rawUS + 1),
		load:       goalRun{perSec: perSec, sustained: perSec, lat: latencies{time.Second, 2 * time.Second}},
		solo:       goalRun{perSec: 1, lat: latencies{time.Duration(soloMS) * time.Millisecond, time.Duration(2*soloMS) * time.Millisecond}, turns: span{4, soloMS + 2}},
		goalCPU:    time.Duration(perSec) * time.Microsecond,
		goalStores: perSec / 10,
		afterIdle:  latencies{5 * time.Millisecond, 9 * time.Millisecond}, idlePause: 20 * time.Millisecond,
	}
}

// Each row comes whole from the run whose headline figure is the median:
// its value, its references and its verdict.
func TestTimedRowsFromMedianRuns(t *testing.T) {
	runs := []timedRun{run(120, 20, 480, 4), run(100, 20, 520, 2), run(160, 20, 610, 3)}
	rows := timedRows(runs, 1000, 50)
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 3", len(rows))
	}
	turn, goals, solo := rows[0], rows[1], rows[2]
	// Ratios 6.0, 5.0, 8.0: the median is the first run's 6.0x, which meets "<= 6x".
	if turn.value != "120 µs / 360 µs" || turn.verdict != "ok (6.0x)" {
		t.Errorf("turn row %q %q, want the first run's 120 µs at 6.0x", turn.value, turn.verdict)
	}
	if !strings.HasPrefix(turn.reference, "median of 3 runs (6.0x, 5.0x, 8.0x); raw NATS req-reply 20 µs") ||
		!strings.Contains(turn.reference, "CPU 121 µs/turn") {
		t.Errorf("turn reference %q", turn.reference)
	}
	// Rates 480, 520, 610: the second run's 520/s.
	if goals.value != "520/s" || goals.verdict != "ok" || !strings.HasPrefix(goals.reference, "median of 3 runs (480/s, 520/s, 610/s); ") ||
		!strings.Contains(goals.reference, "CPU 520 µs/goal") || !strings.HasSuffix(goals.reference, "allocated/goal, 52.0 JetStream stores/goal") {
		t.Errorf("goals row %+v", goals)
	}
	// Solo 4, 2, 3 ms: the third run's 3 ms, which meets "<= 3 ms".
	if solo.value != "3.00 ms / 6.00 ms" || solo.verdict != "ok" || !strings.HasPrefix(solo.reference, "median of 3 runs (p50 4.00 ms, 2.00 ms, 3.00 ms); ") ||
		!strings.Contains(solo.reference, "; 4–5 turns, 3 tasks;") {
		t.Errorf("solo row %+v", solo)
	}

	// A goal alone that failed in any run fails the row, whichever run is
	// the median; a slower median misses the target.
	runs[0].failedIdle = 1
	runs[2].solo.lat.p50 = 5 * time.Millisecond
	if r := timedRows(runs, 1000, 50)[2]; r.verdict != "MISSED" || !strings.Contains(r.reference, "1 not concluded in all") || r.value != "4.00 ms / 8.00 ms" {
		t.Errorf("solo row with a failure %+v", r)
	}
	// Likewise a goal under load that did not conclude in a run other than
	// the median's (the second run, 520/s) fails the goals/s row.
	runs[2].load.failed = 2
	if r := timedRows(runs, 1000, 50)[1]; r.verdict != "MISSED" || r.value != "520/s" || !strings.Contains(r.reference, "1000 goals a run, 2 not concluded in all") {
		t.Errorf("goals row with a failure in another run %+v", r)
	}

	// Stores that were not counted are not shown.
	runs[1].goalStores = 0
	if r := timedRows(runs, 1000, 50)[1]; strings.Contains(r.reference, "stores") {
		t.Errorf("goals row without a count of stores: %q", r.reference)
	}

	// One run: the row is that run's, with no note.
	one := timedRows(runs[1:2], 1000, 50)
	if one[0].value != "100 µs / 300 µs" || one[0].verdict != "ok (5.0x)" || strings.Contains(one[0].reference, "median") {
		t.Errorf("one run: turn row %+v", one[0])
	}
	// A raw request-reply of 0 meets no ratio.
	if r := timedRows([]timedRun{run(100, 0, 600, 2)}, 1000, 50)[0]; !strings.HasPrefix(r.verdict, "MISSED") {
		t.Errorf("turn row without a raw figure: %+v", r)
	}
}

func TestSearchRowFromMedianRun(t *testing.T) {
	ms := func(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }
	runs := []searchRun{{latencies{ms(1), ms(6)}, ms(2)}, {latencies{ms(2), ms(4)}, ms(3)}, {latencies{ms(3), ms(5.5)}, ms(4)}}
	r := searchRow(10000, 1500*time.Millisecond, runs)
	if r.value != "3.00 ms / 5.50 ms" || r.verdict != "MISSED" || r.target != "p99 <= 5ms" {
		t.Errorf("search row %+v, want the third run's (p99 5.5 ms, the median) against 5 ms", r)
	}
	if !strings.HasPrefix(r.reference, "median of 3 runs (p99 6.00 ms, 4.00 ms, 5.50 ms); index built in 1.5s; CPU 4.00 ms/search") {
		t.Errorf("search reference %q", r.reference)
	}
	if r := searchRow(100000, time.Second, runs); r.verdict != "ok" || r.target != "p99 <= 20ms" {
		t.Errorf("search row at 100k: %+v", r)
	}
}

// TestTimeRunSmall measures the timed figures twice on a small run and
// makes their rows: every figure was measured.
func TestTimeRunSmall(t *testing.T) {
	ctx, env := testBenchEnv(t)
	var runs []timedRun
	for range 2 {
		r, err := env.timeRun(ctx, 40, 20, 5, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if r.turn.p50 <= 0 || r.raw.p50 <= 0 || r.load.perSec <= 0 || r.solo.lat.p50 <= 0 || r.afterIdle.p50 <= 0 || r.nIdle != 20 || r.solo.turns.lo <= 0 || r.goalStores < 5 {
			t.Fatalf("run %+v: a figure was not measured", r)
		}
		runs = append(runs, r)
	}
	for _, row := range timedRows(runs, 20, 5) {
		if !strings.HasPrefix(row.reference, "median of 2 runs (") || strings.HasPrefix(row.value, "0 ") {
			t.Errorf("row %+v", row)
		}
	}
}

func TestSpan(t *testing.T) {
	var s span
	for _, n := range []int{4, 0, 3, 5, 4} { // 0: a goal that did not conclude
		s.add(n)
	}
	if s != (span{3, 5}) || s.String() != "3–5" {
		t.Errorf("span %+v %q, want 3–5", s, s)
	}
	if one := (span{4, 4}); one.String() != "4" {
		t.Errorf("span of one count: %q", one)
	}
}
