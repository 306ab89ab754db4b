package llm

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/protocol"
)

// ContextConfig bounds what a turn prompt carries; the zero value is the
// default. The prompt holds the goal, the plan, a task board, the last few
// messages and a one-line-per-message summary of the ones before, so its
// size stays flat as the chat grows.
type ContextConfig struct {
	// RecentMessages are shown in full (clipped to MessageChars); default 4.
	RecentMessages int
	// SummaryLines bounds the summary of older messages; default 6.
	SummaryLines int
	// BoardRows bounds the rows of the task board; older ended tasks are
	// folded into one line of ids. Default 6.
	BoardRows int
	// BoardChars is shared among the board's result lines; default 1800.
	BoardChars int
	// MessageChars clips each recent message; default 600.
	MessageChars int
	// FullHistory sends every message of Turn.Recent in full instead, as
	// IoA does: the baseline of the cost benchmark, not for production.
	FullHistory bool
}

func (c ContextConfig) withDefaults() ContextConfig {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.RecentMessages, 4)
	def(&c.SummaryLines, 6)
	def(&c.BoardRows, 6)
	def(&c.BoardChars, 1800)
	def(&c.MessageChars, 600)
	return c
}

const answerFormat = `Answer with exactly one JSON object and nothing else:
{"type": "discussion|sync_task_assign|async_task_assign|pause|conclusion",
 "content": "what you say",
 "next_speaker": ["member"],
 "tasks": [{"task_id": "t1", "assignee": "member", "task_abstract": "short title", "task_desc": "full instructions"}],
 "triggers": ["task_id"],
 "updated_plan": "the plan, when it changes"}
- discussion: say something and give the turn to exactly one member (next_speaker).
- sync_task_assign: give tasks to members; you get the turn back when all have results.
- async_task_assign: start background tasks; you get the turn back once each has started.
- pause: wait until the running async tasks in triggers (their task_ids) have results.
- conclusion: the final answer to the goal, built from the task results; it ends the chat.
Leave out the fields your type does not use.`

// SystemPrompt is the fixed part of every turn prompt of an agent in a
// chat: who it is, the team and the answer format.
func SystemPrompt(self protocol.AgentCard, c protocol.Chat, team []protocol.AgentCard) string {
	var b strings.Builder
	fmt.Fprintf(&b, "You are %s: %s\n", self.Name, clip(oneLine(self.Description), 400))
	if c.Launcher == self.Name {
		b.WriteString("You launched this group chat: you lead it, plan the work, assign tasks to the members best able to do them, and write the conclusion.\n")
	} else {
		fmt.Fprintf(&b, "You are a member of a group chat led by %s. Answer what you are asked, briefly, and give the turn back to %s unless someone else must speak.\n", c.Launcher, c.Launcher)
	}
	b.WriteString("Team:\n")
	for _, card := range team {
		fmt.Fprintf(&b, "- %s: %s", card.Name, clip(oneLine(card.Description), 160))
		if len(card.Capabilities) > 0 {
			fmt.Fprintf(&b, " [%s]", clip(strings.Join(card.Capabilities, ", "), 120))
		}
		b.WriteByte('\n')
	}
	b.WriteString(answerFormat)
	return b.String()
}

// TurnPrompt is the variable part of a turn prompt.
func TurnPrompt(t agentkit.Turn, cc ContextConfig) string {
	cc = cc.withDefaults()
	c := &t.Chat
	var b strings.Builder
	fmt.Fprintf(&b, "Goal: %s\n", clip(c.Goal, 2000))
	fmt.Fprintf(&b, "Turn %d of %d. It is your turn (%s).\n", c.Turn+1, c.MaxTurns, t.Self.Name)
	if c.FinalTurn || c.Turn+1 >= c.MaxTurns {
		b.WriteString("This is the last turn: only a conclusion is allowed.\n")
	}
	if cc.FullHistory {
		writeFullHistory(&b, t.Recent)
	} else {
		plan := c.Plan
		if plan == "" {
			plan = "(none yet)"
		}
		fmt.Fprintf(&b, "Plan:\n%s\n", clip(plan, maxPlanChars))
		writeBoard(&b, c.Tasks, cc)
		writeMessages(&b, t.Recent, cc)
	}
	if t.LastError != nil {
		fmt.Fprintf(&b, "Your previous answer was refused: %s. Give a corrected answer.\n", clip(oneLine(t.LastError.Error()), 300))
	}
	b.WriteString("Your move, as one JSON object:")
	return b.String()
}

// writeBoard writes one row per task: id, mode, assignee, status, and a
// one-line result; BoardChars is shared among the results. Past BoardRows,
// the oldest ended tasks fold into one line of ids.
func writeBoard(b *strings.Builder, tasks []protocol.TaskState, cc ContextConfig) {
	if len(tasks) == 0 {
		b.WriteString("Task board: no tasks yet.\n")
		return
	}
	b.WriteString("Task board:\n")
	show := make([]bool, len(tasks))
	rows := 0
	for i := len(tasks) - 1; i >= 0; i-- { // running tasks first, then the latest ended
		if !tasks[i].Done() && rows < cc.BoardRows {
			show[i], rows = true, rows+1
		}
	}
	for i := len(tasks) - 1; i >= 0 && rows < cc.BoardRows; i-- {
		if !show[i] {
			show[i], rows = true, rows+1
		}
	}
	var folded []string
	for i, t := range tasks {
		if !show[i] {
			folded = append(folded, t.TaskID+" "+t.Status)
		}
	}
	if len(folded) > 0 {
		if len(folded) > 16 {
			folded = append(folded[:1:1], fmt.Sprintf("... (%d more)", len(folded)-1))
		}
		fmt.Fprintf(b, "- earlier: %s\n", strings.Join(folded, ", "))
	}
	per := max(cc.BoardChars/max(rows, 1), 60)
	for i, t := range tasks {
		if !show[i] {
			continue
		}
		mode := "sync"
		if t.Async {
			mode = "async"
		}
		title := t.TaskAbstract
		if title == "" {
			title = t.TaskDesc
		}
		fmt.Fprintf(b, "- %s [%s] %s: %s (%s)", t.TaskID, mode, t.Assignee, clip(oneLine(title), 100), t.Status)
		if t.Result != "" {
			fmt.Fprintf(b, ": %s", clip(oneLine(t.Result), per))
		}
		b.WriteByte('\n')
	}
}

// writeMessages writes the last RecentMessages messages and a summary of
// the older ones at hand. Task progress and results are left out: the
// board has them. So is the start message: the goal and team are above.
func writeMessages(b *strings.Builder, recent []protocol.AgentMessage, cc ContextConfig) {
	var msgs []protocol.AgentMessage
	for _, m := range recent {
		switch {
		case m.Type == protocol.MsgTaskProgress, m.Type == protocol.MsgTaskResult:
		case m.Type == protocol.MsgSystem && (m.Event == protocol.EventStart || m.Event == protocol.EventNote):
		default:
			msgs = append(msgs, m)
		}
	}
	split := max(len(msgs)-cc.RecentMessages, 0)
	older, last := msgs[:split], msgs[split:]
	if len(older) > 0 {
		b.WriteString("Earlier messages (summary):\n")
		if skip := len(older) - cc.SummaryLines; skip > 0 {
			fmt.Fprintf(b, "- (%d older messages not shown)\n", skip)
			older = older[skip:]
		}
		for _, m := range older {
			fmt.Fprintf(b, "- %s\n", clip(headline(m)+": "+oneLine(m.Content), 120))
		}
	}
	if len(last) > 0 {
		b.WriteString("Recent messages:\n")
		for _, m := range last {
			fmt.Fprintf(b, "- %s: %s\n", headline(m), clip(oneLine(m.Content), cc.MessageChars))
		}
	}
}

// headline names a message: seq, sender, type and what it points at.
func headline(m protocol.AgentMessage) string {
	h := "#" + strconv.FormatUint(m.Seq, 10) + " " + m.Sender + " " + m.Type
	switch m.Type {
	case protocol.MsgDiscussion:
		h += " -> " + strings.Join(m.NextSpeaker, ",")
	case protocol.MsgSyncTaskAssign, protocol.MsgAsyncAssign:
		ids := make([]string, len(m.Tasks))
		for i, t := range m.Tasks {
			ids[i] = t.TaskID + "->" + t.Assignee
		}
		h += " " + strings.Join(ids, ",")
	case protocol.MsgPause:
		h += " on " + strings.Join(m.Triggers, ",")
	case protocol.MsgSystem:
		h += " " + m.Event
	}
	return h
}

// writeFullHistory is IoA's way: every message, in full.
func writeFullHistory(b *strings.Builder, msgs []protocol.AgentMessage) {
	b.WriteString("Chat history:\n")
	for _, m := range msgs {
		fmt.Fprintf(b, "[%d] %s (%s)", m.Seq, m.Sender, m.Type)
		if len(m.NextSpeaker) > 0 {
			fmt.Fprintf(b, " next: %s", strings.Join(m.NextSpeaker, ","))
		}
		b.WriteString(":\n")
		if m.Content != "" {
			b.WriteString(m.Content + "\n")
		}
		if m.Goal != "" {
			b.WriteString("goal: " + m.Goal + "\n")
		}
		for _, t := range m.Tasks {
			fmt.Fprintf(b, "task %s for %s: %s\n%s\n", t.TaskID, t.Assignee, t.TaskAbstract, t.TaskDesc)
		}
		if m.TaskID != "" {
			fmt.Fprintf(b, "task %s %s: %s\n", m.TaskID, m.TaskStatus, m.TaskConclusion)
		}
		if len(m.Triggers) > 0 {
			fmt.Fprintf(b, "triggers: %s\n", strings.Join(m.Triggers, ","))
		}
		if m.UpdatedPlan != "" {
			b.WriteString("plan: " + m.UpdatedPlan + "\n")
		}
	}
}
