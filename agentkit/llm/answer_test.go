package llm_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/ioa-nats/ioa/agentkit/llm"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/internal/fuzzworker"
)

func TestParseAnswerRepairs(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     protocol.AgentMessage
	}{
		{"plain", `{"type":"discussion","content":"hi","next_speaker":["bob"]}`,
			protocol.AgentMessage{Type: "discussion", Content: "hi", NextSpeaker: []string{"bob"}}},
		{"fenced with prose", "Here you go:\n```json\n{\"type\": \"conclusion\", \"content\": \"done {really}\"}\n```\nBye.",
			protocol.AgentMessage{Type: "conclusion", Content: "done {really}"}},
		{"next_speaker string and @", `{"type":"discussion","content":"x","next_speaker":"@bob"}`,
			protocol.AgentMessage{Type: "discussion", Content: "x", NextSpeaker: []string{"bob"}}},
		{"type alias", `{"type":"Sync-Task-Assignment","tasks":{"id":7,"assignee":"bob","description":"do it"}}`,
			protocol.AgentMessage{Type: "sync_task_assign", Tasks: []protocol.Task{{TaskID: "7", Assignee: "bob", TaskDesc: "do it"}}}},
		{"triggers string", `{"type":"pause","triggers":"t1"}`,
			protocol.AgentMessage{Type: "pause", Triggers: []string{"t1"}}},
		{"plan as list", `{"type":"discussion","content":"p","next_speaker":["a"],"updated_plan":["1. a","2. b"]}`,
			protocol.AgentMessage{Type: "discussion", Content: "p", NextSpeaker: []string{"a"}, UpdatedPlan: "1. a\n2. b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := llm.ParseAnswer(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if got.Type != tc.want.Type || got.Content != tc.want.Content || got.UpdatedPlan != tc.want.UpdatedPlan ||
				!slices.Equal(got.NextSpeaker, tc.want.NextSpeaker) || !slices.Equal(got.Triggers, tc.want.Triggers) || !slices.Equal(got.Tasks, tc.want.Tasks) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestParseAnswerRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		is             error
	}{
		{"no json", "I think we should discuss.", "", llm.ErrNoJSON},
		{"truncated", `{"type":"conclusion","content":"the answer is`, "", llm.ErrTruncatedJSON},
		{"type not a string", `{"type":5}`, `"type" must be a string`, nil},
		{"unknown type", `{"type":"chat"}`, `"type" "chat" is not one of`, nil},
		{"tasks a string", `{"type":"sync_task_assign","tasks":"everything"}`, `"tasks" must be a list`, nil},
		{"content an object", `{"type":"discussion","content":{"a":1}}`, `"content" must be a string`, nil},
		{"next_speaker object", `{"type":"discussion","next_speaker":{"name":"bob"}}`, `"next_speaker" must be a list of strings`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := llm.ParseAnswer(tc.in)
			if err == nil || (tc.is != nil && !errors.Is(err, tc.is)) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q / %v", err, tc.want, tc.is)
			}
		})
	}
}

// chatAt is a started chat where speaker holds the turn.
func chatAt(t testing.TB) protocol.Chat {
	t.Helper()
	c, err := protocol.Apply(protocol.Chat{}, protocol.AgentMessage{Seq: 1, Type: protocol.MsgSystem, Event: protocol.EventStart, Sender: protocol.SystemSender,
		CommID: "c1", GoalID: "g1", Goal: "g", Launcher: "lead", MaxTurns: 5,
		Team: []protocol.AgentCard{{Name: "lead", Description: "d"}, {Name: "bob", Description: "d"}}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCompleteValidatesAgainstTheFSM(t *testing.T) {
	c := chatAt(t)
	// Missing ids are chosen; names match members regardless of case.
	m, err := llm.Complete(c, "lead", protocol.AgentMessage{Type: protocol.MsgAsyncAssign,
		Tasks: []protocol.Task{{Assignee: "Bob", TaskAbstract: "a"}, {Assignee: "bob", TaskDesc: "b"}}})
	if err != nil || m.Tasks[0].TaskID != "t1" || m.Tasks[1].TaskID != "t2" || m.Tasks[0].Assignee != "bob" || m.Tasks[0].TaskDesc != "a" {
		t.Fatalf("%+v %v", m.Tasks, err)
	}
	for _, tc := range []struct {
		name string
		self string
		m    protocol.AgentMessage
		want string
	}{
		{"not a member", "lead", protocol.AgentMessage{Type: protocol.MsgDiscussion, NextSpeaker: []string{"carol"}}, "next_speaker"},
		{"launcher without next speaker", "lead", protocol.AgentMessage{Type: protocol.MsgDiscussion}, "next_speaker"},
		{"not our turn", "bob", protocol.AgentMessage{Type: protocol.MsgConclusion, Content: "x"}, "turn"},
		{"pause on nothing", "lead", protocol.AgentMessage{Type: protocol.MsgPause, Triggers: []string{"t9"}}, "t9"},
		{"empty conclusion", "lead", protocol.AgentMessage{Type: protocol.MsgConclusion}, "final answer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := llm.Complete(c, tc.self, tc.m); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
	// A member's discussion with no next speaker goes to the launcher.
	c.Speaker = "bob"
	m, err = llm.Complete(c, "bob", protocol.AgentMessage{Type: protocol.MsgDiscussion, Content: strings.Repeat("long ", 5000)})
	if err != nil || !slices.Equal(m.NextSpeaker, []string{"lead"}) || len(m.Content) > 8000 {
		t.Errorf("%v %d %v", m.NextSpeaker, len(m.Content), err)
	}
	// On the final turn only a conclusion is legal.
	c.Speaker, c.FinalTurn = "lead", true
	if _, err := llm.Complete(c, "lead", protocol.AgentMessage{Type: protocol.MsgDiscussion, NextSpeaker: []string{"bob"}}); err == nil {
		t.Error("a discussion on the final turn was accepted")
	}
}

func TestFallbackIsAlwaysLegal(t *testing.T) {
	c := chatAt(t)
	m := llm.Fallback(c, "lead", errors.New("boom"))
	if m.Type != protocol.MsgConclusion || !strings.Contains(m.Content, "boom") {
		t.Errorf("launcher fallback = %+v", m)
	}
	c.Speaker = "bob"
	m = llm.Fallback(c, "bob", nil)
	if m.Type != protocol.MsgDiscussion || !slices.Equal(m.NextSpeaker, []string{"lead"}) {
		t.Errorf("member fallback = %+v", m)
	}
	c.Turn = c.MaxTurns // nothing but a conclusion is legal now
	if m = llm.Fallback(c, "bob", nil); m.Type != protocol.MsgConclusion {
		t.Errorf("member fallback at the turn limit = %+v", m)
	}
}

func FuzzParseAnswer(f *testing.F) {
	fuzzworker.Capture(f)
	for _, s := range []string{`{"type":"discussion","next_speaker":"a"}`, "```{\"type\":\"pause\",\"triggers\":[1]}```", `{"tasks":[{"id":1}]`, `{"type":"x\"}`} {
		f.Add(s)
	}
	c := chatAt(f)
	f.Fuzz(func(t *testing.T, s string) {
		m, err := llm.ParseAnswer(s)
		if err != nil {
			return
		}
		if m, err = llm.Complete(c, "lead", m); err == nil {
			m.Sender, m.Seq = "lead", c.LastSeq+1
			if _, err := protocol.Apply(c, m); err != nil {
				t.Fatalf("Complete accepted a move Apply refuses: %v", err)
			}
		}
	})
}
