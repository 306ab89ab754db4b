package llm_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/llm"
	"github.com/ioa-nats/ioa/agentkit/protocol"
)

func TestTurnPromptIsCompact(t *testing.T) {
	c := chatAt(t)
	var log []protocol.AgentMessage
	apply := func(m protocol.AgentMessage) {
		m.Seq = c.LastSeq + 1
		n, err := protocol.Apply(c, m)
		if err != nil {
			t.Fatal(err)
		}
		c = n
		log = append(log, m)
	}
	for i := range 6 {
		apply(protocol.AgentMessage{Sender: "lead", Type: protocol.MsgDiscussion, NextSpeaker: []string{"bob"}, Content: fmt.Sprintf("OLD-%d %s", i, strings.Repeat("words ", 60))})
		apply(protocol.AgentMessage{Sender: "bob", Type: protocol.MsgDiscussion, NextSpeaker: []string{"lead"}, Content: fmt.Sprintf("REPLY-%d", i)})
		c.MaxTurns += 2
	}
	apply(protocol.AgentMessage{Sender: "lead", Type: protocol.MsgSyncTaskAssign, Content: "go", UpdatedPlan: "THE-PLAN",
		Tasks: []protocol.Task{{TaskID: "t1", Assignee: "bob", TaskAbstract: "fetch", TaskDesc: "fetch the data"}}})
	apply(protocol.AgentMessage{Sender: "bob", Type: protocol.MsgTaskResult, TaskID: "t1", TaskStatus: protocol.TaskCompleted, TaskConclusion: "RESULT-42 " + strings.Repeat("x", 50)})
	p := llm.TurnPrompt(agentkit.Turn{Self: protocol.AgentCard{Name: "lead"}, Chat: c, Recent: log}, llm.ContextConfig{RecentMessages: 3, SummaryLines: 4})
	t.Log(p)
	for _, want := range []string{"Goal: g", "THE-PLAN", "- t1 [sync] bob: fetch (completed): RESULT-42", "(6 older messages not shown)", "REPLY-5"} {
		if !strings.Contains(p, want) {
			t.Errorf("prompt lacks %q", want)
		}
	}
	if n := strings.Count(p, "RESULT-42"); n != 1 {
		t.Errorf("the task result appears %d times; the board has it", n)
	}
	summary, _, _ := strings.Cut(p[strings.Index(p, "Earlier messages"):], "Recent messages")
	for _, line := range strings.Split(summary, "\n") {
		if len(line) > 130 {
			t.Errorf("summary line of %d bytes: %s", len(line), line)
		}
	}
	if strings.Contains(p, "OLD-0") {
		t.Errorf("the oldest messages are still in the prompt")
	}
	full := llm.TurnPrompt(agentkit.Turn{Self: protocol.AgentCard{Name: "lead"}, Chat: c, Recent: log}, llm.ContextConfig{FullHistory: true})
	if len(full) < 2*len(p) || !strings.Contains(full, "OLD-0") {
		t.Errorf("full history %d bytes vs compact %d", len(full), len(p))
	}
}

func TestBoardFoldsOldTasks(t *testing.T) {
	c := chatAt(t)
	c.Tasks = nil
	for i := range 20 {
		c.Tasks = append(c.Tasks, protocol.TaskState{Task: protocol.Task{TaskID: fmt.Sprintf("t%d", i+1), Assignee: "bob", TaskAbstract: "job"},
			Status: protocol.TaskCompleted, Result: strings.Repeat("r", 1000)})
	}
	c.Tasks[2].Status, c.Tasks[2].Result = protocol.TaskRunning, ""
	p := llm.TurnPrompt(agentkit.Turn{Self: protocol.AgentCard{Name: "lead"}, Chat: c}, llm.ContextConfig{})
	if !strings.Contains(p, "- t3 [sync] bob: job (running)") || !strings.Contains(p, "- earlier: t1 completed") || strings.Count(p, "\n- t") != 6 {
		t.Errorf("board:\n%s", p)
	}
	if len(p) > 3500 {
		t.Errorf("prompt of %d bytes for a 20-task board", len(p))
	}
}
