package llm_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/llm"
	"github.com/ioa-nats/ioa/agentkit/llm/llmtest"
	"github.com/ioa-nats/ioa/agentkit/protocol"
)

// step is one event of the scripted conversation: a turn (the speaker's
// model answer) or a task report the driver logs by itself.
type step struct {
	speaker string
	answer  move                   // a turn
	report  *protocol.AgentMessage // a task_progress or task_result
}

var costTeam = []protocol.AgentCard{
	card("coordinator", "Coordinates a team of agents for a goal: splits the goal into tasks, finds the agents able to do them, assigns the work and assembles the conclusion.", "team coordination", "task planning"),
	card("researcher", "Researches markets, competitors and public data; cites sources.", "market research", "data gathering"),
	card("analyst", "Analyses numbers: market sizes, growth, costs, scenarios.", "financial analysis", "forecasting"),
	card("writer", "Writes and edits reports, summaries and recommendations.", "report writing", "editing"),
}

// filler makes deterministic prose of about n bytes.
func filler(seed string, n int) string {
	words := []string{"market", "growth", "segment", "customers", "pricing", "costs", "risk", "channel", "demand", "forecast", "supply", "region", "trend", "margin", "share", "survey"}
	var b strings.Builder
	b.WriteString(seed)
	for i := 0; b.Len() < n; i++ {
		b.WriteByte(' ')
		b.WriteString(words[(i*7+len(seed))%len(words)])
		if i%12 == 11 {
			b.WriteByte('.')
		}
	}
	return b.String()
}

// costScript is a 30-turn conversation: a planning round, four rounds of
// async research and analysis with a pause, a review and a sync write-up,
// a closing discussion and the conclusion.
func costScript() []step {
	var s []step
	disc := func(from, to, text string, plan string) {
		m := move{"type": "discussion", "content": text, "next_speaker": []string{to}}
		if plan != "" {
			m["updated_plan"] = plan
		}
		s = append(s, step{speaker: from, answer: m})
	}
	report := func(kind, who, id, text string) {
		m := protocol.AgentMessage{Type: kind, TaskID: id, Content: text}
		if kind == protocol.MsgTaskResult {
			m.TaskStatus, m.TaskConclusion, m.Content = protocol.TaskCompleted, text, ""
		}
		s = append(s, step{speaker: who, report: &m})
	}
	plan := "1. researcher: market data per region (async)\n2. analyst: size and growth per region (async)\n3. writer: section per region (sync)\n4. coordinator: final recommendation"
	disc("coordinator", "researcher", filler("Here is the plan for the market entry study.", 450), plan)
	disc("researcher", "coordinator", filler("Researcher here: I can cover the public data.", 420), "")
	disc("coordinator", "analyst", filler("Analyst, can you model each region?", 380), "")
	disc("analyst", "coordinator", filler("Analyst here: yes, with three scenarios.", 430), "")
	disc("coordinator", "writer", filler("Writer, you will draft a section per region.", 360), "")
	disc("writer", "coordinator", filler("Writer here: agreed, one page each.", 400), "")
	id := 0
	next := func() string { id++; return fmt.Sprintf("t%d", id) }
	for r := 1; r <= 4; r++ {
		a, b := next(), next()
		s = append(s, step{speaker: "coordinator", answer: move{"type": "async_task_assign", "content": fmt.Sprintf("Round %d: research and analysis for region %d.", r, r),
			"tasks": []move{
				{"task_id": a, "assignee": "researcher", "task_abstract": fmt.Sprintf("market data region %d", r), "task_desc": filler(fmt.Sprintf("Collect market data for region %d.", r), 320)},
				{"task_id": b, "assignee": "analyst", "task_abstract": fmt.Sprintf("sizing region %d", r), "task_desc": filler(fmt.Sprintf("Estimate size and growth of region %d.", r), 320)},
			}}})
		report(protocol.MsgTaskProgress, "researcher", a, "researcher started "+a)
		report(protocol.MsgTaskProgress, "analyst", b, "analyst started "+b)
		s = append(s, step{speaker: "coordinator", answer: move{"type": "pause", "content": "Waiting for " + a + " and " + b + ".", "triggers": []string{a, b}}})
		report(protocol.MsgTaskResult, "researcher", a, filler(fmt.Sprintf("Region %d data: 14 sources.", r), 700))
		report(protocol.MsgTaskResult, "analyst", b, filler(fmt.Sprintf("Region %d size: 3.2bn, growth 7%%.", r), 700))
		disc("coordinator", "writer", filler(fmt.Sprintf("Writer, region %d results are in; any gaps before you draft?", r), 420), "")
		disc("writer", "coordinator", filler(fmt.Sprintf("Writer: region %d needs a pricing note; otherwise ready.", r), 420), "")
		w := next()
		s = append(s, step{speaker: "coordinator", answer: move{"type": "sync_task_assign", "content": fmt.Sprintf("Draft region %d.", r),
			"tasks": []move{{"task_id": w, "assignee": "writer", "task_abstract": fmt.Sprintf("section region %d", r), "task_desc": filler(fmt.Sprintf("Write the section for region %d from %s and %s.", r, a, b), 300)}}}})
		report(protocol.MsgTaskResult, "writer", w, filler(fmt.Sprintf("Section %d drafted.", r), 800))
	}
	disc("coordinator", "researcher", filler("Researcher, anything we missed across regions?", 400), "")
	disc("researcher", "analyst", filler("Researcher: regulatory notes for regions 2 and 4; analyst, does that change the ranking?", 420), "")
	s = append(s, step{speaker: "analyst", answer: move{"type": "discussion", "content": filler("Analyst: no, region 3 stays first.", 420), "next_speaker": []string{"coordinator"}}})
	s = append(s, step{speaker: "coordinator", answer: move{"type": "conclusion", "content": filler("Recommendation: enter region 3 first.", 900)}})
	return s
}

// replay drives the llm policy through the script against the fake server
// and returns the estimated prompt tokens of each turn (index 0 = turn 1).
// Turn.Recent is what the runtime gives: the last 20 messages; with
// fullHistory it holds the whole log, as IoA's prompts do.
func replay(t *testing.T, fullHistory bool) []int {
	t.Helper()
	var answers []llmtest.Response
	for _, st := range costScript() {
		if st.answer != nil {
			answers = append(answers, llmtest.Answer(st.answer))
		}
	}
	srv := llmtest.New(t, llmtest.Queue(answers...))
	policy := llm.New(newModel(t, srv), llm.PolicyConfig{Context: llm.ContextConfig{FullHistory: fullHistory}})
	chat := protocol.Chat{}
	var log []protocol.AgentMessage
	apply := func(m protocol.AgentMessage) {
		m.Seq = chat.LastSeq + 1
		n, err := protocol.Apply(chat, m)
		if err != nil {
			t.Fatalf("seq %d %s by %s: %v", m.Seq, m.Type, m.Sender, err)
		}
		chat = n
		log = append(log, m)
	}
	apply(protocol.AgentMessage{Type: protocol.MsgSystem, Event: protocol.EventStart, Sender: protocol.SystemSender, CommID: "c1", GoalID: "g1",
		Goal: "Study the market entry for our product in four regions and recommend where to start.", Launcher: "coordinator", Team: costTeam, MaxTurns: 40, TeamUpDepth: 1})
	var sizes []int
	for _, st := range costScript() {
		if st.report != nil {
			m := *st.report
			m.Sender = st.speaker
			apply(m)
			continue
		}
		recent := log
		if !fullHistory && len(recent) > 20 {
			recent = recent[len(recent)-20:]
		}
		self := costTeam[0]
		for _, c := range costTeam {
			if c.Name == st.speaker {
				self = c
			}
		}
		m, err := policy.NextMessage(t.Context(), agentkit.Turn{Self: self, Chat: chat, Team: costTeam, Recent: recent})
		if err != nil || m.Type != st.answer["type"] || m.Content != st.answer["content"] {
			t.Fatalf("turn %d: policy made %s %q (%v), script says %v", chat.Turn+1, m.Type, clipText(m.Content, 60), err, st.answer["type"])
		}
		m.Sender = st.speaker
		apply(m)
		reqs := srv.Requests()
		sizes = append(sizes, llm.EstimateTokens(reqs[len(reqs)-1].Text()))
	}
	if len(sizes) != 30 || !chat.Ended() {
		t.Fatalf("%d turns, ended %v", len(sizes), chat.Ended())
	}
	return sizes
}

// TestPromptCost replays the same 30-turn conversation twice, with IoA's
// full-history prompts and with the context builder, and compares the
// prompt tokens (estimated at four characters a token). Run with -v for
// the table:
//
//	go test -run TestPromptCost -v ./agentkit/llm/
func TestPromptCost(t *testing.T) {
	full, ours := replay(t, true), replay(t, false)
	sum := func(xs []int) (n int) {
		for _, x := range xs {
			n += x
		}
		return n
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n%-22s %12s %12s\n", "prompt tokens", "full history", "ours")
	for _, turn := range []int{1, 5, 10, 20, 30} {
		fmt.Fprintf(&b, "%-22s %12d %12d\n", fmt.Sprintf("turn %d", turn), full[turn-1], ours[turn-1])
	}
	tf, to := sum(full), sum(ours)
	fmt.Fprintf(&b, "%-22s %12d %12d (%.0f%%)\n", "total, 30 turns", tf, to, 100*float64(to)/float64(tf))
	t.Log(b.String())
	if to*2 > tf {
		t.Errorf("ours %d tokens is more than half of full history's %d", to, tf)
	}
	if ours[29]*10 > ours[9]*13 {
		t.Errorf("turn 30 prompt %d tokens > 1.3 x turn 10's %d: not flat", ours[29], ours[9])
	}
}
