package main

import (
	"context"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/internal/stacktest"
	"github.com/ioa-nats/ioa/orchestrator"
)

// joined is a running "ioa chat join": what it printed, and its stdin.
type joined struct {
	out  *stacktest.Buffer
	in   *io.PipeWriter
	done chan error
}

func startJoin(t *testing.T, url, name string) *joined {
	t.Helper()
	root := &cobra.Command{Use: "ioa", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(newChatCmd())
	pr, pw := io.Pipe()
	j := &joined{out: &stacktest.Buffer{}, in: pw, done: make(chan error, 1)}
	root.SetIn(pr)
	root.SetOut(j.out)
	root.SetErr(j.out)
	root.SetArgs([]string{"chat", "join", name, "--nats-url", url})
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(func() { cancel(); _ = pw.Close() })
	go func() { j.done <- root.ExecuteContext(ctx) }()
	return j
}

func (j *joined) waitFor(t *testing.T, what string) {
	t.Helper()
	stacktest.WaitFor(t, what, func() bool { return strings.Contains(j.out.String(), what) })
}

func (j *joined) say(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(j.in, line+"\n"); err != nil {
		t.Fatal(err)
	}
}

// leave closes stdin (Ctrl-D) and waits for the command to return.
func (j *joined) leave(t *testing.T) {
	t.Helper()
	_ = j.in.Close()
	select {
	case err := <-j.done:
		if err != nil {
			t.Errorf("chat join: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("chat join did not return after stdin closed")
	}
}

// aliceGoal starts a runtime with alice, a person, beside the test agents,
// and submits a goal whose team is alice and the multiplier.
func aliceGoal(t *testing.T) (*stacktest.Stack, protocol.SubmitReply) {
	t.Helper()
	s := stacktest.Start(t, stacktest.Options{Orchestrator: orchestrator.Config{SpeakerTimeout: 2 * time.Minute, TaskTimeout: 2 * time.Minute}})
	alice := agentkit.Agent{Card: protocol.AgentCard{Name: "alice", Type: protocol.TypeHuman,
		Description: "A person who reviews and approves results.", Capabilities: []string{"approve the result"}}}
	s.RunAgents(t, nil, append(testAgents(), alice)...)
	var sub protocol.SubmitReply
	if err := bus.Request(t.Context(), s.Bus.Conn(), s.Bus.Subjects().Goal(bus.GoalSubmit),
		protocol.GoalRequest{Goal: "Multiply 6 x 7. Then approve the result.", Team: []string{"alice", "multiplier"}}, &sub); err != nil {
		t.Fatal(err)
	}
	return s, sub
}

// A person answers a turn and a task from the terminal; in between it
// leaves and joins again, and finds its task waiting (the wait is in the
// chat's log, not in the process).
func TestChatJoinAnswersAsAPerson(t *testing.T) {
	s, sub := aliceGoal(t)
	// Alice holds the turn before anyone follows her chats.
	stacktest.WaitFor(t, "alice's turn", func() bool {
		var g protocol.GoalStatus
		if s.Request(t, s.Bus.Subjects().Goal(bus.GoalGet), protocol.GoalIDRequest{GoalID: sub.GoalID}, &g) != nil || g.CommID == "" {
			return false
		}
		subj, _ := s.Bus.Subjects().History("alice", g.CommID)
		var h protocol.HistoryReply
		return s.Request(t, subj, protocol.HistoryRequest{}, &h) == nil && len(h.Messages) >= 2 && slices.Equal(h.Messages[len(h.Messages)-1].NextSpeaker, []string{"alice"})
	})

	j := startJoin(t, s.URL, "alice")
	j.waitFor(t, ">> #1 your turn, alice")
	j.say(t, "/fail not a task")
	j.waitFor(t, "! on your turn")
	j.say(t, "Go ahead; I will check the product.")
	j.waitFor(t, "sent (#")
	j.waitFor(t, "alice discussion → coordinator: Go ahead; I will check the product.")
	j.waitFor(t, "input required, alice: task t2")
	j.leave(t)

	// Joining again finds the task waiting, from the chat's history.
	j2 := startJoin(t, s.URL, "alice")
	j2.waitFor(t, "input required, alice: task t2")
	j2.say(t, "#7 nothing")
	j2.waitFor(t, "no such item")
	j2.say(t, "Approved: 6 x 7 = 42 is right.")
	j2.waitFor(t, "chat ended: concluded")
	j2.leave(t)
	t.Logf("first join:\n%s\nsecond join:\n%s", j.out, j2.out)

	var g protocol.GoalStatus
	stacktest.WaitFor(t, "the goal's end", func() bool {
		return s.Request(t, s.Bus.Subjects().Goal(bus.GoalGet), protocol.GoalIDRequest{GoalID: sub.GoalID}, &g) == nil && g.Result != nil
	})
	if g.Status != protocol.GoalConcluded || !strings.Contains(g.Result.Conclusion, "Approved: 6 x 7 = 42 is right.") || !strings.Contains(g.Result.Conclusion, "42") {
		t.Errorf("goal: %s %+v", g.Status, g.Result)
	}
}

// A person's /conclude ends the chat with what they typed, and says the
// last entry they were shown (seen_seq), so that a conclusion that missed a
// task's result would be refused rather than logged.
func TestChatJoinConcludes(t *testing.T) {
	s, sub := aliceGoal(t)
	j := startJoin(t, s.URL, "alice")
	j.waitFor(t, "your turn, alice")
	j.say(t, "/conclude Nothing to do after all.")
	j.waitFor(t, "chat ended: concluded")
	j.leave(t)

	var g protocol.GoalStatus
	if err := s.Request(t, s.Bus.Subjects().Goal(bus.GoalGet), protocol.GoalIDRequest{GoalID: sub.GoalID}, &g); err != nil {
		t.Fatal(err)
	}
	subj, _ := s.Bus.Subjects().History("alice", g.CommID)
	var h protocol.HistoryReply
	if err := s.Request(t, subj, protocol.HistoryRequest{}, &h); err != nil || len(h.Messages) == 0 {
		t.Fatalf("history: %v %+v", err, h)
	}
	last := h.Messages[len(h.Messages)-1]
	if last.Type != protocol.MsgConclusion || last.Sender != "alice" || last.Content != "Nothing to do after all." || last.SeenSeq != last.Seq-1 {
		t.Errorf("the last entry: %s from %s %q, seen_seq %d at seq %d; want alice's conclusion, having seen the entry before it",
			last.Type, last.Sender, last.Content, last.SeenSeq, last.Seq)
	}
}

// chat join takes only a registered person: a name nobody registered and a
// tool are refused, naming the persons there are; in the session, a line
// with an unknown /command says so and lists the commands.
func TestChatJoinTakesOnlyAPerson(t *testing.T) {
	s, _ := aliceGoal(t)
	for name, why := range map[string]string{"bob": "no agent bob is registered", "multiplier": "multiplier is an agent of type tool"} {
		out, _, err := runCLI(t, newChatCmd(), "chat", "join", name, "--nats-url", s.URL)
		want := name + " is not a registered person (an agent of type human): " + why + "; the registered persons: alice"
		if err == nil || err.Error() != want || out != "" {
			t.Errorf("join as %s: %v, want %q\n%s", name, err, want, out)
		}
	}
	w := newCLIWorld(t, testAgents()...)
	if _, _, err := runCLI(t, newChatCmd(), "chat", "join", "alice", "--nats-url", w.url); err == nil || !strings.Contains(err.Error(), "no agent alice is registered; no person is registered") {
		t.Errorf("join where no person is registered: %v", err)
	}

	j := startJoin(t, s.URL, "alice")
	j.waitFor(t, ">> #1 your turn, alice")
	j.say(t, "/foo bar")
	j.waitFor(t, "! unknown command /foo; the commands: /list, /to NAME text, /conclude text, /fail why")
	j.leave(t)
}

// A goal waiting for a person's approval says so, and how to answer, in
// the live view, in goals get and in the person's chat session, where
// /approve answers it.
func TestApprovalWaitIsShownAndAnswered(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{})
	alice := agentkit.Agent{Card: protocol.AgentCard{Name: "alice", Type: protocol.TypeHuman,
		Description: "A person who reviews and approves results.", Capabilities: []string{"approve the result"}}}
	s.RunAgents(t, nil, append(testAgents(), alice)...)
	var sub protocol.SubmitReply
	if err := bus.Request(t.Context(), s.Bus.Conn(), s.Bus.Subjects().Goal(bus.GoalSubmit),
		protocol.GoalRequest{Goal: "Multiply 6 x 7", Team: []string{"multiplier"}, ApproveBy: "alice"}, &sub); err != nil {
		t.Fatal(err)
	}
	live := &stacktest.Buffer{}
	go func() {
		_, _ = followGoal(t.Context(), s.Bus.Conn(), s.Bus.Subjects(), sub.GoalID, live, renderOptions{})
	}()
	hint := "⏸ waiting for alice's approval: ioa goals approve " + sub.GoalID + " --as alice [--reject] [--note ...]"
	stacktest.WaitFor(t, "the approval hint", func() bool { return strings.Contains(live.String(), hint) })

	out, _, err := runCLI(t, newGoalsCmd(), "goals", "get", sub.GoalID, "--nats-url", s.URL)
	if err != nil || !strings.Contains(out, "approve by:  alice (waiting: ioa goals approve "+sub.GoalID+" --as alice") {
		t.Fatalf("goals get: %v\n%s", err, out)
	}

	j := startJoin(t, s.URL, "alice")
	j.waitFor(t, ">> #1 approval, alice: goal "+sub.GoalID)
	j.say(t, "/approve fine")
	j.waitFor(t, "goal "+sub.GoalID+": concluded (approved by alice: fine)")
	j.leave(t)
	stacktest.WaitFor(t, "the outcome", func() bool { return strings.Contains(live.String(), "✔ concluded") })
}
