package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The scaling curves (ioa bench --scale): each figure measured at several
// sizes, with a verdict computed from how it grows.

func addScaleFlags(f *pflag.FlagSet) {
	f.Bool("scale", false, "measure the scaling curves instead of the table (open chats, team size, chat length, idle agents, registry, goals run)")
	f.String("out", "", "with --scale, also write one SVG per curve into this directory")
	f.String("scale-chats", "10,100,1000,10000", "with --scale, open (idle) chats to measure the active turns beside")
	f.String("scale-teams", "2,8,32", "with --scale, team sizes")
	f.String("scale-lengths", "10,100,1000", "with --scale, chat lengths in messages")
	f.String("scale-agents", "100,1000", "with --scale, idle agents (agentkit runtime) for memory per agent")
	f.String("scale-registry", "1000,10000", "with --scale, registered agents online for heartbeats and registration")
	f.String("scale-goals", "2000,10000", "with --scale, goals run (50 at a time) before measuring goals/s, the heap they leave and a turn")
	f.Int("scale-turns", 200, "with --scale, turns timed at each point of each run")
	f.Int("runs", 3, "runs of each timed figure (turn, goals/s, one goal alone, search; with --scale, of each point): the median is printed, each run beside it")
}

// curve is one figure at several sizes: one row per size, one column per
// measured value.
type curve struct {
	name   string // file name of the SVG
	title  string
	xname  string
	setup  string
	cols   []scaleCol
	xs     []int
	rows   [][]float64
	judged []int // the columns the verdict looks at
}

type scaleCol struct {
	name         string
	unit         string // "µs", "ms", "KiB", "/s"
	fmt          func(float64) string
	higherBetter bool // a rate: its cost is 1/value
	noPlot       bool // left out of the SVG (another scale than the rest)
}

func colDur(name string) scaleCol {
	return scaleCol{name: name, unit: "µs", fmt: func(v float64) string { return fmtDur(time.Duration(v * float64(time.Microsecond))) }}
}

func colNum(name, unit string, prec int) scaleCol {
	return scaleCol{name: name, unit: unit, fmt: func(v float64) string { return strconv.FormatFloat(v, 'f', prec, 64) + " " + unit }}
}

func noPlot(c scaleCol) scaleCol {
	c.noPlot = true
	return c
}

func colRate(name, unit string) scaleCol {
	c := colNum(name, unit, 0)
	c.higherBetter = true
	return c
}

// growth says how y grows with the size: flat, sublinear, linear or worse
// than linear, from the exponent k of y ~ x^k on the steepest step between
// two sizes (a step that at most doubles counts as flat, which absorbs the
// noise of a shared machine), with the ratio of the last value to the first.
// When lower is better (a rate), the cost 1/y is judged.
func growth(xs []int, ys []float64, higherBetter bool) string {
	if len(xs) < 2 || slices.Min(xs) <= 0 || slices.Min(ys) <= 0 {
		return "n/a"
	}
	cost := func(i int) float64 {
		if higherBetter {
			return 1 / ys[i]
		}
		return ys[i]
	}
	k := 0.0
	for i := 1; i < len(xs); i++ {
		r, s := cost(i)/cost(i-1), float64(xs[i])/float64(xs[i-1])
		if r > 2 && s > 1 {
			k = max(k, math.Log(r)/math.Log(s))
		}
	}
	var word string
	switch {
	case k < 0.1:
		word = "flat"
	case k < 0.7:
		word = "sublinear"
	case k <= 1.3:
		word = "linear"
	default:
		word = "worse than linear"
	}
	last := len(xs) - 1
	return fmt.Sprintf("%s (%.2fx for %gx the size)", word, ys[last]/ys[0], float64(xs[last])/float64(xs[0]))
}

func (c *curve) verdict() string {
	var parts []string
	for _, j := range c.judged {
		ys := make([]float64, len(c.rows))
		for i, r := range c.rows {
			ys[i] = r[j]
		}
		parts = append(parts, c.cols[j].name+" "+growth(c.xs, ys, c.cols[j].higherBetter))
	}
	return strings.Join(parts, "; ")
}

func (c *curve) print(w io.Writer) {
	fmt.Fprintf(w, "%s\n%s\n", c.title, c.setup)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	head := []string{c.xname}
	for _, col := range c.cols {
		head = append(head, col.name)
	}
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	for i, x := range c.xs {
		cells := []string{strconv.Itoa(x)}
		for j, col := range c.cols {
			cells = append(cells, col.fmt(c.rows[i][j]))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	tw.Flush()
	fmt.Fprintf(w, "verdict: %s\n\n", c.verdict())
}

// svg draws the curve: log x axis, one line per column sharing a unit with
// the first judged column (but the p99s), y from 0.
func (c *curve) svg() string {
	const W, H, L, R, T, B = 640.0, 360.0, 70.0, 20.0, 40.0, 50.0
	unit := c.cols[c.judged[0]].unit
	var show []int
	ymax := 0.0
	for j, col := range c.cols {
		// p99 on a shared machine would flatten everything else.
		if col.unit == unit && !col.noPlot && !strings.Contains(col.name, "p99") {
			show = append(show, j)
			for _, r := range c.rows {
				ymax = max(ymax, r[j])
			}
		}
	}
	if ymax <= 0 {
		ymax = 1
	}
	lx0, lx1 := math.Log10(float64(c.xs[0])), math.Log10(float64(c.xs[len(c.xs)-1]))
	if lx1 == lx0 {
		lx1 = lx0 + 1
	}
	px := func(x int) float64 { return L + (math.Log10(float64(x))-lx0)/(lx1-lx0)*(W-L-R) }
	py := func(y float64) float64 { return H - B - y/ymax/1.1*(H-T-B) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%g" height="%g" font-family="sans-serif" font-size="12">`+"\n", W, H)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%g" y="20" font-size="14">%s</text>`+"\n", L, xmlEscape(c.title))
	fmt.Fprintf(&b, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="black"/>`+"\n", L, H-B, W-R, H-B)
	fmt.Fprintf(&b, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="black"/>`+"\n", L, T, L, H-B)
	for _, x := range c.xs {
		fmt.Fprintf(&b, `<text x="%g" y="%g" text-anchor="middle">%d</text>`+"\n", px(x), H-B+16, x)
	}
	fmt.Fprintf(&b, `<text x="%g" y="%g" text-anchor="middle">%s (log scale)</text>`+"\n", (L+W-R)/2, H-12, xmlEscape(c.xname))
	for i := 0; i <= 4; i++ {
		y := ymax * 1.1 * float64(i) / 4
		fmt.Fprintf(&b, `<text x="%g" y="%g" text-anchor="end">%.4g</text>`+"\n", L-6, py(y)+4, y)
		fmt.Fprintf(&b, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="#ddd"/>`+"\n", L, py(y), W-R, py(y))
	}
	fmt.Fprintf(&b, `<text x="14" y="%g" transform="rotate(-90 14 %g)" text-anchor="middle">%s</text>`+"\n", (T+H-B)/2, (T+H-B)/2, xmlEscape(unit))
	colours := []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd"}
	for n, j := range show {
		var pts []string
		for i, x := range c.xs {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(x), py(c.rows[i][j])))
		}
		col := colours[n%len(colours)]
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", col, strings.Join(pts, " "))
		fmt.Fprintf(&b, `<text x="%g" y="%g" fill="%s">%s</text>`+"\n", W-R-150, T+14*float64(n+1), col, xmlEscape(c.cols[j].name))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func xmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

func parseSizes(flag, v string) ([]int, error) {
	var out []int
	for s := range strings.SplitSeq(v, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("--%s: %q is not a positive number", flag, s)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--%s: no sizes", flag)
	}
	return out, nil
}

// positiveInts reads integer flags that must be at least 1, in order.
func positiveInts(f *pflag.FlagSet, flags ...string) ([]int, error) {
	out := make([]int, len(flags))
	for i, name := range flags {
		v, err := f.GetInt(name)
		if err != nil {
			return nil, err
		}
		if v < 1 {
			return nil, fmt.Errorf("--%s: %d is not a positive number", name, v)
		}
		out[i] = v
	}
	return out, nil
}

// scaleOpts are the sizes of a scale run.
type scaleOpts struct {
	chats, teams, lengths, agents, registry, goals []int
	turns, runs                                    int
	idle                                           time.Duration // idle CPU is measured over this long at each point
}

func runScale(cmd *cobra.Command) error {
	f := cmd.Flags()
	var o scaleOpts
	var err error
	for _, p := range []struct {
		flag string
		dst  *[]int
	}{{"scale-chats", &o.chats}, {"scale-teams", &o.teams}, {"scale-lengths", &o.lengths}, {"scale-agents", &o.agents}, {"scale-registry", &o.registry}, {"scale-goals", &o.goals}} {
		v, _ := f.GetString(p.flag)
		if *p.dst, err = parseSizes(p.flag, v); err != nil {
			return err
		}
	}
	n, err := positiveInts(f, "scale-turns", "runs")
	if err != nil {
		return err
	}
	o.turns, o.runs = n[0], n[1]
	o.idle = time.Second
	curves, err := measureScale(cmd.Context(), o, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "ioa bench --scale, %s, %s/%s, %d CPUs, %s; each value the median of %d measurements\n\n",
		time.Now().UTC().Format("2006-01-02"), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version(), o.runs)
	out, _ := f.GetString("out")
	for _, c := range curves {
		c.print(w)
		if out != "" {
			if err := os.MkdirAll(out, 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(out, c.name+".svg"), []byte(c.svg()), 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// measureScale runs every curve, each on a fresh runtime so that one
// curve's leftovers do not weigh on the next.
func measureScale(ctx context.Context, o scaleOpts, progress io.Writer) ([]*curve, error) {
	var curves []*curve
	steps := []func(context.Context, *benchEnv) ([]*curve, error){
		func(ctx context.Context, e *benchEnv) ([]*curve, error) {
			c, err := e.curveTeams(ctx, o, progress)
			if err != nil {
				return nil, err
			}
			l, err := e.curveLength(ctx, o, progress)
			return []*curve{c, l}, err
		},
		func(ctx context.Context, e *benchEnv) ([]*curve, error) {
			c, err := e.curveAgents(ctx, o, progress)
			if err != nil {
				return nil, err
			}
			r, err := e.curveRegistry(ctx, o, progress)
			return []*curve{c, r}, err
		},
		func(ctx context.Context, e *benchEnv) ([]*curve, error) {
			c, err := e.curveChats(ctx, o, progress)
			return []*curve{c}, err
		},
		func(ctx context.Context, e *benchEnv) ([]*curve, error) {
			c, err := e.curveGoals(ctx, o, progress)
			return []*curve{c}, err
		},
	}
	for _, step := range steps {
		tmp, err := os.MkdirTemp("", "ioa-bench-scale-")
		if err != nil {
			return nil, err
		}
		e, err := startBenchEnv(ctx, tmp, false)
		if err != nil {
			os.RemoveAll(tmp)
			return nil, err
		}
		cs, err := step(ctx, e)
		e.close()
		os.RemoveAll(tmp)
		if err != nil {
			return nil, err
		}
		curves = append(curves, cs...)
	}
	return curves, nil
}

// median of each column over runs.
func medianRow(runs [][]float64) []float64 {
	out := make([]float64, len(runs[0]))
	for j := range out {
		v := make([]float64, len(runs))
		for i, r := range runs {
			v[i] = r[j]
		}
		slices.Sort(v)
		out[j] = v[len(v)/2]
	}
	return out
}

// activeChat is a chat of wire members whose lead speaks every turn.
type activeChat struct {
	ws   []*wireMember
	goal string
	comm string
}

func (e *benchEnv) openActive(ctx context.Context, prefix string, size int) (*activeChat, error) {
	names := make([]string, size)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	a := &activeChat{}
	for _, n := range names {
		w, err := e.newWireMember(ctx, n, names[1:])
		if err != nil {
			a.close()
			return nil, err
		}
		a.ws = append(a.ws, w)
	}
	var err error
	if a.goal, a.comm, err = e.openWireChat(ctx, names[0], 1<<30); err != nil {
		a.close()
		return nil, err
	}
	return a, nil
}

func (a *activeChat) close() {
	for _, w := range a.ws {
		w.nc.Close()
	}
}

// turns times n turns of the lead (outbox request until every member's
// inbox has the logged message) and returns p50, p99 (µs) and the process
// CPU per turn (µs).
func (e *benchEnv) turns(ctx context.Context, a *activeChat, n int) ([]float64, error) {
	lead := a.ws[0]
	outbox, _ := e.b.Subjects().Outbox(lead.name, a.comm)
	out := make([]time.Duration, 0, n)
	cpu0 := processCPU()
	for i := range n {
		msg := protocol.AgentMessage{ID: fmt.Sprintf("%s-%s-%d", lead.name, a.comm, time.Now().UnixNano()), Type: protocol.MsgDiscussion,
			Content: "turn " + strconv.Itoa(i), NextSpeaker: []string{lead.name}}
		t0 := time.Now()
		var reply protocol.SendReply
		if err := bus.Request(ctx, lead.nc, outbox, msg, &reply); err != nil {
			return nil, fmt.Errorf("bench: turn %d: %w", i, err)
		}
		for _, w := range a.ws {
			if !w.waitSeq(a.comm, reply.Seq, 10*time.Second) {
				return nil, fmt.Errorf("bench: %s never received seq %d", w.name, reply.Seq)
			}
		}
		out = append(out, time.Since(t0))
	}
	cpu := processCPU() - cpu0
	l := summarise(out)
	return []float64{us(l.p50), us(l.p99), us(cpu) / float64(n)}, nil
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// idleCPU is the process CPU spent per second while nothing is asked of it
// (timers, heartbeats, sweeps).
func idleCPU(d time.Duration) float64 {
	c0, t0 := processCPU(), time.Now()
	time.Sleep(d)
	return float64(processCPU()-c0) / float64(time.Millisecond) / time.Since(t0).Seconds()
}

func turnCols() []scaleCol {
	return []scaleCol{colDur("turn p50"), colDur("turn p99"), colDur("CPU per turn")}
}

// curveChats: turns of one active 4-member chat while more and more chats
// stay open and idle; the heap they add and the idle CPU.
func (e *benchEnv) curveChats(ctx context.Context, o scaleOpts, progress io.Writer) (*curve, error) {
	c := &curve{name: "open-chats", title: "chat turn vs open chats", xname: "open chats",
		setup: fmt.Sprintf("one 4-member wire chat speaking (%d turns a run) while the others stay open and idle (launcher on the wire, one agentkit member)", o.turns),
		cols: append(turnCols(), colNum("heap per open chat", "KiB", 1), colNum("idle CPU", "ms/s", 1),
			colRate("chats opened", "/s"), noPlot(colDur("CPU per chat opened"))),
		xs: o.chats, judged: []int{0, 2, 3, 4, 6}}
	a, err := e.openActive(ctx, "oc", 4)
	if err != nil {
		return nil, err
	}
	defer a.close()
	lead, err := e.newWireMember(ctx, "oc-idle", []string{"bench-counter"})
	if err != nil {
		return nil, err
	}
	defer lead.nc.Close()
	if _, err := e.turns(ctx, a, 50); err != nil { // warm up
		return nil, err
	}
	base := heap()
	open := 0
	for _, n := range o.chats {
		fmt.Fprintf(progress, "bench: scale: opening chats up to %d ...\n", n)
		t0, cpu0 := time.Now(), processCPU()
		if err := e.openIdleChats(ctx, "oc-idle", n-open); err != nil {
			return nil, fmt.Errorf("bench: opening chat %d of %d: %w", open, n, err)
		}
		took := time.Since(t0)
		fmt.Fprintf(progress, "bench: scale: %d chats opened in %s\n", n-open, took.Round(time.Millisecond))
		rate := float64(n-open) / took.Seconds()
		cpuOpen := us(processCPU()-cpu0) / float64(n-open)
		open = n
		perChat := (heap() - base) / float64(n) / 1024
		var runs [][]float64
		for range o.runs {
			r, err := e.turns(ctx, a, o.turns)
			if err != nil {
				return nil, err
			}
			runs = append(runs, append(r, perChat, idleCPU(o.idle/time.Duration(o.runs)), rate, cpuOpen))
		}
		c.rows = append(c.rows, medianRow(runs))
	}
	return c, nil
}

// curveGoals: goals run one batch after another (50 at a time) until each
// size; at each, the last batch's goals/s, the heap that batch left behind
// per goal (what the streams keep of a goal until retention drops it; the
// first batch also fills the server's pooled block caches, which then stay
// that size), and a turn of a chat that stayed open meanwhile.
func (e *benchEnv) curveGoals(ctx context.Context, o scaleOpts, progress io.Writer) (*curve, error) {
	c := &curve{name: "goals-run", title: "goals/s, heap and turn vs goals run", xname: "goals run",
		setup: fmt.Sprintf("4-agent goals (coordinator + 3 func workers), 50 at a time, run up to each size; heap the batch added / its goals; one 4-member wire chat's turns (%d a run)", o.turns),
		cols:  append([]scaleCol{colRate("goals/s", "/s"), colNum("heap per goal of the batch", "KiB", 2)}, turnCols()...),
		xs:    o.goals, judged: []int{0, 1, 2}}
	a, err := e.openActive(ctx, "gr", 4)
	if err != nil {
		return nil, err
	}
	defer a.close()
	if _, err := e.turns(ctx, a, 50); err != nil { // warm up
		return nil, err
	}
	before := heap()
	done := 0
	for _, n := range o.goals {
		fmt.Fprintf(progress, "bench: scale: running goals up to %d ...\n", n)
		run, err := e.goalThroughput(ctx, n-done, 50)
		if err != nil {
			return nil, err
		}
		if run.failed > 0 {
			return nil, fmt.Errorf("bench: %d of %d goals did not conclude", run.failed, n-done)
		}
		after := heap()
		perGoal := (after - before) / float64(n-done) / 1024
		before, done = after, n
		var runs [][]float64
		for range o.runs {
			r, err := e.turns(ctx, a, o.turns)
			if err != nil {
				return nil, err
			}
			runs = append(runs, append([]float64{run.perSec, perGoal}, r...))
		}
		c.rows = append(c.rows, medianRow(runs))
	}
	return c, nil
}

// openIdleChats opens n chats led by launcher, a few at a time.
func (e *benchEnv) openIdleChats(ctx context.Context, launcher string, n int) error {
	var (
		next  atomic.Int64
		first error
		mu    sync.Mutex
		wg    sync.WaitGroup
	)
	for range 8 {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				if _, _, err := e.openWireChat(ctx, launcher, 10); err != nil {
					mu.Lock()
					first = cmpOr(first, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// curveTeams: turns in chats of growing teams.
func (e *benchEnv) curveTeams(ctx context.Context, o scaleOpts, progress io.Writer) (*curve, error) {
	c := &curve{name: "team-size", title: "chat turn vs team size", xname: "members",
		setup: fmt.Sprintf("one wire chat of each size, the lead speaking; a turn ends when every member's inbox has it (%d turns a run)", o.turns),
		cols:  turnCols(), xs: o.teams, judged: []int{0, 2}}
	for _, k := range o.teams {
		fmt.Fprintf(progress, "bench: scale: team of %d ...\n", k)
		a, err := e.openActive(ctx, "team"+strconv.Itoa(k), k)
		if err != nil {
			return nil, err
		}
		if _, err := e.turns(ctx, a, 20); err != nil {
			a.close()
			return nil, err
		}
		var runs [][]float64
		for range o.runs {
			r, err := e.turns(ctx, a, o.turns)
			if err != nil {
				a.close()
				return nil, err
			}
			runs = append(runs, r)
		}
		a.close()
		e.cancelGoal(ctx, a.goal)
		c.rows = append(c.rows, medianRow(runs))
	}
	return c, nil
}

// curveLength: turns and a history read of the last page as one chat
// grows.
func (e *benchEnv) curveLength(ctx context.Context, o scaleOpts, progress io.Writer) (*curve, error) {
	const page uint64 = 20
	turns := max(o.turns/4, 10)
	c := &curve{name: "chat-length", title: "chat turn and history read vs chat length", xname: "messages",
		setup: fmt.Sprintf("one 2-member wire chat grown to each length; %d turns a run (the chat grows by them), then %d reads of the last %d messages", turns, turns, page),
		cols:  append(turnCols(), colDur("history p50"), colDur("history p99")),
		xs:    o.lengths, judged: []int{0, 2, 3}}
	a, err := e.openActive(ctx, "len", 2)
	if err != nil {
		return nil, err
	}
	defer a.close()
	reader := a.ws[1]
	history, _ := e.b.Subjects().History(reader.name, a.comm)
	var seq uint64
	lastSeq := func() uint64 {
		reader.mu.Lock()
		defer reader.mu.Unlock()
		return reader.last[a.comm]
	}
	for _, n := range o.lengths {
		fmt.Fprintf(progress, "bench: scale: chat of %d messages ...\n", n)
		if seq = lastSeq(); seq < uint64(n) {
			if _, err := e.turns(ctx, a, n-int(seq)); err != nil {
				return nil, err
			}
		}
		var runs [][]float64
		for range o.runs {
			r, err := e.turns(ctx, a, turns)
			if err != nil {
				return nil, err
			}
			seq = lastSeq()
			page := min(page, seq)
			var reads []time.Duration
			for range turns {
				t0 := time.Now()
				var h protocol.HistoryReply
				if err := bus.Request(ctx, reader.nc, history, protocol.HistoryRequest{AfterSeq: seq - page, Limit: int(page)}, &h); err != nil {
					return nil, err
				}
				if uint64(len(h.Messages)) != page {
					return nil, fmt.Errorf("bench: history after %d gave %d messages, not %d", seq-page, len(h.Messages), page)
				}
				reads = append(reads, time.Since(t0))
			}
			l := summarise(reads)
			runs = append(runs, append(r, us(l.p50), us(l.p99)))
		}
		c.rows = append(c.rows, medianRow(runs))
	}
	return c, nil
}

// curveAgents: heap per idle agentkit agent (runtime and registry card).
func (e *benchEnv) curveAgents(ctx context.Context, o scaleOpts, progress io.Writer) (*curve, error) {
	c := &curve{name: "idle-agents", title: "memory per idle agent vs idle agents", xname: "idle agents",
		setup: "n agents in one agentkit runtime, registered and heartbeating; heap added (runtime + registry card + index) / n",
		cols:  []scaleCol{colNum("heap per agent", "KiB", 1), colNum("idle CPU", "ms/s", 1)}, xs: o.agents, judged: []int{0}}
	for i, n := range o.agents {
		fmt.Fprintf(progress, "bench: scale: %d idle agents ...\n", n)
		var cpu float64
		per, err := e.memoryPerAgentWith(ctx, n, "ia"+strconv.Itoa(i), func() { cpu = idleCPU(o.idle) })
		if err != nil {
			return nil, err
		}
		c.rows = append(c.rows, []float64{per / 1024, cpu})
	}
	return c, nil
}

// curveRegistry: registration throughput to n cards, then heartbeats of
// random agents among n online.
func (e *benchEnv) curveRegistry(ctx context.Context, o scaleOpts, progress io.Writer) (*curve, error) {
	beats := 10 * o.turns
	c := &curve{name: "registry", title: "registry vs agents online", xname: "agents online",
		setup: fmt.Sprintf("cards registered over the wire by 8 clients at once; then %d heartbeats a run, one at a time, of random agents; CPU is the whole process's", beats),
		cols: []scaleCol{colRate("registrations", "cards/s"), colDur("heartbeat p50"), colDur("heartbeat p99"),
			colDur("CPU per heartbeat"), colNum("idle CPU", "ms/s", 1)},
		xs: o.registry, judged: []int{0, 1, 3, 4}}
	s := e.b.Subjects()
	rng := rand.New(rand.NewPCG(3, 4))
	have := 0
	for _, n := range o.registry {
		fmt.Fprintf(progress, "bench: scale: registering up to %d agents ...\n", n)
		var (
			next  atomic.Int64
			first error
			mu    sync.Mutex
			wg    sync.WaitGroup
		)
		next.Store(int64(have))
		t0 := time.Now()
		for w := range 8 {
			nc, err := e.b.NewConn("bench-register-" + strconv.Itoa(w))
			if err != nil {
				return nil, err
			}
			phrase := benchPhrases(rand.New(rand.NewPCG(uint64(w), uint64(n))))
			wg.Go(func() {
				defer nc.Close()
				for {
					i := next.Add(1) - 1
					if i >= int64(n) {
						return
					}
					name := "reg-" + strconv.FormatInt(i, 10)
					card := protocol.AgentCard{Name: name, Description: phrase(14), Type: protocol.TypeTool,
						Capabilities: []string{phrase(3), phrase(2)}, Tags: []string{phrase(1)}}
					subj, _ := s.As(s.Registry(bus.RegistryRegister), name)
					if err := bus.Request(ctx, nc, subj, card, nil); err != nil {
						mu.Lock()
						first = cmpOr(first, err)
						mu.Unlock()
						return
					}
				}
			})
		}
		wg.Wait()
		if first != nil {
			return nil, fmt.Errorf("bench: registering: %w", first)
		}
		perSec := float64(n-have) / time.Since(t0).Seconds()
		have = n
		var runs [][]float64
		for range o.runs {
			out := make([]time.Duration, 0, beats)
			cpu0 := processCPU()
			for range beats {
				name := "reg-" + strconv.Itoa(rng.IntN(n))
				subj, _ := s.As(s.Registry(bus.RegistryHeartbeat), name)
				t := time.Now()
				if err := bus.Request(ctx, e.b.Conn(), subj, protocol.NameRequest{Name: name}, nil); err != nil {
					return nil, fmt.Errorf("bench: heartbeat of %s: %w", name, err)
				}
				out = append(out, time.Since(t))
			}
			cpu := processCPU() - cpu0
			l := summarise(out)
			runs = append(runs, []float64{perSec, us(l.p50), us(l.p99), us(cpu) / float64(beats), idleCPU(o.idle / time.Duration(o.runs))})
		}
		c.rows = append(c.rows, medianRow(runs))
	}
	return c, nil
}
