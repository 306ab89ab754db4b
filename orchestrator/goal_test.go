package orchestrator_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/orchestrator"
	"github.com/nats-io/nats.go"
)

// scriptedLead walks a chat through every state: discussion, async tasks,
// pause on them, a sync task fed with their results, conclusion.
func scriptedLead(c protocol.Chat) *protocol.AgentMessage {
	switch c.Turn {
	case 0:
		return &protocol.AgentMessage{Type: protocol.MsgDiscussion, Content: "plan: alpha and beta in parallel, then alpha sums", NextSpeaker: []string{"alpha"}, UpdatedPlan: "1. a 2. b 3. sum"}
	case 2:
		return &protocol.AgentMessage{Type: protocol.MsgAsyncAssign, Tasks: []protocol.Task{
			{TaskID: "ta", Assignee: "alpha", TaskAbstract: "count", TaskDesc: "count to 3"},
			{Assignee: "beta", TaskAbstract: "double", TaskDesc: "double 21"},
		}}
	case 3:
		return &protocol.AgentMessage{Type: protocol.MsgPause, Triggers: c.RunningTasks()}
	case 4:
		var parts []string
		for _, t := range c.Tasks {
			parts = append(parts, t.Result)
		}
		return &protocol.AgentMessage{Type: protocol.MsgSyncTaskAssign, Tasks: []protocol.Task{
			{TaskID: "tsum", Assignee: "alpha", TaskAbstract: "sum", TaskDesc: "sum " + strings.Join(parts, " ")},
		}}
	default:
		t, _ := c.Task("tsum")
		return &protocol.AgentMessage{Type: protocol.MsgConclusion, Content: "answer: " + t.Result}
	}
}

func TestGoalThroughEveryStateWithWireAgents(t *testing.T) {
	w := newWorld(t, orchestrator.Config{})
	ctx := t.Context()
	lead := newWireAgent(t, w.b, card("lead", "leads the team"))
	lead.team = []string{"alpha", "beta"}
	lead.speak = scriptedLead
	alpha := newWireAgent(t, w.b, card("alpha", "counts and sums numbers"))
	alpha.speak = func(protocol.Chat) *protocol.AgentMessage {
		return &protocol.AgentMessage{Type: protocol.MsgDiscussion, Content: "ready", NextSpeaker: []string{"lead"}}
	}
	alpha.work = func(task protocol.Task) string {
		if strings.HasPrefix(task.TaskDesc, "sum") {
			return "45"
		}
		return "1 2 3"
	}
	beta := newWireAgent(t, w.b, card("beta", "doubles numbers"))
	beta.work = func(protocol.Task) string { return "42" }
	alpha.holdAsync, beta.holdAsync = true, true
	for _, a := range []*wireAgent{lead, alpha, beta} {
		a.start(ctx)
	}

	res := w.submitWait(t, protocol.GoalRequest{Goal: "count, double, then sum", Launcher: "lead"})
	if res.Status != protocol.GoalConcluded || res.Conclusion != "answer: 45" {
		t.Fatalf("result = %+v", res)
	}
	if res.Turns != 6 {
		t.Errorf("turns = %d, want 6", res.Turns)
	}
	log := w.chatLog(t, "lead", res.CommID)
	type step struct {
		typ, sender string
		state       protocol.State
	}
	var got []step
	for _, m := range log {
		got = append(got, step{m.Type, m.Sender, m.State})
	}
	// Progress and results of the two async tasks may interleave; check the
	// fixed skeleton and the multiset of the rest.
	want := []step{
		{protocol.MsgSystem, protocol.SystemSender, protocol.StateDiscussion},
		{protocol.MsgDiscussion, "lead", protocol.StateDiscussion},
		{protocol.MsgDiscussion, "alpha", protocol.StateDiscussion},
		{protocol.MsgAsyncAssign, "lead", protocol.StateAsyncTasks},
	}
	if len(got) < len(want) || fmt.Sprint(got[:4]) != fmt.Sprint(want) {
		t.Fatalf("log starts %v, want %v", got, want)
	}
	counts := map[string]int{}
	for _, s := range got {
		counts[s.typ+"/"+s.sender]++
	}
	wantCounts := map[string]int{
		"system/system": 1, "discussion/lead": 1, "discussion/alpha": 1, "async_task_assign/lead": 1,
		"task_progress/alpha": 1, "task_progress/beta": 1, "task_result/alpha": 2, "task_result/beta": 1,
		"pause/lead": 1, "sync_task_assign/lead": 1, "conclusion/lead": 1,
	}
	if fmt.Sprint(counts) != fmt.Sprint(wantCounts) {
		t.Fatalf("message counts = %v, want %v", counts, wantCounts)
	}
	last := log[len(log)-1]
	if last.Type != protocol.MsgConclusion || last.State != protocol.StateConclusion {
		t.Fatalf("last message = %+v", last)
	}
	for i, m := range log {
		if m.Seq != uint64(i+1) {
			t.Fatalf("seq %d at position %d", m.Seq, i)
		}
	}
	// The referee named beta's task, and the sync task saw both results.
	for _, m := range log {
		if m.Type == protocol.MsgSyncTaskAssign && m.Tasks[0].TaskDesc != "sum 1 2 3 42" {
			t.Errorf("sync task desc = %q", m.Tasks[0].TaskDesc)
		}
		if m.Type == protocol.MsgAsyncAssign && (m.Tasks[1].TaskID == "" || m.Tasks[0].TaskID != "ta") {
			t.Errorf("task ids = %q %q", m.Tasks[0].TaskID, m.Tasks[1].TaskID)
		}
	}
	// Every member's replica folded the same log.
	for _, a := range []*wireAgent{lead, alpha, beta} {
		waitFor(t, a.card.Name+" replica", func() bool { return len(a.log(res.CommID)) == len(log) })
	}
	// The goal record and the task stream agree.
	var st protocol.GoalStatus
	if err := requestJSON(t, w, "goal.get", protocol.GoalIDRequest{GoalID: res.GoalID}, &st); err != nil {
		t.Fatal(err)
	}
	if st.Status != protocol.GoalConcluded || st.Result == nil || st.Result.Conclusion != "answer: 45" || len(st.Team) != 3 {
		t.Fatalf("goal status = %+v", st)
	}
	info, err := w.b.JetStream().Stream(ctx, "IOA_TASKS")
	if err != nil {
		t.Fatal(err)
	}
	if n := info.CachedInfo().State.Msgs; n != 3 {
		t.Fatalf("task stream has %d results, want 3", n)
	}
}

// Team-ups a second apart ask the registry for each member's card once: a
// card found online is taken for cardFresh. A member gone meanwhile is
// still refused once that second has passed.
func TestTeamUpsReuseMembersCards(t *testing.T) {
	w := newWorld(t, orchestrator.Config{})
	ctx := t.Context()
	lead := newWireAgent(t, w.b, card("lead", "leads the team"))
	lead.team = []string{"alpha"}
	lead.speak = func(c protocol.Chat) *protocol.AgentMessage {
		return &protocol.AgentMessage{Type: protocol.MsgConclusion, Content: "done"}
	}
	alpha := newWireAgent(t, w.b, card("alpha", "counts"))
	for _, a := range []*wireAgent{lead, alpha} {
		a.start(ctx)
	}
	gets := make(chan string, 100)
	sub, err := w.b.Conn().Subscribe(w.b.Subjects().Registry(bus.RegistryGet), func(m *nats.Msg) {
		var req protocol.NameRequest
		if json.Unmarshal(m.Data, &req) == nil {
			gets <- req.Name
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	_ = w.b.Conn().Flush()
	count := func() map[string]int {
		n := map[string]int{}
		for {
			select {
			case name := <-gets:
				n[name]++
			case <-time.After(100 * time.Millisecond):
				return n
			}
		}
	}
	for i := range 2 {
		if res := w.submitWait(t, protocol.GoalRequest{Goal: "count", Launcher: "lead"}); res.Status != protocol.GoalConcluded {
			t.Fatalf("goal %d: %+v", i, res)
		}
	}
	if n := count(); n["alpha"] != 1 || n["lead"] != 1 {
		t.Fatalf("registry gets in two team-ups: %v, want one each for lead and alpha", n)
	}
	// alpha leaves: once the card is older than a second the registry is
	// asked again and the team-up refused.
	if err := bus.Request(ctx, alpha.nc, w.b.Subjects().Registry(bus.RegistryDeregister), protocol.NameRequest{Name: "alpha"}, nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
	if res := w.submitWait(t, protocol.GoalRequest{Goal: "count", Launcher: "lead"}); res.Status != protocol.GoalFailed {
		t.Fatalf("goal with a deregistered member: %+v, want failed", res)
	}
}

// goalWrittenElsewhere submits a goal that lead launches (busy, so the goal
// stays forming; alpha is to join it) and rewrites its record with edit, as
// another instance would: the owner's kept copy of the record is older.
func goalWrittenElsewhere(t *testing.T, w *world, edit func(*protocol.GoalStatus)) (lead, alpha *wireAgent, goalID string) {
	t.Helper()
	ctx := t.Context()
	lead = newWireAgent(t, w.b, card("lead", "leads the team"))
	lead.launchBusyFor = time.Minute // the goal stays forming
	alpha = newWireAgent(t, w.b, card("alpha", "counts"))
	for _, a := range []*wireAgent{lead, alpha} {
		a.start(ctx)
	}
	var sub protocol.SubmitReply
	if err := bus.Request(ctx, w.nc, w.b.Subjects().Goal(bus.GoalSubmit), protocol.GoalRequest{Goal: "count", Launcher: "lead"}, &sub); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first launch", func() bool {
		lead.mu.Lock()
		defer lead.mu.Unlock()
		return !lead.firstLaunch.IsZero()
	})
	goals := w.goalsBucket(t)
	e, err := goals.Get(ctx, sub.GoalID)
	if err != nil {
		t.Fatal(err)
	}
	var st protocol.GoalStatus
	if err := json.Unmarshal(e.Value(), &st); err != nil {
		t.Fatal(err)
	}
	edit(&st)
	if _, err := goals.Update(ctx, sub.GoalID, bus.Encode(st), e.Revision()); err != nil {
		t.Fatal(err)
	}
	return lead, alpha, sub.GoalID
}

// A team-up that reaches the goal's owner after another instance recorded
// the goal's chat (the owner's kept copy of the record is older) is
// answered with that chat, as any retried team-up is, not refused.
func TestTeamUpAfterTheChatWasRecordedElsewhereGetsThatChat(t *testing.T) {
	w := newWorld(t, orchestrator.Config{})
	const recorded = "celsewhere0001"
	lead, _, goalID := goalWrittenElsewhere(t, w, func(st *protocol.GoalStatus) {
		st.CommID, st.Status, st.Team = recorded, protocol.GoalRunning, []string{"lead", "alpha"}
	})
	var reply protocol.TeamupReply
	if err := bus.Request(t.Context(), lead.nc, w.b.Subjects().Teamup(), protocol.TeamupRequest{GoalID: goalID, Launcher: "lead", Members: []string{"alpha"}}, &reply); err != nil {
		t.Fatalf("team-up: %v, want the chat recorded", err)
	}
	if reply.CommID != recorded {
		t.Fatalf("team-up answered chat %s, want the recorded %s", reply.CommID, recorded)
	}
}

// A team-up whose record of the team is refused (another instance ended
// the goal meanwhile; the owner's kept copy is older) starts no chat: no
// member hears of it, and none has it open.
func TestTeamUpRefusedAtItsRecordStartsNoChat(t *testing.T) {
	w := newWorld(t, orchestrator.Config{})
	ctx := t.Context()
	lead, alpha, goalID := goalWrittenElsewhere(t, w, func(st *protocol.GoalStatus) { st.Status = protocol.GoalCancelled })
	var reply protocol.TeamupReply
	err := bus.Request(ctx, lead.nc, w.b.Subjects().Teamup(), protocol.TeamupRequest{GoalID: goalID, Launcher: "lead", Members: []string{"alpha"}}, &reply)
	if !errors.Is(err, protocol.ErrConflict) || !strings.Contains(err.Error(), "ended while its team formed") {
		t.Fatalf("team-up of a goal ended elsewhere: %+v, %v; want a conflict", reply, err)
	}
	// Whatever reached the members got there before the answer: the
	// start would have been delivered first. A flush of each connection
	// lets anything in flight arrive.
	for _, a := range []*wireAgent{lead, alpha} {
		if err := a.nc.Flush(); err != nil {
			t.Fatal(err)
		}
		a.mu.Lock()
		n := len(a.logs)
		a.mu.Unlock()
		if n != 0 {
			t.Errorf("%s heard of %d chat(s) of a team that was not recorded", a.card.Name, n)
		}
		subject, _ := w.b.Subjects().OpenChats(a.card.Name)
		var open protocol.OpenChatsReply
		if err := bus.Request(ctx, a.nc, subject, struct{}{}, &open); err != nil {
			t.Fatal(err)
		}
		if len(open.Chats) != 0 {
			t.Errorf("%s has open chats %v of a team that was not recorded", a.card.Name, open.Chats)
		}
	}
}

// goal.list lists every goal while records are being rewritten: a KV key
// lister ends early when a key it has yet to deliver is written meanwhile.
func TestGoalListMissesNoGoalWhileRecordsChange(t *testing.T) {
	w := newWorld(t, orchestrator.Config{})
	ctx := t.Context()
	lead := newWireAgent(t, w.b, card("lead", "leads the team"))
	lead.launchBusyFor = time.Minute // the goals stay forming
	lead.start(ctx)
	const n = 20
	want := map[string]bool{}
	for i := range n {
		var sub protocol.SubmitReply
		if err := bus.Request(ctx, w.nc, w.b.Subjects().Goal(bus.GoalSubmit), protocol.GoalRequest{Goal: fmt.Sprintf("goal %d", i), Launcher: "lead"}, &sub); err != nil {
			t.Fatal(err)
		}
		want[sub.GoalID] = true
	}
	goals := w.goalsBucket(t)
	records := map[string][]byte{}
	for id := range want {
		e, err := goals.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		records[id] = e.Value()
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { // rewrites the records, unchanged, as their owner would
			for {
				for id, v := range records {
					select {
					case <-stop:
						return
					default:
					}
					_, _ = goals.Put(ctx, id, v)
				}
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()
	for r := range 50 {
		var list protocol.GoalListReply
		if err := bus.Request(ctx, w.nc, w.b.Subjects().Goal(bus.GoalList), protocol.GoalListRequest{Status: "all"}, &list); err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, g := range list.Goals {
			got[g.GoalID] = true
		}
		for id := range want {
			if !got[id] {
				t.Fatalf("listing %d: goal %s missing (%d of %d listed)", r, id, len(got), n)
			}
		}
	}
}
