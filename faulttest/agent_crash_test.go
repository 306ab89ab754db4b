package faulttest

import (
	"encoding/json"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/orchestrator"
	"github.com/ioa-nats/ioa/registry"
	"github.com/nats-io/nats.go"
)

// childAgent runs `ioa agent run` with one exec worker agent named name
// whose program is script, against the stack's listener.
func childAgent(t *testing.T, s *stack, name, script string) *proc {
	t.Helper()
	dir := t.TempDir()
	cfg := writeFile(t, dir, "agent.yaml", agentConfig([]string{name}, script, ""), 0o644)
	p := startProc(t, "ioa agent run "+name, "agent", "run", "--config", cfg, "--nats-url", s.b.ClientURL())
	waitOnline(t, s.nc, s.subj, name)
	return p
}

// TestFaultAgentKilledMidTask SIGKILLs an agent process while its task
// runs and does not start it again: the referee fails the task (a
// task_result from "system") and the goal still ends, with the failure in
// its conclusion. The referee notices either at the task timeout or, when
// that is far off, once the registry reports the agent offline ("member
// gone": its heartbeats stopped).
func TestFaultAgentKilledMidTask(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts stackOpts
		want string // in the failed task's conclusion
	}{
		{"task timeout", stackOpts{orch: orchestrator.Config{TaskTimeout: 1500 * time.Millisecond, SpeakerTimeout: 3 * time.Second}}, "no result within 1.5s"},
		{"member gone", stackOpts{
			orch: orchestrator.Config{TaskTimeout: time.Minute, SpeakerTimeout: time.Minute},
			reg:  registry.Config{HeartbeatTTL: 3 * time.Second},
		}, "sleeper left: it is offline"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.coordinator = true
			agentKilledMidTask(t, tc.opts, tc.want)
		})
	}
}

func agentKilledMidTask(t *testing.T, opts stackOpts, want string) {
	s := newStack(t, opts)
	script := writeFile(t, t.TempDir(), "slow.sh", "#!/bin/sh\ncat >/dev/null\nsleep 5\necho done\n", 0o755)
	agent := childAgent(t, s, "sleeper", script)
	rec := record(t, s.nc, s.subj)

	id := submit(t, s.nc, s.subj, protocol.GoalRequest{Goal: "Do the long job.", Team: []string{"sleeper"}})
	assign := waitMsg(t, rec, "the task assignment", func(m protocol.AgentMessage) bool {
		return m.GoalID == id && len(m.Tasks) > 0
	})
	time.Sleep(300 * time.Millisecond) // the worker program is running
	agent.kill()

	st := waitEnded(t, s.nc, s.subj, 30*time.Second, id)[id]
	log, err := history(s.nc, s.subj, "coordinator", assign.CommID)
	if err != nil {
		t.Fatal(err)
	}
	task := assign.Tasks[0].TaskID
	results := taskResults(log, task)
	if len(results) != 1 || results[0].Sender != protocol.SystemSender || results[0].TaskStatus != protocol.TaskFailed ||
		!strings.Contains(results[0].TaskConclusion, want) {
		t.Fatalf("results of task %s = %+v, want one failed result from system saying %q", task, results, want)
	}
	if st.Result == nil {
		t.Fatalf("goal %s ended %s with no result", id, st.Status)
	}
	t.Logf("goal %s: %s reason=%q conclusion=%q; task %s: %s", id, st.Status, st.Result.Reason, st.Result.Conclusion, task, results[0].TaskConclusion)
	if st.Status != protocol.GoalConcluded || !strings.Contains(st.Result.Conclusion, "did not complete") {
		if st.Result.Reason == "" {
			t.Errorf("goal ended %s with neither a conclusion naming the failure nor a reason", st.Status)
		}
	}
	var a audit
	a.check(assign.CommID, rec.chat(assign.CommID), rec.acks(assign.CommID), log, true)
	if a.Lost+a.Duplicated != 0 || len(a.Problems) > 0 {
		t.Errorf("%s %v", a, a.Problems)
	}
}

// TestFaultAgentStoppedSendsStaleResult freezes an agent (SIGSTOP) past its
// task's deadline, then lets it go on (SIGCONT): the result it then sends
// is refused, so the log holds exactly one result for the task, the
// referee's, and the chat goes on to its end.
func TestFaultAgentStoppedSendsStaleResult(t *testing.T) {
	const taskTimeout = 2 * time.Second
	s := newStack(t, stackOpts{
		orch:        orchestrator.Config{TaskTimeout: taskTimeout, SpeakerTimeout: 5 * time.Second},
		coordinator: true,
	})
	script := writeFile(t, t.TempDir(), "slow.sh", "#!/bin/sh\ncat >/dev/null\nsleep 2.5\necho late\n", 0o755)
	agent := childAgent(t, s, "sleeper", script)
	rec := record(t, s.nc, s.subj)
	stale := watchOutbox(t, s.nc, s.subj, "sleeper")

	// Three clauses: the later ones keep the chat open while the frozen
	// agent wakes up and reports the first.
	id := submit(t, s.nc, s.subj, protocol.GoalRequest{Goal: "Do step one of the job, then do step two of the job, then do step three of the job.", Team: []string{"sleeper"}})
	assign := waitMsg(t, rec, "the first assignment", func(m protocol.AgentMessage) bool {
		return m.GoalID == id && len(m.Tasks) > 0
	})
	task := assign.Tasks[0].TaskID
	waitMsg(t, rec, "the task to start", func(m protocol.AgentMessage) bool {
		return m.CommID == assign.CommID && m.TaskID == task && m.Sender == "sleeper"
	})
	agent.signal(syscall.SIGSTOP)
	stoppedAt := time.Now()
	waitMsg(t, rec, "the referee to fail the task", func(m protocol.AgentMessage) bool {
		return m.CommID == assign.CommID && m.Type == protocol.MsgTaskResult && m.TaskID == task
	})
	// The worker program has finished by now; the agent reports as soon as
	// it runs again.
	time.Sleep(time.Until(stoppedAt.Add(2700 * time.Millisecond)))
	agent.signal(syscall.SIGCONT)
	t.Logf("agent stopped for %v", time.Since(stoppedAt).Round(time.Millisecond))

	st := waitEnded(t, s.nc, s.subj, 30*time.Second, id)[id]
	log, err := history(s.nc, s.subj, "coordinator", assign.CommID)
	if err != nil {
		t.Fatal(err)
	}
	results := taskResults(log, task)
	if len(results) != 1 || results[0].Sender != protocol.SystemSender || results[0].TaskStatus != protocol.TaskFailed {
		t.Fatalf("results of task %s = %+v, want only the referee's failure", task, results)
	}
	if st.Status != protocol.GoalConcluded {
		t.Errorf("goal ended %s (%+v), want concluded", st.Status, st.Result)
	}
	// The agent sent its stale result and was told no; or, on a machine so
	// slow that the chat had ended before the agent ran again, it dropped
	// the result itself, since its task was cancelled with the chat.
	abandoned := func() bool {
		for _, line := range strings.Split(agent.out.String(), "\n") {
			if strings.Contains(line, "task abandoned") && strings.Contains(line, "task_id="+task+" ") {
				return true
			}
		}
		return false
	}
	var refused []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if refused = stale.refusals(task); len(refused) > 0 || abandoned() {
			break
		}
	}
	switch {
	case len(refused) > 0:
		t.Logf("stale result of %s refused: %v; goal %s: %s", task, refused, id, st.Result.Conclusion)
	case abandoned():
		t.Logf("the chat ended before the agent ran again: it abandoned task %s without sending", task)
	default:
		t.Errorf("the agent neither sent its stale result nor abandoned the task")
	}
	for _, r := range refused {
		if !strings.HasPrefix(r, "409") {
			t.Errorf("stale result refused with %s, want 409", r)
		}
	}
	var a audit
	a.check(assign.CommID, rec.chat(assign.CommID), rec.acks(assign.CommID), log, true)
	if a.Lost+a.Duplicated != 0 || len(a.Problems) > 0 {
		t.Errorf("%s %v", a, a.Problems)
	}
}

func taskResults(log []protocol.AgentMessage, task string) []protocol.AgentMessage {
	var out []protocol.AgentMessage
	for _, m := range log {
		if m.Type == protocol.MsgTaskResult && m.TaskID == task {
			out = append(out, m)
		}
	}
	return out
}

// waitMsg waits until rec has observed a matching chat message.
func waitMsg(t testing.TB, rec *recorder, what string, match func(protocol.AgentMessage) bool) protocol.AgentMessage {
	t.Helper()
	var got protocol.AgentMessage
	waitFor(t, 30*time.Second, what, func() bool {
		var ok bool
		got, ok = rec.find(match)
		return ok
	})
	return got
}

// outboxWatch sees an agent's outbox requests and the replies to them, as
// any core NATS subscriber can on a server without permissions.
type outboxWatch struct {
	mu      sync.Mutex
	results map[string]string // reply subject -> task id of a task_result
	replies map[string]*nats.Msg
}

func watchOutbox(t testing.TB, nc *nats.Conn, subj bus.Subjects, name string) *outboxWatch {
	t.Helper()
	w := &outboxWatch{results: map[string]string{}, replies: map[string]*nats.Msg{}}
	out, _ := subj.Outbox(name, "x")
	out = strings.TrimSuffix(out, ".x") + ".*"
	subs := []struct {
		subject string
		fn      nats.MsgHandler
	}{
		{out, func(m *nats.Msg) {
			var am protocol.AgentMessage
			if json.Unmarshal(m.Data, &am) == nil && am.Type == protocol.MsgTaskResult && m.Reply != "" {
				w.mu.Lock()
				w.results[m.Reply] = am.TaskID
				w.mu.Unlock()
			}
		}},
		{"_INBOX.>", func(m *nats.Msg) {
			w.mu.Lock()
			w.replies[m.Subject] = m
			w.mu.Unlock()
		}},
	}
	for _, s := range subs {
		sub, err := nc.Subscribe(s.subject, s.fn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return w
}

// refusals lists the error replies ("409 illegal_transition") the agent got
// to its task_results for task.
func (w *outboxWatch) refusals(task string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for reply, id := range w.results {
		if id != task {
			continue
		}
		if m, ok := w.replies[reply]; ok {
			if err := bus.ReplyError(m); err != nil {
				out = append(out, m.Header.Get(bus.HeaderErrorCode)+" "+err.Error())
			}
		}
	}
	return out
}
