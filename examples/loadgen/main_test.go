package main

import (
	"bytes"
	"context"
	"go/build"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/bus/auth"
	"github.com/ioa-nats/ioa/internal/stacktest"
	"github.com/ioa-nats/ioa/orchestrator"
)

// secureStack starts what `ioa serve` runs (an embedded NATS server that
// requires credentials, with a TCP listener on a free loopback port; the
// registry; the orchestrator) and issues, in its data dir's creds folder
// beside the admin.creds the server wrote there, the agent credentials of
// the load generator's teams: the folder `ioa serve` and `ioa agent add`
// use, as scripts/bench-wire.sh does.
func secureStack(t *testing.T, teams int, o orchestrator.Config) (*stacktest.Stack, string) {
	t.Helper()
	s := stacktest.Start(t, stacktest.Options{Secure: true, Orchestrator: o})
	dataDir := s.Bus.Config().DataDir
	dir := filepath.Join(dataDir, "creds")
	if _, err := os.Stat(filepath.Join(dir, "admin.creds")); err != nil {
		t.Fatalf("the secure server wrote no admin creds: %v", err)
	}
	a, err := auth.Load(bus.AuthDir(dataDir))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range agentNames(teams) {
		if err := a.WriteCreds(filepath.Join(dir, n+".creds"), auth.Identity{Name: n, Role: auth.Agent}, s.Bus.Subjects().Prefix()); err != nil {
			t.Fatal(err)
		}
	}
	return s, dir
}

func testConfig(s *stacktest.Stack, dir string) config {
	cfg := defaults()
	cfg.URL = s.URL
	cfg.CredsDir = dir
	cfg.GoalTimeout = time.Minute
	return cfg
}

// TestRun drives a real runtime over TCP with the wire agents, in two runs,
// and checks every goal, the table, and one chat's log as the protocol
// shows it.
func TestRun(t *testing.T) {
	s, dir := secureStack(t, 1, orchestrator.Config{})
	if !strings.HasPrefix(s.URL, "nats://127.0.0.1:") {
		t.Fatalf("the stack listens on %q, want TCP on loopback", s.URL)
	}
	cfg := testConfig(s, dir)
	cfg.Goals, cfg.Concurrency, cfg.Solo, cfg.Runs = 20, 5, 3, 2
	var out, errOut bytes.Buffer
	if err := run(t.Context(), cfg, &out, &errOut); err != nil {
		t.Fatalf("run: %v\nstdout:\n%s\nstderr:\n%s", err, &out, &errOut)
	}
	table := out.String()
	t.Logf("\n%s", table)
	const dur, runs = `[0-9.]+ (ms|µs)`, `  \(median of 2 runs: `
	for _, re := range []string{
		`concluded goals/s \(5 in flight\)\s+[0-9]+\.[0-9]` + runs + `[0-9]+\.[0-9], [0-9]+\.[0-9]\)\n`,
		`sustained goals/s \(all 5 in flight, start and end left out\)\s+[0-9]+\.[0-9]` + runs,
		`latency under load p50 / p99\s+` + dur + ` / ` + dur + runs + dur + `, ` + dur + `\)\n`,
		`solo latency p50 / p99 \(3 goals, one at a time\)\s+` + dur + ` / ` + dur + runs,
		`reference: request-reply to the server p50 / p99\s+` + dur + ` / ` + dur + runs,
		`goals not concluded\s+0 of 46\n`,
		`agent and connection errors\s+0\n`,
	} {
		if !regexp.MustCompile(re).MatchString(table) {
			t.Errorf("the table has no line matching %s:\n%s", re, table)
		}
	}
	if strings.Contains(table, "concluded goals/s (5 in flight)  0.0") {
		t.Errorf("a rate of 0 goals/s:\n%s", table)
	}

	// The goal records, read by the admin: 46 goals led by lg-lead-0,
	// every one concluded with all its tasks done.
	var list protocol.GoalListReply
	if err := s.Request(t, s.Bus.Subjects().Goal(bus.GoalList), protocol.GoalListRequest{Status: "all", Limit: 1000}, &list); err != nil {
		t.Fatal(err)
	}
	var ours []protocol.GoalStatus
	for _, g := range list.Goals {
		if g.Launcher == "lg-lead-0" {
			ours = append(ours, g)
		}
	}
	if len(ours) != 46 {
		t.Fatalf("%d goals led by lg-lead-0, want 46", len(ours))
	}
	for _, g := range ours {
		if g.Status != protocol.GoalConcluded || g.Outcome != protocol.OutcomeSucceeded {
			t.Errorf("goal %s: status %s, outcome %s", g.GoalID, g.Status, g.Outcome)
		}
	}

	// One chat, read through the protocol's history endpoint: the start,
	// one assignment of three sync tasks, exactly three completed task
	// results (one per worker) and the launcher's conclusion, last.
	g := ours[len(ours)/2]
	history, err := s.Bus.Subjects().History("lg-lead-0", g.CommID)
	if err != nil {
		t.Fatal(err)
	}
	var h protocol.HistoryReply
	if err := s.Request(t, history, protocol.HistoryRequest{}, &h); err != nil {
		t.Fatal(err)
	}
	var results, conclusions, assigns int
	workers := map[string]bool{}
	for _, m := range h.Messages {
		switch m.Type {
		case protocol.MsgTaskResult:
			results++
			if m.TaskStatus != protocol.TaskCompleted {
				t.Errorf("task %s: %s (%s)", m.TaskID, m.TaskStatus, m.TaskConclusion)
			}
			workers[m.Sender] = true
		case protocol.MsgConclusion:
			conclusions++
			if m.Sender != "lg-lead-0" {
				t.Errorf("conclusion from %s", m.Sender)
			}
		case protocol.MsgSyncTaskAssign:
			assigns++
			if len(m.Tasks) != 3 {
				t.Errorf("an assignment of %d tasks, want 3", len(m.Tasks))
			}
		}
	}
	if results != 3 || len(workers) != 3 || conclusions != 1 || assigns != 1 {
		t.Errorf("chat %s: %d task results from %d workers, %d conclusions, %d assignments; want 3, 3, 1, 1:\n%+v", g.CommID, results, len(workers), conclusions, assigns, h.Messages)
	}
	if n := len(h.Messages); n == 0 || h.Messages[n-1].Type != protocol.MsgConclusion {
		t.Errorf("chat %s does not end with the conclusion", g.CommID)
	}

	// The agents left: their cards are deregistered.
	var info protocol.AgentInfo
	err = s.Request(t, s.Bus.Subjects().Registry(bus.RegistryGet), protocol.NameRequest{Name: "lg-lead-0"}, &info)
	if pe := protocol.AsError(err); err == nil || pe.Code != protocol.ErrNotFound.Code {
		t.Errorf("lg-lead-0 after the run: %v, want not_found", err)
	}
}

// TestRecoversLostInboxMessages loses inbox messages as core NATS may.
// Worker 1 of each team loses the first delivery of its assignment: the
// other workers' results show it a gap, and it reads the history. The
// launcher loses the first delivery of every task result, the last of which
// hands it the turn back: nothing follows it in the chat, so the referee's
// nudge (a third of the speaker timeout) brings that one again, which shows
// the gap. Every goal must still conclude. Two teams, and a submitter with
// client credentials, which submits on its identity-bound subject.
func TestRecoversLostInboxMessages(t *testing.T) {
	s, dir := secureStack(t, 2, orchestrator.Config{SpeakerTimeout: 6 * time.Second})
	a, err := auth.Load(bus.AuthDir(s.Bus.Config().DataDir))
	if err != nil {
		t.Fatal(err)
	}
	client := filepath.Join(t.TempDir(), "ci.creds")
	if err := a.WriteCreds(client, auth.Identity{Name: "ci", Role: auth.Client}, s.Bus.Subjects().Prefix()); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(s, dir)
	cfg.SubmitCreds = client
	cfg.Teams, cfg.Goals, cfg.Concurrency, cfg.Solo = 2, 4, 4, 1
	var (
		mu      sync.Mutex
		seen    = map[string]bool{}
		dropped = map[string]int{}
		fills   = map[string]map[string]bool{} // lead or work -> chats filled
	)
	role := func(agent string) string {
		if strings.HasPrefix(agent, "lg-lead-") {
			return "lead"
		}
		return "work"
	}
	cfg.dropInbox = func(agent string, m message) bool {
		lose := (strings.HasPrefix(agent, "lg-work-") && strings.HasSuffix(agent, "-1") && m.Type == typeSyncAssign) ||
			(strings.HasPrefix(agent, "lg-lead-") && m.Type == typeTaskResult)
		if !lose {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		key := agent + "/" + m.CommID + "/" + m.ID
		if seen[key] {
			return false
		}
		seen[key] = true
		dropped[role(agent)]++
		return true
	}
	cfg.filled = func(agent, comm string) {
		mu.Lock()
		defer mu.Unlock()
		if fills[role(agent)] == nil {
			fills[role(agent)] = map[string]bool{}
		}
		fills[role(agent)][comm] = true
	}
	var out, errOut bytes.Buffer
	if err := run(t.Context(), cfg, &out, &errOut); err != nil {
		t.Fatalf("run: %v\nstdout:\n%s\nstderr:\n%s", err, &out, &errOut)
	}
	if !strings.Contains(out.String(), "goals not concluded") || !regexp.MustCompile(`goals not concluded\s+0 of 5\n`).MatchString(out.String()) {
		t.Errorf("table:\n%s", &out)
	}
	mu.Lock()
	defer mu.Unlock()
	if dropped["lead"] != 15 || dropped["work"] != 5 {
		t.Errorf("lost %d launcher and %d worker deliveries, want 15 and 5", dropped["lead"], dropped["work"])
	}
	if len(fills["lead"]) != 5 || len(fills["work"]) != 5 {
		t.Errorf("gaps filled from history in %d chats by launchers and %d by workers, want 5 and 5", len(fills["lead"]), len(fills["work"]))
	}
	var list protocol.GoalListReply
	if err := s.Request(t, s.Bus.Subjects().Goal(bus.GoalList), protocol.GoalListRequest{Status: "all"}, &list); err != nil {
		t.Fatal(err)
	}
	byLead := map[string]int{}
	for _, g := range list.Goals {
		if g.Status != protocol.GoalConcluded {
			t.Errorf("goal %s: %s", g.GoalID, g.Status)
		}
		if g.Submitter != "ci" {
			t.Errorf("goal %s submitted by %q, want ci", g.GoalID, g.Submitter)
		}
		byLead[g.Launcher]++
	}
	if byLead["lg-lead-0"] != 3 || byLead["lg-lead-1"] != 2 {
		t.Errorf("goals per launcher %v, want lg-lead-0: 3, lg-lead-1: 2", byLead)
	}
}

// TestMissingCreds: without an agent's creds, run says which and how to
// issue them, before it connects anywhere.
func TestMissingCreds(t *testing.T) {
	dir := t.TempDir()
	a, err := auth.LoadOrCreate(filepath.Join(t.TempDir(), "auth"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"lg-lead-0", "lg-work-0-1"} {
		if err := a.WriteCreds(filepath.Join(dir, n+".creds"), auth.Identity{Name: n, Role: auth.Agent}, "ioa"); err != nil {
			t.Fatal(err)
		}
	}
	cfg := defaults()
	cfg.URL = "nats://127.0.0.1:1" // nothing listens: a connection would fail otherwise
	cfg.CredsDir = dir
	err = run(t.Context(), cfg, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil {
		t.Fatal("run with missing creds: no error")
	}
	msg := err.Error()
	for _, want := range []string{
		`no credentials for agent "lg-work-0-2"`,
		"2 agent(s) missing",
		"ioa agent add lg-work-0-2 --data-dir <ioa data dir> --out " + filepath.Join(dir, "lg-work-0-2.creds"),
		"ioa agent add lg-work-0-3 ",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q\nwant it to contain %q", msg, want)
		}
	}
	if strings.Contains(msg, "agent add lg-lead-0 ") {
		t.Errorf("error %q names lg-lead-0, whose creds exist", msg)
	}

	// Creds of another name under an agent's file name.
	if err := a.WriteCreds(filepath.Join(dir, "lg-work-0-2.creds"), auth.Identity{Name: "somebody", Role: auth.Agent}, "ioa"); err != nil {
		t.Fatal(err)
	}
	if err := a.WriteCreds(filepath.Join(dir, "lg-work-0-3.creds"), auth.Identity{Name: "lg-work-0-3", Role: auth.Agent}, "ioa"); err != nil {
		t.Fatal(err)
	}
	err = run(t.Context(), cfg, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), `agent "somebody", not of agent "lg-work-0-2"`) {
		t.Errorf("creds of another name: %v", err)
	}

	// Every agent's creds, but none to submit with.
	if err := a.WriteCreds(filepath.Join(dir, "lg-work-0-2.creds"), auth.Identity{Name: "lg-work-0-2", Role: auth.Agent}, "ioa"); err != nil {
		t.Fatal(err)
	}
	err = run(t.Context(), cfg, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "no credentials to submit goals with") || !strings.Contains(err.Error(), "admin.creds") {
		t.Errorf("no submit creds: %v", err)
	}
}

// TestImportsOnlyStdlibAndNats: the load generator is the proof that any
// program can drive the runtime, so its code uses nothing of this module.
func TestImportsOnlyStdlibAndNats(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkg.Imports) == 0 {
		t.Fatal("no imports read")
	}
	for _, imp := range pkg.Imports {
		first, _, _ := strings.Cut(imp, "/")
		if imp != "github.com/nats-io/nats.go" && strings.Contains(first, ".") {
			t.Errorf("imports %s: want only the standard library and github.com/nats-io/nats.go", imp)
		}
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command for go list -deps: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, goBin, "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 || !strings.Contains(string(out), "github.com/nats-io/nats.go\n") {
		t.Fatalf("go list -deps listed %d packages:\n%s", len(deps), out)
	}
	for _, d := range deps {
		if d == "github.com/ioa-nats/ioa" || strings.HasPrefix(d, "github.com/ioa-nats/ioa/") {
			if d != "github.com/ioa-nats/ioa/examples/loadgen" {
				t.Errorf("depends on %s", d)
			}
		}
	}
}

// TestInsecureServer: with no creds dir the load generator connects without
// credentials, as to `ioa serve --insecure`.
func TestInsecureServer(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{})
	cfg := defaults()
	cfg.URL, cfg.CredsDir = s.URL, ""
	cfg.Goals, cfg.Concurrency, cfg.Solo = 3, 3, 0
	var out, errOut bytes.Buffer
	if err := run(t.Context(), cfg, &out, &errOut); err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, &errOut)
	}
	for _, re := range []string{`goals not concluded\s+0 of 3\n`, `solo latency p50 / p99\s+skipped \(--solo 0\)\n`} {
		if !regexp.MustCompile(re).MatchString(out.String()) {
			t.Errorf("the table has no line matching %s:\n%s", re, &out)
		}
	}
}

// TestSustained checks the rate with every goal in flight: the first conc
// and the last conc to conclude are left out, and a phase too short for
// that has none.
func TestSustained(t *testing.T) {
	var p phase
	for i := range 10 {
		p.ends = append(p.ends, time.Duration(i+1)*100*time.Millisecond)
	}
	// Goals 3 to 8 conclude at 0.3 s to 0.8 s: 5 more in 0.5 s.
	if got := p.sustained(2); math.Abs(got-10) > 1e-9 {
		t.Errorf("sustained(2) = %v, want 10", got)
	}
	// A slow start is left out: the first two took 5 s.
	slow := phase{ends: append([]time.Duration{5 * time.Second, 5 * time.Second}, p.ends[2:]...)}
	for i := 2; i < len(slow.ends); i++ {
		slow.ends[i] += 5 * time.Second
	}
	if got := slow.sustained(2); math.Abs(got-10) > 1e-9 {
		t.Errorf("sustained(2) after a slow start = %v, want 10", got)
	}
	for _, conc := range []int{1, 4, 50} {
		if got := p.sustained(conc); got != 0 {
			t.Errorf("sustained(%d) of 10 goals = %v, want 0 (no such window)", conc, got)
		}
	}
}

// TestTableOfRuns checks the table of several runs: each figure is the
// median run's, every run's figure beside it in run order, and the goals
// not concluded are those of every run.
func TestTableOfRuns(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	phaseOf := func(wall time.Duration, failed int, ok ...time.Duration) phase {
		return phase{goals: len(ok) + failed, ok: ok, failed: failed, wall: wall}
	}
	loads := []phase{
		phaseOf(time.Second, 0, ms(10), ms(10), ms(10), ms(10)), // 4/s
		phaseOf(time.Second, 1, ms(30), ms(30)),                 // 2/s
		phaseOf(time.Second, 0, ms(20), ms(20), ms(20)),         // 3/s
	}
	solos := []phase{phaseOf(time.Second, 0, ms(5)), phaseOf(time.Second, 2), phaseOf(time.Second, 0, ms(3))}
	refs := []phase{phaseOf(time.Second, 0, 100*time.Microsecond), phaseOf(time.Second, 0, 300*time.Microsecond), phaseOf(time.Second, 0, 200*time.Microsecond)}
	cfg := defaults()
	cfg.Concurrency = 2
	var b strings.Builder
	printTable(&b, cfg, refs, loads, solos, 0)
	table := b.String()
	for _, want := range []string{
		"concluded goals/s (2 in flight)  3.0  (median of 3 runs: 4.0, 2.0, 3.0)\n",
		// The latency is its own median run's: 20, 30, 10 ms, the median 20.
		"latency under load p50 / p99     20.00 ms / 20.00 ms  (median of 3 runs: 10.00 ms, 30.00 ms, 20.00 ms)\n",
		// A run where no goal concluded counts as the slowest.
		"solo latency p50 / p99 (1 goals, one at a time)  5.00 ms / 5.00 ms  (median of 3 runs: 5.00 ms, -, 3.00 ms)\n",
		"reference: request-reply to the server p50 / p99  200 µs / 200 µs  (median of 3 runs: 100 µs, 300 µs, 200 µs)\n",
		"goals not concluded  3 of 14\n", // 10 + 4 goals, 1 + 2 failed
	} {
		if !strings.Contains(strings.Join(strings.Fields(table), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("the table has no %q:\n%s", want, table)
		}
	}
	// One run: no note.
	b.Reset()
	printTable(&b, cfg, refs[:1], loads[:1], solos[:1], 0)
	if strings.Contains(b.String(), "median") || !strings.Contains(b.String(), "4.0\n") {
		t.Errorf("one run:\n%s", b.String())
	}
}
