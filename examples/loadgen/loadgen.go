package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
)

// config is what the flags set.
type config struct {
	URL         string        // NATS URL
	Prefix      string        // subject prefix
	CredsDir    string        // <agent>.creds files; "" for an insecure server
	SubmitCreds string        // the submitter's creds; "": CredsDir/admin.creds, or none without CredsDir
	Teams       int           // teams of one launcher and three workers
	Goals       int           // goals of the load phase
	Concurrency int           // goals in flight in the load phase
	Solo        int           // goals one at a time afterwards
	Runs        int           // times the reference, load and solo phases are run
	GoalTimeout time.Duration // longest wait for one goal's result
	ReadyWait   time.Duration // longest wait for the server to be ready
	Invite      bool          // cards without auto_join: each team-up invites the workers

	// dropInbox, when set (tests only), makes the agents lose the inbox
	// messages it returns true for, as core NATS delivery may.
	dropInbox func(agent string, m message) bool
	// filled, when set (tests only), hears of each gap filled from history.
	filled func(agent, comm string)
}

func defaults() config {
	return config{
		URL: "nats://127.0.0.1:4222", Prefix: "ioa", CredsDir: filepath.Join("data", "creds"),
		Teams: 1, Goals: 1000, Concurrency: 50, Solo: 200, Runs: 1,
		GoalTimeout: 2 * time.Minute, ReadyWait: 30 * time.Second,
	}
}

// workersPerTeam is fixed: three sync tasks, one per worker.
const workersPerTeam = 3

func leadName(i int) string      { return "lg-lead-" + strconv.Itoa(i) }
func workerName(i, j int) string { return "lg-work-" + strconv.Itoa(i) + "-" + strconv.Itoa(j) }

// agentNames are the names of every agent of cfg, launchers first.
func agentNames(teams int) []string {
	var names []string
	for i := range teams {
		names = append(names, leadName(i))
	}
	for i := range teams {
		for j := 1; j <= workersPerTeam; j++ {
			names = append(names, workerName(i, j))
		}
	}
	return names
}

// errorLog counts errors and keeps the first.
type errorLog struct {
	mu    sync.Mutex
	n     int
	first error
}

func (e *errorLog) add(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.n++
	if e.first == nil {
		e.first = err
	}
}

func (e *errorLog) get() (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n, e.first
}

// phase is what one series of goals measured.
type phase struct {
	goals    int
	ok       []time.Duration // submit to result, of the goals that concluded
	failed   int
	firstErr error
	wall     time.Duration
	ends     []time.Duration // since the phase started, when each concluded goal did, in order
}

// sustained is the rate of concluded goals while conc were in flight all
// along: between the conc-th and the (n-conc)-th to conclude, leaving out
// the start, when the first conc goals have not come back yet, and the end,
// when fewer than conc are left. 0 when the phase is too short to have one.
func (p phase) sustained(conc int) float64 {
	lo, hi := conc, len(p.ends)-1-conc
	if conc < 2 || hi-lo < conc {
		return 0
	}
	return float64(hi-lo) / (p.ends[hi] - p.ends[lo]).Seconds()
}

// run is the load generator: it starts the teams, waits for the server to
// be ready, runs the load phase and the solo phase, and prints the table on
// stdout (progress on stderr). The error is non-nil when a goal did not
// conclude, or nothing could run.
func run(ctx context.Context, cfg config, stdout, stderr io.Writer) error {
	if cfg.Teams < 1 || cfg.Goals < 0 || cfg.Concurrency < 1 || cfg.Solo < 0 || cfg.Runs < 1 {
		return fmt.Errorf("want --teams >= 1, --goals >= 0, --concurrency >= 1, --solo >= 0, --runs >= 1")
	}
	if cfg.GoalTimeout <= 0 {
		cfg.GoalTimeout = defaults().GoalTimeout
	}
	if cfg.SubmitCreds == "" && cfg.CredsDir != "" {
		cfg.SubmitCreds = filepath.Join(cfg.CredsDir, "admin.creds")
	}
	// Every credential first, before any connection: a missing one is a
	// setup mistake, reported with the command that fixes it.
	names := agentNames(cfg.Teams)
	creds := map[string]string{}
	var missing []string
	for _, n := range names {
		f, err := agentCredsFile(cfg.CredsDir, n)
		switch {
		case err == nil:
			creds[n] = f
		case errors.Is(err, errNoCreds):
			missing = append(missing, n)
		default:
			return err
		}
	}
	if len(missing) > 0 {
		return missingCreds(cfg.CredsDir, missing)
	}
	errs := &errorLog{}
	submitter, err := newSubmitter(cfg, errs.add)
	if err != nil {
		return err
	}
	defer submitter.nc.Close()

	actx, stopAgents := context.WithCancel(context.WithoutCancel(ctx))
	var agents []*agent
	var beats sync.WaitGroup
	defer func() {
		stopAgents()
		beats.Wait()
		for _, a := range agents {
			a.stop()
		}
	}()
	incarnation := "lg" + strconv.FormatInt(time.Now().UnixNano(), 36) + strconv.Itoa(os.Getpid())
	for i := range cfg.Teams {
		var workers []string
		for j := 1; j <= workersPerTeam; j++ {
			workers = append(workers, workerName(i, j))
		}
		team := append([]string{leadName(i)}, workers...)
		for k, n := range team {
			nc, err := connect(cfg.URL, creds[n], n, n, errs.add)
			if err != nil {
				return err
			}
			a := &agent{name: n, lead: k == 0, prefix: cfg.Prefix, nc: nc, errs: errs, drop: cfg.dropInbox, filled: cfg.filled,
				card: agentCard{Name: n, Type: "tool", Tags: []string{"loadgen"}, Incarnation: incarnation, AutoJoin: !cfg.Invite,
					Description: "A wire agent of the ioa load generator (examples/loadgen): does one numbered step of a load-test goal."}}
			if a.lead {
				a.workers = workers
				a.card.Type = "assistant"
				a.card.Description = "The launcher of a load-generator team (examples/loadgen): assigns three sync tasks and concludes."
			}
			if err := a.start(actx); err != nil {
				nc.Close()
				return err
			}
			agents = append(agents, a)
			beats.Go(func() { a.heartbeats(actx) })
		}
	}
	fmt.Fprintf(stderr, "loadgen: %d team(s), %d wire agents registered on %s\n", cfg.Teams, len(agents), cfg.URL)
	if err := submitter.waitReady(ctx, cfg.ReadyWait, stderr); err != nil {
		return err
	}

	// Each run: the reference, a request-reply to the server and back over
	// the same TCP connection (its health endpoint answers from memory),
	// the floor under each of a goal's sequential steps; then the load
	// phase and the solo phase. Goals are numbered on across runs.
	var ref, load, solo []phase
	for r := range cfg.Runs {
		if ctx.Err() != nil {
			break
		}
		if cfg.Runs > 1 {
			fmt.Fprintf(stderr, "loadgen: run %d of %d\n", r+1, cfg.Runs)
		}
		base := r * (cfg.Goals + cfg.Solo)
		ref = append(ref, submitter.roundTrips(ctx, 500))
		load = append(load, submitter.series(ctx, "load", cfg.Goals, cfg.Concurrency, base, stderr))
		if cfg.Solo > 0 && ctx.Err() == nil {
			solo = append(solo, submitter.series(ctx, "solo", cfg.Solo, 1, base+cfg.Goals, stderr))
		}
	}
	// Every goal has ended (or been given up): stop the agents (they
	// deregister), then count their errors.
	stopAgents()
	beats.Wait()
	for _, a := range agents {
		a.stop()
	}
	agents = nil
	agentErrs, firstAgentErr := errs.get()

	printTable(stdout, cfg, ref, load, solo, agentErrs)
	failed, total, firstErr := notConcluded(slices.Concat(load, solo))
	if firstErr != nil {
		fmt.Fprintf(stderr, "loadgen: first goal that did not conclude: %v\n", firstErr)
	}
	if firstAgentErr != nil {
		fmt.Fprintf(stderr, "loadgen: %d agent or connection error(s); the first: %v\n", agentErrs, firstAgentErr)
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d goals did not conclude; the first: %v", failed, total, firstErr)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return nil
}

// submitter submits goals with wait:true on its own connection.
type submitter struct {
	cfg     config
	nc      *nats.Conn
	subject string // <p>.goal.submit, or its identity-bound form
	health  string
}

func newSubmitter(cfg config, onErr func(error)) (*submitter, error) {
	s := &submitter{cfg: cfg, subject: cfg.Prefix + ".goal.submit", health: cfg.Prefix + ".health"}
	inbox := ""
	if cfg.SubmitCreds != "" {
		if _, err := os.Stat(cfg.SubmitCreds); err != nil {
			return nil, fmt.Errorf("no credentials to submit goals with: %w; a secure ioa serve writes the admin's as <data dir>/creds/admin.creds, or issue a client's with: ioa agent add loadgen --role client --data-dir <ioa data dir> --out %s", err, cfg.SubmitCreds)
		}
		id, err := readIdentity(cfg.SubmitCreds)
		if err != nil {
			return nil, err
		}
		switch id.Role {
		case "admin":
		case "client", "agent":
			// Every identity but the admin submits on the form that
			// carries its name, and reads replies under its own inbox.
			s.subject += "." + id.Name
			inbox = id.Name
		default:
			return nil, fmt.Errorf("%s holds the credentials of %s %q, who may not submit goals: use the admin's or a client's (ioa agent add NAME --role client)", cfg.SubmitCreds, id.Role, id.Name)
		}
	}
	nc, err := connect(cfg.URL, cfg.SubmitCreds, inbox, "submitter", onErr)
	if err != nil {
		return nil, err
	}
	s.nc = nc
	return s, nil
}

// waitReady asks <p>.health until the orchestrator says ready.
func (s *submitter) waitReady(ctx context.Context, wait time.Duration, stderr io.Writer) error {
	deadline := time.Now().Add(wait)
	for {
		var h health
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := request(rctx, s.nc, s.health, struct{}{}, &h)
		cancel()
		if err == nil && h.Ready {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("%s says %s, waiting for %v", s.health, h.Status, h.Waiting)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the server is not ready after %s: %w", wait, err)
		}
		fmt.Fprintf(stderr, "loadgen: waiting for the server: %v\n", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// roundTrips times n health requests one after another.
func (s *submitter) roundTrips(ctx context.Context, n int) phase {
	p := phase{goals: n}
	for range n {
		var h health
		t0 := time.Now()
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := request(rctx, s.nc, s.health, struct{}{}, &h)
		cancel()
		if err != nil {
			p.failed++
			continue
		}
		p.ok = append(p.ok, time.Since(t0))
	}
	return p
}

// series submits n goals, conc at a time, numbered from base; goal i goes
// to team i mod teams.
func (s *submitter) series(ctx context.Context, name string, n, conc, base int, stderr io.Writer) phase {
	p := phase{goals: n}
	var (
		mu   sync.Mutex
		next atomic.Int64
		done atomic.Int64
		wg   sync.WaitGroup
	)
	stopProgress := make(chan struct{})
	var progress sync.WaitGroup
	progress.Go(func() {
		for {
			select {
			case <-stopProgress:
				return
			case <-time.After(time.Second):
				mu.Lock()
				failed := p.failed
				mu.Unlock()
				fmt.Fprintf(stderr, "loadgen: %s: %d/%d goals done, %d not concluded\n", name, done.Load(), n, failed)
			}
		}
	})
	start := time.Now()
	for range conc {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				d, err := s.submit(ctx, base+i)
				done.Add(1)
				mu.Lock()
				if err != nil {
					p.failed++
					if p.firstErr == nil {
						p.firstErr = err
					}
				} else {
					p.ok = append(p.ok, d)
					p.ends = append(p.ends, time.Since(start))
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	p.wall = time.Since(start)
	close(stopProgress)
	progress.Wait()
	fmt.Fprintf(stderr, "loadgen: %s: %d goals in %s, %d not concluded\n", name, n, p.wall.Round(time.Millisecond), p.failed)
	return p
}

// submit runs goal i with wait:true and returns the time from submit to
// result. A goal that ends other than concluded with every task done is an
// error.
func (s *submitter) submit(ctx context.Context, i int) (time.Duration, error) {
	team := i % s.cfg.Teams
	var workers []string
	for j := 1; j <= workersPerTeam; j++ {
		workers = append(workers, workerName(team, j))
	}
	req := goalRequest{
		Goal:     fmt.Sprintf("Load-test goal %d: three steps, one per worker.", i),
		Launcher: leadName(team), Team: workers, Wait: true,
		Timeout: s.cfg.GoalTimeout.String(),
	}
	// A wait:true submit is not sent again on a missing reply (that would
	// start a second goal), only on 503: nobody took it, or the service
	// asks for it again.
	ctx, cancel := context.WithTimeout(ctx, s.cfg.GoalTimeout+10*time.Second)
	defer cancel()
	var res goalResult
	t0 := time.Now()
	backoff := 5 * time.Millisecond
	for {
		m, err := s.nc.RequestWithContext(ctx, s.subject, mustJSON(req))
		if err == nil {
			err = decodeReply(s.subject, m, &res)
		} else if errors.Is(err, nats.ErrNoResponders) {
			err = &wireError{Subject: s.subject, Status: 503, Code: "no_responders", Message: "no goal service answers"}
		}
		if status(err) != 503 || ctx.Err() != nil {
			if err != nil {
				return 0, fmt.Errorf("goal %d: %w", i, err)
			}
			break
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("goal %d: %w", i, err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 250*time.Millisecond)
	}
	d := time.Since(t0)
	if res.Status != "concluded" || (res.Outcome != "" && res.Outcome != "succeeded") {
		return 0, fmt.Errorf("goal %d (%s, chat %s): status %s, outcome %s: %s", i, res.GoalID, res.CommID, res.Status, res.Outcome, res.Reason)
	}
	return d, nil
}

// latencies are the p50 and p99 of d.
func latencies(d []time.Duration) (p50, p99 time.Duration) {
	if len(d) == 0 {
		return 0, 0
	}
	d = slices.Clone(d)
	slices.Sort(d)
	at := func(q float64) time.Duration { return d[min(len(d)-1, int(q*float64(len(d))))] }
	return at(0.50), at(0.99)
}

func fmtDur(d time.Duration) string {
	if d < time.Millisecond {
		return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
	}
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}

func fmtLat(p phase) string {
	if len(p.ok) == 0 {
		return "- (no goal concluded)"
	}
	p50, p99 := latencies(p.ok)
	return fmtDur(p50) + " / " + fmtDur(p99)
}

// notConcluded counts the goals of phases that did not conclude, all the
// goals, and returns the first error among them.
func notConcluded(phases []phase) (failed, total int, first error) {
	for _, p := range phases {
		failed += p.failed
		total += p.goals
		if first == nil {
			first = p.firstErr
		}
	}
	return failed, total, first
}

// rate is a load phase's concluded goals over its wall time.
func (p phase) rate() float64 {
	if p.wall <= 0 {
		return 0
	}
	return float64(len(p.ok)) / p.wall.Seconds()
}

// p50 is the median of the phase's concluded goals (or round trips); a
// phase where none concluded counts as the slowest.
func (p phase) p50() float64 {
	if len(p.ok) == 0 {
		return math.Inf(1)
	}
	p50, _ := latencies(p.ok)
	return float64(p50)
}

// median returns the phase whose key is the median of the runs and, for
// more than one run, a note of every run's figure in run order. Of an even
// number of runs it takes the worse of the middle two (the lower when
// higherBetter, else the higher).
func median(runs []phase, key func(phase) float64, higherBetter bool, format func(float64) string) (phase, string) {
	// Each key once: a latency key sorts the run's samples.
	keys := make([]float64, len(runs))
	order := make([]int, len(runs))
	for i, p := range runs {
		keys[i], order[i] = key(p), i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(keys[a], keys[b]) })
	mid := len(runs) / 2
	if higherBetter {
		mid = (len(runs) - 1) / 2
	}
	m := runs[order[mid]]
	if len(runs) < 2 {
		return m, ""
	}
	each := make([]string, len(runs))
	for i, k := range keys {
		each[i] = format(k)
	}
	return m, fmt.Sprintf("  (median of %d runs: %s)", len(runs), strings.Join(each, ", "))
}

// printTable prints the figures: of several runs, each the run with the
// median figure, and every run's figure beside it.
func printTable(w io.Writer, cfg config, refs, loads, solos []phase, agentErrs int) {
	fmt.Fprintf(w, "ioa loadgen over %s: %d team(s) of 1 launcher + %d workers, wire protocol only\n\n", cfg.URL, cfg.Teams, workersPerTeam)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tvalue")
	fmt.Fprintln(tw, "------\t-----")
	perSec := func(v float64) string { return fmt.Sprintf("%.1f", v) }
	p50 := func(v float64) string {
		if math.IsInf(v, 1) {
			return "-"
		}
		return fmtDur(time.Duration(v))
	}
	failed, total, _ := notConcluded(slices.Concat(loads, solos))
	if len(loads) > 0 {
		load, note := median(loads, phase.rate, true, perSec)
		fmt.Fprintf(tw, "concluded goals/s (%d in flight)\t%.1f%s\n", cfg.Concurrency, load.rate(), note)
		sus, note := median(loads, func(p phase) float64 { return p.sustained(cfg.Concurrency) }, true, perSec)
		if r := sus.sustained(cfg.Concurrency); r > 0 {
			fmt.Fprintf(tw, "sustained goals/s (all %d in flight, start and end left out)\t%.1f%s\n", cfg.Concurrency, r, note)
		}
		lat, note := median(loads, phase.p50, false, p50)
		fmt.Fprintf(tw, "latency under load p50 / p99\t%s%s\n", fmtLat(lat), note)
	}
	if len(solos) > 0 {
		solo, note := median(solos, phase.p50, false, p50)
		fmt.Fprintf(tw, "solo latency p50 / p99 (%d goals, one at a time)\t%s%s\n", solo.goals, fmtLat(solo), note)
	} else {
		fmt.Fprintf(tw, "solo latency p50 / p99\tskipped (--solo 0)\n")
	}
	if len(refs) > 0 {
		ref, note := median(refs, phase.p50, false, p50)
		fmt.Fprintf(tw, "reference: request-reply to the server p50 / p99\t%s%s\n", fmtLat(ref), note)
	}
	fmt.Fprintf(tw, "goals not concluded\t%d of %d\n", failed, total)
	fmt.Fprintf(tw, "agent and connection errors\t%d\n", agentErrs)
	tw.Flush()
}
