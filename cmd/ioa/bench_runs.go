package main

// The table's timed figures, measured in several runs: each row is the run
// whose headline figure is the median, with every run's figure beside it,
// so that one `ioa bench` gives what a noisy host otherwise needs three
// invocations and a hand-picked median for.

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// timedRun is one run of the table's timed figures.
type timedRun struct {
	raw, floor, turn  latencies
	loggedFloor       latencies     // the floor logging as the referee logs
	floorCPU, turnCPU time.Duration // process CPU per round trip
	loggedFloorCPU    time.Duration
	load, solo        goalRun
	goalCPU           time.Duration // process CPU per goal of load
	goalAlloc         float64       // bytes allocated per goal of load
	goalStores        float64       // JetStream entries stored per goal of load (0: not counted)
	afterIdle         latencies
	failedIdle, nIdle int
	idlePause         time.Duration
}

// ratio is the turn's p50 over the raw request-reply's: the target's unit.
func (r timedRun) ratio() float64 {
	if r.raw.p50 <= 0 {
		return math.Inf(1) // nothing to compare with: no target met
	}
	return float64(r.turn.p50) / float64(r.raw.p50)
}

// timeRun measures the chat turn, goals/s with conc in flight and one goal
// alone (back to back and after idle) once.
func (e *benchEnv) timeRun(ctx context.Context, turns, goals, conc int, progress io.Writer) (timedRun, error) {
	var r timedRun
	fmt.Fprintln(progress, "bench: chat turn round trip ...")
	// CPU per turn is the steadier figure on a noisy machine: it is what a
	// change to the work shows in, whatever else the host runs.
	lat, cpu, err := e.timeTurns(ctx, turns)
	if err != nil {
		return r, err
	}
	r.raw, r.floor, r.loggedFloor, r.turn = lat[0], lat[1], lat[2], lat[3]
	r.floorCPU, r.loggedFloorCPU, r.turnCPU = cpu[1], cpu[2], cpu[3]

	fmt.Fprintf(progress, "bench: %d goals, %d at a time ...\n", goals, conc)
	s0, errStores := e.storedEntries(ctx)
	c0, a0 := processCPU(), allocated()
	if r.load, err = e.goalThroughput(ctx, goals, conc); err != nil {
		return r, err
	}
	r.goalCPU = (processCPU() - c0) / time.Duration(max(goals, 1))
	// Allocation and stores per goal do not move with the machine's load
	// as CPU and goals/s do: the figures to compare two builds by.
	r.goalAlloc = float64(allocated()-a0) / float64(max(goals, 1))
	if s1, err := e.storedEntries(ctx); err == nil && errStores == nil {
		r.goalStores = float64(s1-s0) / float64(max(goals, 1))
	}

	// The overhead of one goal is measured alone: under 50 goals at once it
	// is mostly queueing (Little's law: 50 / goals per second).
	fmt.Fprintf(progress, "bench: %d goals one at a time ...\n", max(goals/10, 20))
	if r.solo, err = e.goalThroughput(ctx, max(goals/10, 20), 1); err != nil {
		return r, err
	}
	// Back to back, the process never idles; a goal sent to an idle server
	// first wakes its sleeping threads. Both are one goal alone.
	r.idlePause, r.nIdle = 20*time.Millisecond, max(goals/40, 20)
	r.afterIdle, r.failedIdle, err = e.goalsAfterIdle(ctx, r.nIdle, r.idlePause)
	return r, err
}

// timedRows are the table's rows for the chat turn, goals/s and one goal
// alone, each from its median run.
func timedRows(runs []timedRun, goals, conc int) []benchRow {
	t, ratios := medianRun(runs, timedRun.ratio, false)
	g, rates := medianRun(runs, func(r timedRun) float64 { return r.load.perSec }, true)
	s, solos := medianRun(runs, func(r timedRun) float64 { return float64(r.solo.lat.p50) }, false)
	// A goal that did not conclude fails its row in any run, not only in
	// the median's: the median picks a speed, not a run's correctness.
	failedLoad, failedAlone := 0, 0
	for _, r := range runs {
		failedLoad += r.load.failed
		failedAlone += r.solo.failed + r.failedIdle
	}
	return []benchRow{
		{"chat turn round trip p50 / p99 (4 members)", t.turn.String(),
			runsNote("", ratios, func(v float64) string { return fmt.Sprintf("%.1fx", v) }) +
				fmt.Sprintf("raw NATS req-reply %s; floor (log+ack, 4 inboxes) %s (%.1fx raw, CPU %s); "+
					"floor logging as the referee logs (stamped entry, mark, message id, expected sequence) %s (%.1fx raw, CPU %s); CPU %s/turn",
					t.raw, t.floor, float64(t.floor.p50)/float64(t.raw.p50), fmtDur(t.floorCPU),
					t.loggedFloor, float64(t.loggedFloor.p50)/float64(t.raw.p50), fmtDur(t.loggedFloorCPU), fmtDur(t.turnCPU)),
			"p50 <= 6x raw", fmt.Sprintf("%s (%.1fx)", verdict(t.ratio() <= 6), t.ratio())},
		{fmt.Sprintf("goals per second (%d concurrent 4-agent goals)", conc), fmt.Sprintf("%.0f/s", g.load.perSec),
			runsNote("", rates, func(v float64) string { return fmt.Sprintf("%.0f/s", v) }) +
				fmt.Sprintf("%d goals a run, %d not concluded in all; %s; latency %s; CPU %s/goal, %s allocated/goal%s",
					goals, failedLoad, sustainedNote(g.load.sustained, conc), g.load.lat, fmtDur(g.goalCPU), kb(g.goalAlloc), storesNote(g.goalStores)),
			">= 500/s", verdict(g.load.perSec >= 500 && failedLoad == 0)},
		{"one goal alone, submit to result, p50 / p99", s.solo.lat.String(),
			runsNote("p50 ", solos, func(v float64) string { return fmtDur(time.Duration(v)) }) +
				fmt.Sprintf("back to back; after %s idle each %s; func workers ~0 ms; %s turns, 3 tasks; %d not concluded in all",
					s.idlePause, s.afterIdle, s.solo.turns, failedAlone),
			"p50 <= 3 ms", verdict(s.solo.lat.p50 <= 3*time.Millisecond && failedAlone == 0)},
	}
}

// storesNote is the JetStream stores a goal made, when they were counted.
func storesNote(perGoal float64) string {
	if perGoal <= 0 {
		return ""
	}
	return fmt.Sprintf(", %.1f JetStream stores/goal", perGoal)
}

// searchRun is one timing of registry searches at one index size.
type searchRun struct {
	lat latencies
	cpu time.Duration
}

// searchRow is the table's row for searches at n cards, from the median
// run by p99 (the target's figure).
func searchRow(n int, build time.Duration, runs []searchRun) benchRow {
	m, p99s := medianRun(runs, func(r searchRun) float64 { return float64(r.lat.p99) }, false)
	ref := runsNote("p99 ", p99s, func(v float64) string { return fmtDur(time.Duration(v)) }) +
		fmt.Sprintf("index built in %s", build.Round(time.Millisecond))
	if m.cpu > 0 {
		// CPU time moves less than latency with the machine's load.
		ref += fmt.Sprintf("; CPU %.2f ms/search", float64(m.cpu.Microseconds())/1000)
	}
	target := 5 * time.Millisecond
	if n > 10000 {
		target = 20 * time.Millisecond
	}
	return benchRow{"registry search p50 / p99, " + strconv.Itoa(n) + " agents", m.lat.String(),
		ref, "p99 <= " + target.String(), verdict(m.lat.p99 <= target)}
}

// medianRun returns the run whose key is the median and every run's key, in
// run order. Of an even number of runs it takes the worse of the middle two
// (the lower when higherBetter, else the higher): a figure is not claimed
// on the strength of the luckier half.
func medianRun[T any](runs []T, key func(T) float64, higherBetter bool) (T, []float64) {
	keys := make([]float64, len(runs))
	for i, r := range runs {
		keys[i] = key(r)
	}
	order := make([]int, len(runs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(keys[a], keys[b]) })
	mid := len(runs) / 2
	if higherBetter {
		mid = (len(runs) - 1) / 2
	}
	return runs[order[mid]], keys
}

// runsNote opens a row's reference with the number of runs and each run's
// figure (what it is, then the figures in run order); one run needs no note.
func runsNote(what string, keys []float64, format func(float64) string) string {
	if len(keys) < 2 {
		return ""
	}
	s := make([]string, len(keys))
	for i, k := range keys {
		s[i] = format(k)
	}
	return fmt.Sprintf("median of %d runs (%s%s); ", len(keys), what, strings.Join(s, ", "))
}
