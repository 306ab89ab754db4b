package faulttest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/agentkit/rules"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/orchestrator"
	"github.com/ioa-nats/ioa/registry"
	"github.com/nats-io/nats.go"
)

// helperAgent is an in-process worker that answers at once.
func helperAgent(name string) agentkit.Agent {
	return agentkit.Agent{
		Card: protocol.AgentCard{Name: name, Description: "Does the numbered steps of jobs.", Type: protocol.TypeTool},
		Worker: agentkit.WorkerFunc(func(_ context.Context, tk agentkit.Task) (agentkit.Result, error) {
			return agentkit.Result{Conclusion: "done " + tk.TaskID}, nil
		}),
		Policy: rules.New(rules.Config{}),
	}
}

// goalsConclude submits n goals for the helper and waits until they
// conclude.
func goalsConclude(t *testing.T, s *stack, n int, helper string) {
	t.Helper()
	var ids []string
	for i := range n {
		ids = append(ids, submit(t, s.nc, s.subj, protocol.GoalRequest{
			Goal: fmt.Sprintf("Do step one of job %d, then do step two of job %d.", i, i), Team: []string{helper},
		}))
	}
	for id, st := range waitEnded(t, s.nc, s.subj, 60*time.Second, ids...) {
		if st.Status != protocol.GoalConcluded {
			t.Errorf("goal %s ended %s: %+v", id, st.Status, st.Result)
		}
	}
}

// TestFaultRegistrationFlood registers cards from one connection as fast as
// it can: the registry accepts up to the per-connection quota and answers
// 429 quota_exceeded after, while goals of other agents go on.
func TestFaultRegistrationFlood(t *testing.T) {
	const quota, flood, workers = 20, 300, 16
	s := newStack(t, stackOpts{reg: registry.Config{MaxAgentsPerConn: quota}, coordinator: true, agents: []agentkit.Agent{helperAgent("helper")}})
	nc, err := s.b.NewConn("flood")
	if err != nil {
		t.Fatal(err)
	}
	var ok, limited, other atomic.Int64
	var wg sync.WaitGroup
	next := make(chan int, flood)
	for i := range flood {
		next <- i
	}
	close(next)
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for i := range next {
				card := protocol.AgentCard{Name: fmt.Sprintf("flood-%03d", i), Description: "flood", Type: protocol.TypeTool}
				err := request(nc, s.subj.Registry(bus.RegistryRegister), card, nil)
				switch {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, protocol.ErrQuotaExceeded):
					limited.Add(1)
				default:
					other.Add(1)
					t.Logf("register %s: %v", card.Name, err)
				}
			}
		})
	}
	goalsConclude(t, s, 3, "helper")
	wg.Wait()
	var list protocol.ListReply
	_ = request(s.nc, s.subj.Registry(bus.RegistryList), protocol.ListRequest{Limit: 1000}, &list)
	t.Logf("%d registrations from one connection in %v: %d accepted, %d quota_exceeded, %d other; registry lists %d",
		flood, time.Since(start).Round(time.Millisecond), ok.Load(), limited.Load(), other.Load(), list.Total)
	if ok.Load() > quota || limited.Load() < flood-quota || other.Load() != 0 {
		t.Errorf("accepted %d (quota %d), quota_exceeded %d, other %d", ok.Load(), quota, limited.Load(), other.Load())
	}
	// The quota is per connection: another one may still register.
	nc2, _ := s.b.NewConn("other")
	if err := request(nc2, s.subj.Registry(bus.RegistryRegister), protocol.AgentCard{Name: "late", Description: "late", Type: protocol.TypeTool}, nil); err != nil {
		t.Errorf("another connection cannot register: %v", err)
	}
}

// TestFaultMessageFlood has one agent send far more outbox requests than
// limits.agent_rate allows: the excess gets 429 rate_limited, and another
// chat's goal still concludes.
func TestFaultMessageFlood(t *testing.T) {
	const rate, burst, flood, workers = 20, 10, 600, 16
	s := newStack(t, stackOpts{
		orch:        orchestrator.Config{AgentRate: rate, AgentBurst: burst},
		coordinator: true, agents: []agentkit.Agent{helperAgent("helper")},
	})
	flooder := newWire(t, s, "flooder")
	var limited, other atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			for i := range flood / workers {
				_, err := flooder.send("cflood", protocol.AgentMessage{ID: fmt.Sprintf("f%d-%d", w, i), Type: protocol.MsgDiscussion, Content: "spam", NextSpeaker: []string{"flooder"}})
				if errors.Is(err, protocol.ErrRateLimited) {
					limited.Add(1)
				} else {
					other.Add(1) // not_found: the chat does not exist
				}
			}
		})
	}
	goalsConclude(t, s, 2, "helper")
	wg.Wait()
	elapsed := time.Since(start)
	allowed := int64(burst + rate*elapsed.Seconds() + 5)
	t.Logf("%d outbox requests in %v: %d rate_limited, %d let through (allowed about %d)", flood, elapsed.Round(time.Millisecond), limited.Load(), other.Load(), allowed)
	if other.Load() > allowed || limited.Load() == 0 {
		t.Errorf("rate limit not enforced: %d let through, %d limited", other.Load(), limited.Load())
	}
}

// Ping-pong agents stopping at max_turns: see TestPingPongStopsAtMaxTurns
// and TestSilentLauncherAtTurnLimitFailsWithReason in orchestrator.

// delegating always wants a sub-team for its tasks.
type delegating struct{ *rules.Policy }

func (delegating) NeedsTeam(_ context.Context, q agentkit.TeamCheck) (string, error) {
	return q.Task.TaskDesc, nil
}

// TestFaultNestingStopsAtMaxDepth asks for 100 levels of nesting from an
// agent that delegates every task: the tree stops at max_depth (2: three
// levels), the root concludes, and the orchestrator refuses a child below
// a goal with no depth left (409 depth_exceeded).
func TestFaultNestingStopsAtMaxDepth(t *testing.T) {
	s := newStack(t, stackOpts{
		orch:        orchestrator.Config{MaxDepth: 2},
		coordinator: true,
		agents: []agentkit.Agent{{
			Card: protocol.AgentCard{Name: "planner", Description: "Plans trips and their budgets.", NestedTeams: true, Type: protocol.TypeTool},
			Worker: agentkit.WorkerFunc(func(context.Context, agentkit.Task) (agentkit.Result, error) {
				return agentkit.Result{Conclusion: "budget: 1200 EUR"}, nil
			}),
			Policy: delegating{rules.New(rules.Config{})},
		}},
	})
	hundred := 100
	root := submit(t, s.nc, s.subj, protocol.GoalRequest{Goal: "Plan the trip budget.", Team: []string{"planner"}, MaxDepth: &hundred})
	st := waitEnded(t, s.nc, s.subj, 60*time.Second, root)[root]
	if st.Status != protocol.GoalConcluded || !strings.Contains(st.Result.Conclusion, "1200 EUR") {
		t.Fatalf("root = %s %+v", st.Status, st.Result)
	}
	depth, levels := 0, 1
	for id := root; ; levels++ {
		g, err := goalGet(s.nc, s.subj, id)
		if err != nil {
			t.Fatal(err)
		}
		depth = max(depth, g.Depth)
		if g.Depth > 2 || g.MaxDepth < 0 {
			t.Fatalf("goal %s at depth %d (max_depth %d)", id, g.Depth, g.MaxDepth)
		}
		if len(g.Children) == 0 {
			break
		}
		if len(g.Children) > 1 {
			t.Fatalf("goal %s has %d children", id, len(g.Children))
		}
		id = g.Children[0]
	}
	if levels != 3 {
		t.Fatalf("tree of %d levels, want 3", levels)
	}
	// A running goal with no depth left refuses a child outright.
	lead := newWire(t, s, "lead")
	zero := 0
	id := submit(t, s.nc, s.subj, protocol.GoalRequest{Goal: "hold", Launcher: "lead", MaxDepth: &zero})
	var comm string
	waitFor(t, 20*time.Second, "the chat", func() bool {
		g, err := goalGet(s.nc, s.subj, id)
		comm = g.CommID
		return err == nil && comm != ""
	})
	_ = lead
	err := request(s.nc, s.subj.Goal(bus.GoalSubmit), protocol.GoalRequest{Goal: "deeper", Parent: &protocol.ParentRef{GoalID: id, CommID: comm, TaskID: "t1"}}, nil)
	if !errors.Is(err, protocol.ErrDepthExceeded) {
		t.Fatalf("child below max_depth 0: %v, want depth_exceeded", err)
	}
	t.Logf("100 levels asked: tree of %d levels, deepest depth %d; child below max_depth 0: %v", levels, depth, err)
	_ = request(s.nc, s.subj.Goal(bus.GoalCancel), protocol.GoalIDRequest{GoalID: id}, nil)
}

func heapMiB() float64 {
	// Twice: the first collection only moves sync.Pool contents to the
	// victim cache, the second frees them.
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc) / (1 << 20)
}

// TestFaultSlowConsumer puts a member in a chat whose inbox subscription
// never reads (with small pending limits, as a careful client sets them),
// and pushes 2000 messages of 2 KiB through the chat: the referee never
// waits for the slow member, the messages past its limits are dropped on
// its side, the goal concludes, and this process's heap (the server, the
// registry and the orchestrator live here) stays bounded.
func TestFaultSlowConsumer(t *testing.T) {
	const messages, size, workers = 2000, 2 << 10, 8
	s := newStack(t, stackOpts{orch: orchestrator.Config{AgentRate: 1e6, AgentBurst: 1e6, MaxChatMessages: messages + 100, MaxTaskProgress: messages}})
	lead := newWire(t, s, "lead", "chatty", "slow")
	chatty := newWire(t, s, "chatty")
	newWire(t, s, "slow")
	slowNC, err := s.b.NewConn("slow-inbox")
	if err != nil {
		t.Fatal(err)
	}
	inboxes, _ := s.subj.AgentInboxes("slow")
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	sub, err := slowNC.Subscribe(inboxes, func(*nats.Msg) { <-block })
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.SetPendingLimits(16, 64<<10); err != nil {
		t.Fatal(err)
	}
	_ = slowNC.Flush()
	goal, comm := lead.startChat(t, s, "talk a lot")
	if _, err := lead.send(comm, protocol.AgentMessage{ID: "a1", Type: protocol.MsgAsyncAssign,
		Tasks: []protocol.Task{{TaskID: "t1", Assignee: "chatty", TaskDesc: "report often"}}}); err != nil {
		t.Fatal(err)
	}
	heap0, g0 := heapMiB(), runtime.NumGoroutine()
	content := strings.Repeat("x", size)
	start := time.Now()
	var wg sync.WaitGroup
	var failed atomic.Int64
	for w := range workers {
		wg.Go(func() {
			for i := range messages / workers {
				if _, err := chatty.send(comm, protocol.AgentMessage{ID: fmt.Sprintf("p%d-%d", w, i), Type: protocol.MsgTaskProgress, TaskID: "t1", Content: content}); err != nil {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if _, err := chatty.send(comm, protocol.AgentMessage{ID: "r1", Type: protocol.MsgTaskResult, TaskID: "t1", TaskStatus: protocol.TaskCompleted, TaskConclusion: "done"}); err != nil {
		t.Fatal(err)
	}
	// The async state waited for progress only; the lead holds the turn.
	waitFor(t, 10*time.Second, "the lead's turn", func() bool {
		_, err := lead.send(comm, protocol.AgentMessage{ID: "end", Type: protocol.MsgConclusion, Content: "enough"})
		return err == nil
	})
	st := waitEnded(t, s.nc, s.subj, 30*time.Second, goal)[goal]
	heap1, g1 := heapMiB(), runtime.NumGoroutine()
	dropped, _ := sub.Dropped()
	t.Logf("%d messages of %d B in %v (%.0f/s), %d refused; slow member dropped %d; heap %.1f -> %.1f MiB; goroutines %d -> %d; goal %s",
		messages, size, elapsed.Round(time.Millisecond), float64(messages)/elapsed.Seconds(), failed.Load(), dropped, heap0, heap1, g0, g1, st.Status)
	if failed.Load() != 0 || st.Status != protocol.GoalConcluded {
		t.Errorf("refused %d; goal %s", failed.Load(), st.Status)
	}
	if dropped == 0 {
		t.Errorf("the slow member dropped nothing: it was not slow")
	}
	if heap1-heap0 > 64 {
		t.Errorf("heap grew by %.1f MiB over %d messages", heap1-heap0, messages)
	}
	if g1-g0 > 50 {
		t.Errorf("goroutines grew from %d to %d", g0, g1)
	}
}

// TestFaultFullChatStillEnds: a member fills its chat to
// limits.max_chat_messages with progress reports; more progress gets 429
// quota_exceeded, but its task's result and the launcher's conclusion are
// still taken, and the goal concludes (it failed with launcher_timeout, the
// launcher blamed for a quota another member used up).
func TestFaultFullChatStillEnds(t *testing.T) {
	const quota = 30
	s := newStack(t, stackOpts{orch: orchestrator.Config{AgentRate: 1e6, AgentBurst: 1e6, MaxChatMessages: quota}})
	lead := newWire(t, s, "lead", "chatty")
	chatty := newWire(t, s, "chatty")
	goal, comm := lead.startChat(t, s, "fill the chat")
	if _, err := lead.send(comm, protocol.AgentMessage{ID: "a1", Type: protocol.MsgAsyncAssign,
		Tasks: []protocol.Task{{TaskID: "t1", Assignee: "chatty", TaskDesc: "report often"}}}); err != nil {
		t.Fatal(err)
	}
	var err error
	for i := 0; err == nil && i < 2*quota; i++ {
		_, err = chatty.send(comm, protocol.AgentMessage{ID: fmt.Sprintf("p%d", i), Type: protocol.MsgTaskProgress, TaskID: "t1", Content: "still going"})
	}
	if !errors.Is(err, protocol.ErrQuotaExceeded) {
		t.Fatalf("progress past the quota: %v, want quota_exceeded", err)
	}
	if _, err := chatty.send(comm, protocol.AgentMessage{ID: "r1", Type: protocol.MsgTaskResult, TaskID: "t1", TaskStatus: protocol.TaskCompleted, TaskConclusion: "done"}); err != nil {
		t.Fatalf("the task's result in a full chat: %v", err)
	}
	waitFor(t, 10*time.Second, "the lead's conclusion in a full chat", func() bool {
		_, err := lead.send(comm, protocol.AgentMessage{ID: "end", Type: protocol.MsgConclusion, Content: "enough"})
		return err == nil
	})
	if st := waitEnded(t, s.nc, s.subj, 30*time.Second, goal)[goal]; st.Status != protocol.GoalConcluded {
		t.Errorf("goal %s: %+v", st.Status, st.Result)
	}
}
