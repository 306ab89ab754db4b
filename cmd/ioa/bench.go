package main

import (
	"context"
	crand "crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/agentkit/rules"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/bus/auth"
	"github.com/ioa-nats/ioa/orchestrator"
	"github.com/ioa-nats/ioa/registry"
	"github.com/ioa-nats/ioa/registry/search"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
)

func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure the runtime's performance figures and print them as one table",
		Long: `bench runs everything in this process (embedded NATS with no listener, the
registry, the orchestrator, agents with Go func workers and the rules policy)
and measures, each beside its reference from the same run:

  chat turn round trip   an agent's outbox request until every member's inbox
                         has the message, against a raw NATS request-reply,
                         the turn's floor (no referee: log, acknowledgement,
                         four inboxes) and that floor logging what the
                         referee logs (the stamped entry and its three
                         headers), the four timed in 20 interleaved rounds so
                         they share the host's good and bad moments
  goals per second       concurrent 4-agent goals (coordinator + 3 workers),
                         with the CPU, the allocation and the JetStream
                         stores a goal took (the last two do not move with
                         the host's load: compare builds by them)
  one goal alone         submit to result as the submitter times it, back to
                         back and after 20 ms idle each (a server at rest wakes
                         its threads first); its func workers take ~0, so this
                         is the coordination
  registry search        p50/p99 of the search index at each size
  memory                 heap per idle agent and per open chat

The timed figures (turn, goals/s, one goal alone, search) are measured --runs
times (3), one run after another on the same runtime: each row shows its
median run (of an even number, the worse of the middle two), with every run's
figure at the head of its reference, and the verdict is the median's.

With --scale it measures scaling curves instead, one table per curve with a
verdict computed from the numbers (flat, sublinear, linear or worse): turn
latency and CPU against open chats, team size and chat length, history reads,
memory per open chat and per idle agent, registry heartbeats and registration
against agents online, goals/s, heap and a turn against goals run (--out DIR
also writes an SVG per curve).

Figures depend on the machine and move with its load; quote the medians.`,
		Example: `  ioa bench
  ioa bench --goals 2000 --concurrency 50 --search-sizes 10000,100000
  ioa bench --scale --out scale/
  make bench`,
		Args: cobra.NoArgs,
		RunE: runBench,
	}
	f := cmd.Flags()
	f.Int("turns", 2000, "chat turns to time")
	f.Int("goals", 1000, "goals to run for goals/s and overhead")
	f.Int("concurrency", 50, "goals in flight at once")
	f.String("search-sizes", "10000,100000", "registry sizes to time search at (comma-separated; empty: none)")
	f.Int("searches", 300, "searches to time at each size")
	f.Int("idle-agents", 500, "agents started to measure memory per idle agent")
	f.Int("open-chats", 200, "chats opened to measure memory per open chat")
	f.Int("instances", 1, "also time goals/s with 2..N orchestrator instances sharing the chats, and failovers (when N >= 2)")
	f.Int("failovers", 3, "instance kills to time the takeover of, with --instances >= 2")
	f.Bool("secure", false, "run with credentials required and every agent on its own identity (compare with a run without)")
	f.String("cpuprofile", "", "write a CPU profile of the run to this file")
	_ = f.MarkHidden("cpuprofile")
	f.String("memprofile", "", "write a heap profile, taken after the first run of the timed figures, to this file")
	_ = f.MarkHidden("memprofile")
	addScaleFlags(f)
	return cmd
}

type benchRow struct{ figure, value, reference, target, verdict string }

func verdict(ok bool) string {
	if ok {
		return "ok"
	}
	return "MISSED"
}

func runBench(cmd *cobra.Command, _ []string) error {
	ctx := cmd.Context()
	f := cmd.Flags()
	scale, _ := f.GetBool("scale")
	// The sizes are checked before anything runs: a typo in the last
	// figure's flag would otherwise surface after minutes of measuring.
	var n, sizes []int
	if !scale {
		var err error
		if n, err = positiveInts(f, "turns", "goals", "concurrency", "searches", "idle-agents", "open-chats", "runs"); err != nil {
			return err
		}
		if v, _ := f.GetString("search-sizes"); v != "" {
			if sizes, err = parseSizes("search-sizes", v); err != nil {
				return err
			}
		}
	}
	progress := cmd.ErrOrStderr()
	if path, _ := f.GetString("cpuprofile"); path != "" {
		pf, err := os.Create(path)
		if err != nil {
			return err
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if scale {
		return runScale(cmd)
	}
	turns, goals, conc, searches, idle, chats, runs := n[0], n[1], n[2], n[3], n[4], n[5], n[6]

	tmp, err := os.MkdirTemp("", "ioa-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	secure, _ := f.GetBool("secure")
	env, err := startBenchEnv(ctx, tmp, secure)
	if err != nil {
		return err
	}
	defer env.close()
	var rows []benchRow

	// The timed figures are measured runs times, one run after the other
	// on the same runtime; each row shows its median run and lists every
	// run's figure (a noisy host moves them by tens of percent).
	memprofile, _ := f.GetString("memprofile")
	var timed []timedRun
	for r := range runs {
		if runs > 1 {
			fmt.Fprintf(progress, "bench: run %d of %d\n", r+1, runs)
		}
		tr, err := env.timeRun(ctx, turns, goals, conc, progress)
		if err != nil {
			return err
		}
		timed = append(timed, tr)
		if r == 0 && memprofile != "" {
			if err := writeHeapProfile(memprofile); err != nil {
				return err
			}
		}
	}
	rows = append(rows, timedRows(timed, goals, conc)...)

	fmt.Fprintln(progress, "bench: memory per idle agent and per open chat ...")
	perAgent, err := env.memoryPerAgent(ctx, idle)
	if err != nil {
		return err
	}
	perChat, err := env.memoryPerChat(ctx, chats)
	if err != nil {
		return err
	}
	rows = append(rows,
		memRow("memory per idle agent (runtime + registry card)", perAgent, fmt.Sprintf("%d agents", idle), "--idle-agents"),
		memRow("memory per open chat (referee + members)", perChat, fmt.Sprintf("%d chats of 2", chats), "--open-chats"))

	for _, n := range sizes {
		fmt.Fprintf(progress, "bench: registry search with %d agents (building the index) ...\n", n)
		ix, build, err := buildSearchIndex(ctx, n)
		if err != nil {
			return err
		}
		var sr []searchRun
		for range runs {
			lat, cpu, err := timeSearches(ctx, ix, searches)
			if err != nil {
				return err
			}
			sr = append(sr, searchRun{lat, cpu})
		}
		rows = append(rows, searchRow(n, build, sr))
	}
	// Last: the extra instances and the kills would blur the memory figures.
	if n, _ := f.GetInt("instances"); n >= 2 {
		for k := 2; k <= n; k++ {
			if _, err := env.addInstance(ctx); err != nil {
				return err
			}
			fmt.Fprintf(progress, "bench: %d goals, %d at a time, %d orchestrator instances ...\n", goals, conc, k)
			run, err := env.goalThroughput(ctx, goals, conc)
			if err != nil {
				return err
			}
			rows = append(rows, benchRow{fmt.Sprintf("goals per second, %d orchestrator instances", k), fmt.Sprintf("%.0f/s", run.perSec),
				fmt.Sprintf("%d goals, %d not concluded; %s; latency %s", goals, run.failed, sustainedNote(run.sustained, conc), run.lat), "no goal lost", verdict(run.failed == 0)})
		}
		drills, _ := f.GetInt("failovers")
		var took []time.Duration
		for i := range drills {
			fmt.Fprintf(progress, "bench: failover %d of %d (kill one of %d instances) ...\n", i+1, drills, len(env.instances()))
			d, err := env.failover(ctx)
			if err != nil {
				return err
			}
			took = append(took, d)
			if i < drills-1 {
				if _, err := env.addInstance(ctx); err != nil {
					return err
				}
			}
		}
		if len(took) > 0 {
			slices.Sort(took)
			ttl := 5 * time.Second
			rows = append(rows, benchRow{"failover: takeover of a killed instance's chats p50 / max", fmtDur(took[len(took)/2]) + " / " + fmtDur(took[len(took)-1]),
				fmt.Sprintf("%d kills; lease TTL %s", len(took), ttl), "max <= 2 x TTL", verdict(took[len(took)-1] <= 2*ttl)})
		}
	}

	printBench(cmd.OutOrStdout(), rows)
	return nil
}

func kb(b float64) string { return fmt.Sprintf("%.1f KiB", b/1024) }

// memRow is a row of heap growth per item (b bytes) over what was
// measured. When the heap did not grow (other garbage freed meanwhile
// outweighed what a few items hold) the figure is "n/a" and the reference
// names the flag to raise.
func memRow(figure string, b float64, what, flag string) benchRow {
	if b <= 0 {
		return benchRow{figure, "n/a", fmt.Sprintf("%s: the heap did not grow measurably; a larger %s outweighs its noise", what, flag), "-", "-"}
	}
	return benchRow{figure, kb(b), what, "-", "-"}
}

func printBench(w io.Writer, rows []benchRow) {
	fmt.Fprintf(w, "ioa bench, %s, %s/%s, %d CPUs, %s\n\n", time.Now().UTC().Format("2006-01-02"), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tvalue\treference (same run)\ttarget\t")
	fmt.Fprintln(tw, "------\t-----\t--------------------\t------\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.figure, r.value, r.reference, r.target, r.verdict)
	}
	tw.Flush()
}

// latencies summarises durations.
type latencies struct{ p50, p99 time.Duration }

func summarise(d []time.Duration) latencies {
	if len(d) == 0 {
		return latencies{}
	}
	slices.Sort(d)
	at := func(q float64) time.Duration { return d[min(len(d)-1, int(q*float64(len(d))))] }
	return latencies{at(0.50), at(0.99)}
}

func (l latencies) String() string { return fmt.Sprintf("%s / %s", fmtDur(l.p50), fmtDur(l.p99)) }

func fmtDur(d time.Duration) string {
	if d < time.Millisecond {
		return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
	}
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}

// benchEnv is a whole runtime in this process.
type benchEnv struct {
	b     *bus.Bus
	dir   string
	auth  *auth.Authority // nil unless secure
	reg   *registry.Service
	orch  *orchestrator.Service
	extra []*orchestrator.Service // more orchestrator instances (--instances)
	stop  context.CancelFunc
	runs  sync.WaitGroup // the agents' runtimes
}

const benchLauncher = "coordinator"

// turnRounds is how many rounds the raw request-reply, the floors and the
// turn are timed in, one after the other in each round (interleaved).
const turnRounds = 20

var benchOrchestrator = orchestrator.Config{
	MaxTurns: 1 << 30, SpeakerTimeout: 10 * time.Minute, GoalTimeout: 10 * time.Minute,
	MaxChatMessages: 1 << 30, MaxTaskProgress: 1 << 30, AgentRate: 1e9, AgentBurst: 1 << 30, MaxTeamSize: 64,
}

// addInstance starts one more orchestrator instance on the bench's bus and
// returns once every instance holds a share of the partitions.
func (e *benchEnv) addInstance(ctx context.Context) (*orchestrator.Service, error) {
	o, err := orchestrator.New(e.b, benchOrchestrator)
	if err != nil {
		return nil, err
	}
	if err := o.Start(ctx); err != nil {
		return nil, err
	}
	e.extra = append(e.extra, o)
	return o, e.waitPartitions(ctx, e.instances())
}

func (e *benchEnv) instances() []*orchestrator.Service {
	return append([]*orchestrator.Service{e.orch}, e.extra...)
}

// waitPartitions waits until each instance holds partitions and together
// they hold all of them.
func (e *benchEnv) waitPartitions(ctx context.Context, ins []*orchestrator.Service) error {
	deadline := time.Now().Add(time.Minute)
	for {
		total, empty := 0, false
		for _, o := range ins {
			n := len(o.Partitions())
			total += n
			empty = empty || n == 0
		}
		if !empty && total == 32 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: the orchestrator instances did not share the partitions within a minute")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// failover kills the newest instance (as a crash would) and returns how long
// the others take to own every partition.
func (e *benchEnv) failover(ctx context.Context) (time.Duration, error) {
	victim := e.extra[len(e.extra)-1]
	e.extra = e.extra[:len(e.extra)-1]
	t0 := time.Now()
	victim.Kill()
	for {
		total := 0
		for _, o := range e.instances() {
			total += len(o.Partitions())
		}
		if total == 32 {
			return time.Since(t0), nil
		}
		if time.Since(t0) > time.Minute {
			return 0, fmt.Errorf("bench: no takeover within a minute")
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func startBenchEnv(ctx context.Context, dir string, secure bool) (*benchEnv, error) {
	b, err := bus.Start(ctx, bus.Config{DataDir: dir, Listen: bus.NoListen, Secure: secure})
	if err != nil {
		return nil, err
	}
	e := &benchEnv{b: b, dir: dir}
	if secure {
		if e.auth, err = auth.Load(bus.AuthDir(dir)); err != nil {
			e.close()
			return nil, err
		}
	}
	if e.reg, err = registry.New(b, registry.Config{HeartbeatTTL: 10 * time.Minute, MaxAgentsPerConn: 1 << 20}); err == nil {
		err = e.reg.Start(ctx)
	}
	if err != nil {
		e.close()
		return nil, err
	}
	e.orch, err = orchestrator.New(b, benchOrchestrator)
	if err == nil {
		err = e.orch.Start(ctx)
	}
	if err != nil {
		e.close()
		return nil, err
	}
	work := func(_ context.Context, t agentkit.Task) (agentkit.Result, error) {
		return agentkit.Result{Conclusion: "done: " + t.TaskAbstract}, nil
	}
	agents := []agentkit.Agent{orchestrator.Coordinator(benchLauncher, rules.New(rules.Config{}))}
	for _, c := range []struct{ name, desc string }{
		{"bench-counter", "Counts apples in a basket."},
		{"bench-painter", "Paints fences in bright colours."},
		{"bench-writer", "Writes a summary of earlier results."},
	} {
		agents = append(agents, agentkit.Agent{
			Card:   protocol.AgentCard{Name: c.name, Description: c.desc, Type: protocol.TypeTool},
			Worker: agentkit.WorkerFunc(work), Policy: rules.New(rules.Config{}),
		})
	}
	// Each agent on a connection of its own identity, as agents run
	// against a secure ioa serve (the server checks every subject).
	rctx, cancel := context.WithCancel(context.Background())
	e.stop = cancel
	for _, a := range agents {
		nc, err := e.agentConn(a.Card.Name)
		if err != nil {
			e.close()
			return nil, err
		}
		rt, err := agentkit.NewRuntime(nc, b.Subjects(), []agentkit.Agent{a})
		if err != nil {
			e.close()
			return nil, err
		}
		e.runs.Go(func() { _ = rt.Run(rctx) })
	}
	for _, a := range agents {
		if err := waitOnline(ctx, b, a.Card.Name); err != nil {
			e.close()
			return nil, err
		}
	}
	return e, nil
}

func waitOnline(ctx context.Context, b *bus.Bus, name string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		var info protocol.AgentInfo
		err := bus.Request(ctx, b.Conn(), b.Subjects().Registry(bus.RegistryGet), protocol.NameRequest{Name: name}, &info)
		if err == nil && info.Online {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: agent %s did not come online: %v", name, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (e *benchEnv) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if e.stop != nil {
		e.stop()
		e.runs.Wait()
	}
	for _, o := range e.extra {
		_ = o.Shutdown(ctx)
	}
	if e.orch != nil {
		_ = e.orch.Shutdown(ctx)
	}
	if e.reg != nil {
		_ = e.reg.Shutdown(ctx)
	}
	_ = e.b.Shutdown(ctx)
}

// rig is one round trip under measurement: once it is set up, step times
// one round trip; close undoes the setup.
type rig struct {
	step  func() (time.Duration, error)
	close func()
}

// rawRig times a plain NATS request-reply between two in-process
// connections: the floor under any refereed turn.
func (e *benchEnv) rawRig(ctx context.Context) (*rig, error) {
	srv, err := e.b.NewConn("bench-echo")
	if err != nil {
		return nil, err
	}
	if _, err := srv.Subscribe("bench.echo", func(m *nats.Msg) { _ = m.Respond(m.Data) }); err != nil {
		srv.Close()
		return nil, err
	}
	_ = srv.Flush()
	body := []byte(`{"v":1,"id":"x","type":"discussion","content":"hello","next_speaker":["a"]}`)
	return &rig{step: func() (time.Duration, error) {
		t0 := time.Now()
		_, err := e.b.Conn().RequestWithContext(ctx, "bench.echo", body)
		return time.Since(t0), err
	}, close: srv.Close}, nil
}

// timeTurns times n round trips each of a raw request-reply, the turn's
// floor, the floor logging as the referee logs and a refereed turn,
// interleaved, in that order; see interleaved.
func (e *benchEnv) timeTurns(ctx context.Context, n int) ([]latencies, []time.Duration, error) {
	var rigs []*rig
	defer func() {
		for _, g := range rigs {
			g.close()
		}
	}()
	for _, mk := range []func() (*rig, error){
		func() (*rig, error) { return e.rawRig(ctx) },
		func() (*rig, error) { return e.floorRig(ctx, "plain", false) },
		func() (*rig, error) { return e.floorRig(ctx, "logged", true) },
		func() (*rig, error) { return e.turnRig(ctx, n) },
	} {
		g, err := mk()
		if err != nil {
			return nil, nil, err
		}
		rigs = append(rigs, g)
	}
	return interleaved(n, turnRounds, rigs...)
}

// interleaved times n round trips of each rig, in rounds of n/rounds each
// taken in turn, so that all of them see the same moments of a noisy host
// and a ratio between them compares like with like. It returns each rig's
// latencies and its process CPU per round trip.
func interleaved(n, rounds int, rigs ...*rig) ([]latencies, []time.Duration, error) {
	rounds = max(1, min(rounds, n))
	samples := make([][]time.Duration, len(rigs))
	cpu := make([]time.Duration, len(rigs))
	for r := range rounds {
		per := n / rounds
		if r < n%rounds {
			per++ // the first n%rounds rounds take one more
		}
		for i, g := range rigs {
			c0 := processCPU()
			for range per {
				d, err := g.step()
				if err != nil {
					return nil, nil, err
				}
				samples[i] = append(samples[i], d)
			}
			cpu[i] += processCPU() - c0
		}
	}
	out := make([]latencies, len(rigs))
	for i := range rigs {
		out[i] = summarise(samples[i])
		cpu[i] /= time.Duration(max(n, 1))
	}
	return out, cpu, nil
}

// floorRig times the least a refereed turn can cost in this architecture:
// the sender's request reaches a referee that does nothing but log the
// message in a file-backed stream (waiting for its acknowledgement), publish
// it to four inboxes and answer; timed until all four inboxes hold it. No
// decoding, checking, state or events: the referee's work is measured against
// this, and the "6x raw" against it.
//
// With asLogged, the floor logs what the referee logs: the entry a turn
// stamps (the message with its chat, goal, sequence, time and state, about
// 230 bytes instead of the sender's 80) with the referee's three headers,
// its mark (an HMAC computed for each entry), its message id and the
// expected last sequence of the chat's subject, which the server checks.
// The gap between the two floors is what the log's trust and ownership
// guarantees cost; the gap from there to the turn is the referee's own work.
// name keeps the rigs' subjects apart.
func (e *benchEnv) floorRig(ctx context.Context, name string, asLogged bool) (_ *rig, err error) {
	js := e.b.JetStream()
	stream := "BENCH_FLOOR_" + strings.ToUpper(name)
	base := "bench.floor." + name
	cfg := jetstream.StreamConfig{Name: stream, Subjects: []string{base + ".log.>"}, Storage: jetstream.FileStorage}
	if asLogged {
		cfg.Duplicates = 2 * time.Minute // as the chat stream's window
	}
	if _, err := js.CreateStream(ctx, cfg); err != nil {
		return nil, err
	}
	conns := []*nats.Conn{}
	closeAll := func() {
		for _, nc := range conns {
			nc.Close()
		}
		_ = js.DeleteStream(context.WithoutCancel(ctx), stream)
	}
	defer func() {
		if err != nil {
			closeAll()
		}
	}()
	conn := func(name string) (*nats.Conn, error) {
		nc, err := e.b.NewConn(name)
		if err == nil {
			conns = append(conns, nc)
		}
		return nc, err
	}
	ref, err := conn("bench-floor-referee")
	if err != nil {
		return nil, err
	}
	const comm = "cbenchfloor01" // as long as a real chat id
	logSubject := base + ".log." + comm
	key := make([]byte, 32)
	_, _ = crand.Read(key)
	var seq, lastStreamSeq uint64 // the handler runs on one goroutine
	if _, err := ref.Subscribe(base+".outbox", func(m *nats.Msg) {
		entry := &nats.Msg{Subject: logSubject, Data: m.Data}
		if asLogged {
			seq++
			entry.Data = bus.Encode(protocol.AgentMessage{V: protocol.Version, ID: "rtt-" + strconv.FormatUint(seq, 10),
				CommID: comm, GoalID: "gbenchfloor01", Sender: "rtt-lead", Seq: seq, TS: time.Now().UTC(),
				Type: protocol.MsgDiscussion, Content: "turn " + strconv.FormatUint(seq, 10), NextSpeaker: []string{"rtt-lead"},
				State: protocol.StateDiscussion, Turn: int(seq)})
			entry.Header = nats.Header{}
			entry.Header.Set(orchestrator.MarkHeader, orchestrator.EntryMark(key, logSubject, entry.Data))
			entry.Header.Set(jetstream.MsgIDHeader, comm+"."+strconv.FormatUint(seq, 10))
			entry.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(lastStreamSeq, 10))
		}
		// Published as the referee publishes its entries (bus.PublishAcked).
		ack, err := bus.PublishAcked(ctx, ref, entry)
		if err != nil {
			_ = ref.PublishMsg(bus.ErrorMsg(m.Reply, err))
			return
		}
		lastStreamSeq = ack.Sequence
		for i := range 4 {
			_ = ref.Publish(base+".inbox."+strconv.Itoa(i), entry.Data)
		}
		_ = m.Respond([]byte(`{"seq":1}`))
	}); err != nil {
		return nil, err
	}
	_ = ref.Flush()
	var got sync.WaitGroup
	for i := range 4 {
		nc, err := conn("bench-floor-member")
		if err != nil {
			return nil, err
		}
		if _, err := nc.Subscribe(base+".inbox."+strconv.Itoa(i), func(*nats.Msg) { got.Done() }); err != nil {
			return nil, err
		}
		_ = nc.Flush()
	}
	sender, err := conn("bench-floor-sender")
	if err != nil {
		return nil, err
	}
	body := []byte(`{"v":1,"id":"x","type":"discussion","content":"hello","next_speaker":["a"]}`)
	return &rig{step: func() (time.Duration, error) {
		got.Add(4)
		t0 := time.Now()
		resp, err := sender.RequestWithContext(ctx, base+".outbox", body)
		if err == nil {
			err = bus.ReplyError(resp)
		}
		if err != nil {
			got.Add(-4)
			return 0, fmt.Errorf("bench: floor (%s): %w", name, err)
		}
		got.Wait()
		return time.Since(t0), nil
	}, close: closeAll}, nil
}

// wireMember is a protocol-only member that counts what reaches its inbox.
type wireMember struct {
	name string
	nc   *nats.Conn
	mu   sync.Mutex
	last map[string]uint64 // comm -> highest seq seen
	cond *sync.Cond
}

// agentConn is a connection for agent name: with its own agent
// credentials on a secure bench, the bus's own otherwise.
func (e *benchEnv) agentConn(name string) (*nats.Conn, error) {
	if e.auth == nil {
		return e.b.NewConn("bench-" + name)
	}
	creds := filepath.Join(e.dir, "creds", name+".creds")
	if err := e.auth.WriteCreds(creds, auth.Identity{Name: name, Role: auth.Agent}, e.b.Subjects().Prefix()); err != nil {
		return nil, err
	}
	opts, err := agentkit.CredsOptions(creds)
	if err != nil {
		return nil, err
	}
	return e.b.NewConnWith("bench-"+name, opts...)
}

func (e *benchEnv) newWireMember(ctx context.Context, name string, team []string) (*wireMember, error) {
	nc, err := e.agentConn(name)
	if err != nil {
		return nil, err
	}
	w := &wireMember{name: name, nc: nc, last: map[string]uint64{}}
	w.cond = sync.NewCond(&w.mu)
	s := e.b.Subjects()
	inbox, _ := s.AgentInboxes(name)
	invite, _ := s.AgentInviteSubject(name)
	launch, _ := s.AgentLaunchSubject(name)
	if _, err := nc.Subscribe(inbox, func(m *nats.Msg) {
		var am struct {
			CommID string `json:"comm_id"`
			Seq    uint64 `json:"seq"`
		}
		if (bus.Codec{}).DecodeLogged(m.Data, &am) == nil { // as agentkit decodes its inbox
			w.mu.Lock()
			w.last[am.CommID] = max(w.last[am.CommID], am.Seq)
			w.cond.Broadcast()
			w.mu.Unlock()
		}
	}); err != nil {
		return nil, err
	}
	if _, err := nc.Subscribe(invite, func(m *nats.Msg) { _ = m.Respond([]byte(`{"accept":true}`)) }); err != nil {
		return nil, err
	}
	if _, err := nc.Subscribe(launch, func(m *nats.Msg) {
		var req protocol.LaunchRequest
		if json.Unmarshal(m.Data, &req) != nil {
			return
		}
		go func() {
			var r protocol.TeamupReply
			teamup, _ := s.As(s.Teamup(), name)
			err := bus.Request(ctx, nc, teamup, protocol.TeamupRequest{GoalID: req.GoalID, Launcher: name, Members: team}, &r)
			if err != nil {
				_ = nc.PublishMsg(bus.ErrorMsg(m.Reply, err))
				return
			}
			_ = m.Respond(bus.Encode(protocol.LaunchReply{CommID: r.CommID}))
		}()
	}); err != nil {
		return nil, err
	}
	if err := nc.Flush(); err != nil {
		return nil, err
	}
	card := protocol.AgentCard{Name: name, Description: "bench member " + name}
	register, err := s.As(s.Registry(bus.RegistryRegister), name)
	if err != nil {
		return nil, err
	}
	if err := bus.Request(ctx, nc, register, card, nil); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *wireMember) waitSeq(comm string, seq uint64, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.last[comm] < seq {
		if time.Now().After(deadline) {
			return false
		}
		// Broadcast on every message wakes us; a timer wakes us at the deadline.
		t := time.AfterFunc(time.Until(deadline), w.cond.Broadcast)
		w.cond.Wait()
		t.Stop()
	}
	return true
}

// openWireChat starts a goal led by a wire launcher and returns its chat.
func (e *benchEnv) openWireChat(ctx context.Context, launcher string, maxTurns int) (string, string, error) {
	var sub protocol.SubmitReply
	err := bus.Request(ctx, e.b.Conn(), e.b.Subjects().Goal(bus.GoalSubmit),
		protocol.GoalRequest{Goal: "bench chat", Launcher: launcher, MaxTurns: maxTurns}, &sub)
	if err != nil {
		return "", "", err
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var st protocol.GoalStatus
		if err := bus.Request(ctx, e.b.Conn(), e.b.Subjects().Goal(bus.GoalGet), protocol.GoalIDRequest{GoalID: sub.GoalID}, &st); err == nil && st.CommID != "" {
			// The goal record names the chat a moment before its start
			// message is logged: the first turn waits for that.
			history, _ := e.b.Subjects().History(launcher, st.CommID)
			var h protocol.HistoryReply
			if bus.Request(ctx, e.b.Conn(), history, protocol.HistoryRequest{Limit: 1}, &h) == nil && h.LastSeq > 0 {
				return sub.GoalID, st.CommID, nil
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	return "", "", fmt.Errorf("bench: chat for goal %s did not start", sub.GoalID)
}

// turnRig times refereed turns: the launcher's outbox request until every
// member's inbox holds the logged message. It opens a goal for up to n turns.
func (e *benchEnv) turnRig(ctx context.Context, n int) (_ *rig, err error) {
	members := []string{"rtt-lead", "rtt-1", "rtt-2", "rtt-3"}
	var ws []*wireMember
	closeAll := func() {
		for _, w := range ws {
			w.nc.Close()
		}
	}
	defer func() {
		if err != nil {
			closeAll()
		}
	}()
	for _, m := range members {
		w, err := e.newWireMember(ctx, m, members[1:])
		if err != nil {
			return nil, err
		}
		ws = append(ws, w)
	}
	goalID, comm, err := e.openWireChat(ctx, "rtt-lead", n+10)
	if err != nil {
		return nil, err
	}
	outbox, _ := e.b.Subjects().Outbox("rtt-lead", comm)
	lead := ws[0]
	i := 0
	return &rig{step: func() (time.Duration, error) {
		i++
		msg := protocol.AgentMessage{ID: "rtt-" + strconv.Itoa(i), Type: protocol.MsgDiscussion, Content: "turn " + strconv.Itoa(i), NextSpeaker: []string{"rtt-lead"}}
		t0 := time.Now()
		var reply protocol.SendReply
		if err := bus.Request(ctx, lead.nc, outbox, msg, &reply); err != nil {
			return 0, fmt.Errorf("bench: turn %d: %w", i, err)
		}
		for _, w := range ws {
			if !w.waitSeq(comm, reply.Seq, 10*time.Second) {
				return 0, fmt.Errorf("bench: %s never received seq %d", w.name, reply.Seq)
			}
		}
		return time.Since(t0), nil
	}, close: func() {
		e.cancelGoal(ctx, goalID)
		closeAll()
	}}, nil
}

func (e *benchEnv) cancelGoal(ctx context.Context, id string) {
	_ = bus.Request(ctx, e.b.Conn(), e.b.Subjects().Goal(bus.GoalCancel), protocol.GoalIDRequest{GoalID: id}, nil)
}

// benchGoal is the goal every goals/s and one-goal figure runs: two
// independent clauses and a dependent one, for three func workers.
const benchGoal = "Count the apples. Paint the fence. Then write a summary of the results."

// runGoal submits benchGoal with wait:true and returns the time from submit
// to result, as the submitter sees it (in µs: the goal's own Elapsed is
// rounded to the millisecond), and the turns its chat took, or why it did
// not conclude.
func (e *benchEnv) runGoal(ctx context.Context) (time.Duration, int, error) {
	var res protocol.GoalResult
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	t0 := time.Now()
	err := bus.Request(rctx, e.b.Conn(), e.b.Subjects().Goal(bus.GoalSubmit), protocol.GoalRequest{Goal: benchGoal, Wait: true}, &res)
	took := time.Since(t0)
	if err == nil && res.Status != protocol.GoalConcluded {
		err = fmt.Errorf("goal %s %s: %s", res.GoalID, res.Status, res.Reason)
	}
	return took, res.Turns, err
}

// goalsAfterIdle runs n goals one at a time, each after the process has
// been idle for idle: what one goal costs on a server with nothing else to
// do, whose threads have gone to sleep (back to back, they never do).
func (e *benchEnv) goalsAfterIdle(ctx context.Context, n int, idle time.Duration) (latencies, int, error) {
	var took []time.Duration
	failed := 0
	for range n {
		select {
		case <-time.After(idle):
		case <-ctx.Done():
			return latencies{}, failed, ctx.Err()
		}
		d, _, err := e.runGoal(ctx)
		if err != nil {
			failed++
			continue
		}
		took = append(took, d)
	}
	if len(took) == 0 {
		return latencies{}, failed, fmt.Errorf("bench: no goal concluded after idle")
	}
	return summarise(took), failed, nil
}

// sustainedNote says the sustained rate of a goals/s run, or that the run
// was too short for one.
func sustainedNote(r float64, conc int) string {
	if r == 0 {
		return fmt.Sprintf("too few goals for a sustained rate with %d in flight", conc)
	}
	return fmt.Sprintf("sustained %.0f/s (all %d in flight, start and end left out)", r, conc)
}

// goalRun is what goalThroughput measured.
type goalRun struct {
	perSec    float64 // concluded goals over the whole run's wall time
	sustained float64 // concluded goals/s with conc in flight all along (0: too short a run)
	lat       latencies
	failed    int
	turns     span // the turns each concluded goal's chat took
}

// span is the least and the most of some counts.
type span struct{ lo, hi int }

func (s *span) add(n int) {
	if n <= 0 {
		return
	}
	if s.lo == 0 || n < s.lo {
		s.lo = n
	}
	s.hi = max(s.hi, n)
}

func (s span) String() string {
	if s.lo == s.hi {
		return strconv.Itoa(s.lo)
	}
	return fmt.Sprintf("%d–%d", s.lo, s.hi)
}

// sustainedRate is the rate of the goals that concluded (at ends, since the
// run started, in order) while conc were in flight all along: between the
// conc-th and the (n-conc)-th to conclude, leaving out the start, before
// the first goals come back, and the end, with fewer than conc left. 0 when
// the run is too short to have such a stretch.
func sustainedRate(ends []time.Duration, conc int) float64 {
	lo, hi := conc, len(ends)-1-conc
	if conc < 2 || hi-lo < conc {
		return 0
	}
	return float64(hi-lo) / (ends[hi] - ends[lo]).Seconds()
}

// goalThroughput runs n goals, conc at a time, each with wait:true.
func (e *benchEnv) goalThroughput(ctx context.Context, n, conc int) (goalRun, error) {
	jobs := make(chan int)
	var (
		run      goalRun
		mu       sync.Mutex
		elapsed  []time.Duration
		ends     []time.Duration
		firstErr error
		wg       sync.WaitGroup
	)
	start := time.Now()
	for range conc {
		wg.Go(func() {
			for range jobs {
				took, turns, err := e.runGoal(ctx)
				mu.Lock()
				if err != nil {
					run.failed++
					if firstErr == nil {
						firstErr = err
					}
				} else {
					run.turns.add(turns)
					elapsed = append(elapsed, took)
					ends = append(ends, time.Since(start))
				}
				mu.Unlock()
			}
		})
	}
	for i := range n {
		select {
		case jobs <- i:
		case <-ctx.Done():
		}
	}
	close(jobs)
	wg.Wait()
	wall := time.Since(start)
	if firstErr != nil {
		fmt.Fprintf(os.Stderr, "bench: first goal that did not conclude: %v\n", firstErr)
	}
	if len(elapsed) == 0 && firstErr != nil {
		return run, firstErr
	}
	run.perSec, run.sustained, run.lat = float64(n-run.failed)/wall.Seconds(), sustainedRate(ends, conc), summarise(elapsed)
	return run, nil
}

// storedEntries is how many entries the runtime's streams (its KV buckets
// among them) have stored so far: the sum of their last sequences. Unlike
// time, a goal's count of them does not move with the host.
func (e *benchEnv) storedEntries(ctx context.Context) (uint64, error) {
	var n uint64
	streams := e.b.JetStream().ListStreams(ctx)
	for info := range streams.Info() {
		n += info.State.LastSeq
	}
	return n, streams.Err()
}

// allocated is the bytes the process has allocated on the heap so far.
func allocated() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}

func heap() float64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc)
}

// memoryPerAgent starts n idle agents and divides the heap they add.
func (e *benchEnv) memoryPerAgent(ctx context.Context, n int) (float64, error) {
	return e.memoryPerAgentWith(ctx, n, "idle", nil)
}

// memoryPerAgentWith names the agents prefix-<i> and calls during, if not
// nil, once the heap is measured while the agents still run.
func (e *benchEnv) memoryPerAgentWith(ctx context.Context, n int, prefix string, during func()) (float64, error) {
	before := heap()
	agents := make([]agentkit.Agent, n)
	for i := range agents {
		agents[i] = agentkit.Agent{
			Card:   protocol.AgentCard{Name: fmt.Sprintf("%s-%d", prefix, i), Description: "An idle agent that waits for work number " + strconv.Itoa(i)},
			Worker: agentkit.WorkerFunc(func(context.Context, agentkit.Task) (agentkit.Result, error) { return agentkit.Result{}, nil }),
			Policy: rules.New(rules.Config{}),
		}
	}
	nc, err := e.b.NewConn("bench-idle")
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	rt, err := agentkit.NewRuntime(nc, e.b.Subjects(), agents)
	if err != nil {
		return 0, err
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- rt.Run(rctx) }()
	defer func() { cancel(); <-done }()
	for i := range n {
		if err := waitOnline(ctx, e.b, fmt.Sprintf("%s-%d", prefix, i)); err != nil {
			return 0, err
		}
	}
	per := (heap() - before) / float64(n)
	if during != nil {
		during()
	}
	return per, nil
}

// memoryPerChat opens n chats with a silent launcher and divides the heap
// they add (the referee's record, the members' state).
func (e *benchEnv) memoryPerChat(ctx context.Context, n int) (float64, error) {
	lead, err := e.newWireMember(ctx, "chat-lead", []string{"bench-counter"})
	if err != nil {
		return 0, err
	}
	defer lead.nc.Close()
	before := heap()
	var ids []string
	for range n {
		id, _, err := e.openWireChat(ctx, "chat-lead", 10)
		if err != nil {
			return 0, err
		}
		ids = append(ids, id)
	}
	per := (heap() - before) / float64(n)
	for _, id := range ids {
		e.cancelGoal(ctx, id)
	}
	return per, nil
}

// buildSearchIndex fills a search index with n synthetic cards and says
// how long that took.
func buildSearchIndex(ctx context.Context, n int) (*search.Index, time.Duration, error) {
	ix, err := search.NewIndex(nil)
	if err != nil {
		return nil, 0, err
	}
	phrase := benchPhrases(rand.New(rand.NewPCG(1, 2)))
	t0 := time.Now()
	for i := range n {
		d := search.Doc{Name: "agent-" + strconv.Itoa(i), Description: phrase(14), Type: "tool",
			Capabilities: []string{phrase(3), phrase(3), phrase(2)}, Tags: []string{phrase(1), phrase(1)}}
		if err := ix.Upsert(ctx, d); err != nil {
			return nil, 0, err
		}
	}
	return ix, time.Since(t0), nil
}

// timeSearches times searches queries of ten random words against ix; cpu
// is the process's CPU time per search (0 where it cannot be read).
func timeSearches(ctx context.Context, ix *search.Index, searches int) (_ latencies, cpu time.Duration, _ error) {
	phrase := benchPhrases(rand.New(rand.NewPCG(3, uint64(searches))))
	// The build's (or the last run's) garbage is collected before the
	// searches are timed, as it is long before a registry's searches.
	runtime.GC()
	out := make([]time.Duration, 0, searches)
	c0 := processCPU()
	for range searches {
		q := search.Query{Texts: []string{phrase(10)}, Limit: 10}
		t := time.Now()
		if _, err := ix.Search(ctx, q); err != nil {
			return latencies{}, 0, err
		}
		out = append(out, time.Since(t))
	}
	if searches > 0 {
		cpu = (processCPU() - c0) / time.Duration(searches)
	}
	return summarise(out), cpu, nil
}

// benchPhrases returns a maker of k random words of benchVocabulary.
func benchPhrases(rng *rand.Rand) func(k int) string {
	return func(k int) string {
		p := make([]string, k)
		for i := range p {
			p[i] = benchVocabulary[rng.IntN(len(benchVocabulary))]
		}
		return strings.Join(p, " ")
	}
}

// benchVocabulary is the word pool of the synthetic cards and tasks.
var benchVocabulary = strings.Fields(`analyse translate summarise convert schedule forecast detect classify
	extract generate review optimise monitor plan design test deploy audit reconcile predict cluster render
	invoice contract recipe budget weather flight hotel ticket patient symptom invoice tax payroll code bug
	pipeline container database query index report chart map image audio video subtitle playlist lyrics poem
	essay email letter resume interview lesson quiz exam homework garden plant soil water energy solar battery
	vehicle route traffic parcel warehouse stock price market portfolio risk loan mortgage insurance claim
	legal clause privacy security password network server cloud cost latency memory log alert incident
	customer churn survey feedback sentiment review product catalogue inventory supplier order shipment
	recipe nutrition calorie workout sleep habit meditation travel visa language grammar pronunciation`)

// writeHeapProfile writes what is live on the heap after a collection.
func writeHeapProfile(path string) error {
	pf, err := os.Create(path)
	if err != nil {
		return err
	}
	defer pf.Close()
	runtime.GC()
	return pprof.WriteHeapProfile(pf)
}
