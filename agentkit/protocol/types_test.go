package protocol_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit/protocol"
)

func TestDurationJSON(t *testing.T) {
	type wrap struct {
		D protocol.Duration `json:"d"`
	}
	cases := []struct {
		d    time.Duration
		wire string
	}{
		{0, `{"d":"0s"}`},
		{90 * time.Second, `{"d":"1m30s"}`},
		{1500 * time.Millisecond, `{"d":"1.5s"}`},
		{2*time.Hour + 3*time.Minute, `{"d":"2h3m0s"}`},
		{-5 * time.Second, `{"d":"-5s"}`},
		{time.Nanosecond, `{"d":"1ns"}`},
	}
	for _, tc := range cases {
		b, err := json.Marshal(wrap{protocol.Duration(tc.d)})
		if err != nil {
			t.Fatalf("marshal %v: %v", tc.d, err)
		}
		if string(b) != tc.wire {
			t.Errorf("marshal %v = %s, want %s", tc.d, b, tc.wire)
		}
		var back wrap
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("unmarshal %s: %v", b, err)
		}
		if back.D.D() != tc.d {
			t.Errorf("round trip of %v gave %v", tc.d, back.D.D())
		}
		if back.D.String() != tc.d.String() {
			t.Errorf("String() = %q, want %q", back.D.String(), tc.d.String())
		}
	}

	var w wrap
	if err := json.Unmarshal([]byte(`{"d":"90s"}`), &w); err != nil || w.D.D() != 90*time.Second {
		t.Errorf(`"90s" decoded to %v, %v`, w.D.D(), err)
	}

	err := json.Unmarshal([]byte(`{"d":"abc"}`), &w)
	if err == nil {
		t.Fatal(`"abc" decoded without an error`)
	}
	if msg := err.Error(); !strings.Contains(msg, `"abc"`) || !strings.Contains(msg, `"90s"`) {
		t.Errorf(`error for "abc" = %q, want it to quote the value and give an example`, msg)
	}
	for _, bad := range []string{`{"d":90}`, `{"d":""}`, `{"d":"5 s"}`, `{"d":true}`} {
		if err := json.Unmarshal([]byte(bad), &w); err == nil {
			t.Errorf("%s decoded without an error to %v", bad, w.D)
		}
	}

	// The duration fields of the wire types travel as strings.
	g := protocol.GoalRequest{Goal: "x", Timeout: protocol.Duration(2 * time.Minute)}
	b, err := json.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"timeout":"2m0s"`) {
		t.Errorf("GoalRequest JSON = %s", b)
	}
	var back protocol.GoalRequest
	if err := json.Unmarshal([]byte(`{"goal":"x","timeout":"90s"}`), &back); err != nil || back.Timeout.D() != 90*time.Second {
		t.Errorf("GoalRequest timeout decoded to %v, %v", back.Timeout.D(), err)
	}
}

func TestGoalRequestValidate(t *testing.T) {
	intp := func(n int) *int { return &n }
	cases := []struct {
		name  string
		req   protocol.GoalRequest
		field string // in the error message; "" means valid
	}{
		{"only a goal", protocol.GoalRequest{Goal: "write a haiku"}, ""},
		{"everything set", protocol.GoalRequest{
			Goal: "x", Team: []string{"alice", "bob-2"}, Launcher: "alice", MaxTurns: 10, MaxDepth: intp(2),
			Timeout: protocol.Duration(time.Minute), Wait: true,
			Parent: &protocol.ParentRef{GoalID: "g1", CommID: "c1", TaskID: "t1"},
		}, ""},
		{"max_depth zero", protocol.GoalRequest{Goal: "x", MaxDepth: intp(0)}, ""},
		{"parent with only a goal id", protocol.GoalRequest{Goal: "x", Parent: &protocol.ParentRef{GoalID: "g1"}}, ""},
		{"missing goal", protocol.GoalRequest{Team: []string{"alice"}}, "goal"},
		{"bad team member", protocol.GoalRequest{Goal: "x", Team: []string{"alice", "Bob"}}, "team member"},
		{"wildcard team member", protocol.GoalRequest{Goal: "x", Team: []string{"*"}}, "team member"},
		{"empty team member", protocol.GoalRequest{Goal: "x", Team: []string{""}}, "team member"},
		{"bad launcher", protocol.GoalRequest{Goal: "x", Launcher: "a.b"}, "launcher"},
		{"negative max_turns", protocol.GoalRequest{Goal: "x", MaxTurns: -1}, "max_turns"},
		{"negative max_depth", protocol.GoalRequest{Goal: "x", MaxDepth: intp(-1)}, "max_depth"},
		{"negative timeout", protocol.GoalRequest{Goal: "x", Timeout: protocol.Duration(-time.Second)}, "timeout"},
		{"parent without a goal id", protocol.GoalRequest{Goal: "x", Parent: &protocol.ParentRef{CommID: "c1"}}, "parent.goal_id"},
		{"parent with a bad comm id", protocol.GoalRequest{Goal: "x", Parent: &protocol.ParentRef{GoalID: "g1", CommID: "c.>"}}, "parent.comm_id"},
		{"parent with a bad task id", protocol.GoalRequest{Goal: "x", Parent: &protocol.ParentRef{GoalID: "g1", TaskID: "t 1"}}, "parent.task_id"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.req.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, protocol.ErrInvalid) || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("Validate() = %v, want an invalid error about %s", err, tc.field)
			}
		})
	}
}

func TestAgentCardValidate(t *testing.T) {
	card := func(edit func(*protocol.AgentCard)) protocol.AgentCard {
		c := protocol.AgentCard{Name: "writer", Description: "writes poems"}
		edit(&c)
		return c
	}
	cases := []struct {
		name  string
		card  protocol.AgentCard
		field string // in the error message; "" means valid
	}{
		{"minimal", card(func(*protocol.AgentCard) {}), ""},
		{"assistant", card(func(c *protocol.AgentCard) { c.Type = protocol.TypeAssistant }), ""},
		{"tool", card(func(c *protocol.AgentCard) { c.Type = protocol.TypeTool }), ""},
		{"human", card(func(c *protocol.AgentCard) { c.Type = protocol.TypeHuman }), ""},
		{"full", card(func(c *protocol.AgentCard) {
			c.Capabilities, c.Tags, c.NestedTeams, c.MaxConcurrency = []string{"poetry"}, []string{"en"}, true, 4
			c.Metadata = map[string]string{"model": "small"}
		}), ""},
		{"reserved name", card(func(c *protocol.AgentCard) { c.Name = protocol.SystemSender }), "reserved"},
		{"missing name", card(func(c *protocol.AgentCard) { c.Name = "" }), "name"},
		{"bad name", card(func(c *protocol.AgentCard) { c.Name = "Writer" }), "name"},
		{"name with a dot", card(func(c *protocol.AgentCard) { c.Name = "w.x" }), "name"},
		{"missing description", card(func(c *protocol.AgentCard) { c.Description = "" }), "description"},
		{"blank description", card(func(c *protocol.AgentCard) { c.Description = " \t " }), "description"},
		{"bad type", card(func(c *protocol.AgentCard) { c.Type = "robot" }), "type"},
		{"type is case sensitive", card(func(c *protocol.AgentCard) { c.Type = "Tool" }), "type"},
		{"negative max_concurrency", card(func(c *protocol.AgentCard) { c.MaxConcurrency = -1 }), "max_concurrency"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.card.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, protocol.ErrInvalid) || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("Validate() = %v, want an invalid error about %s", err, tc.field)
			}
		})
	}
}

func TestErrorMatching(t *testing.T) {
	err := protocol.Errorf(protocol.ErrNotYourTurn, "it is %s's turn", "bob")
	if err.Code != "not_your_turn" || err.Status != 409 || err.Error() != "not_your_turn: it is bob's turn" {
		t.Fatalf("Errorf = %+v (%q)", err, err.Error())
	}
	if got := protocol.ErrNotYourTurn.Error(); got != "not_your_turn" {
		t.Errorf("sentinel Error() = %q", got)
	}

	wrapped := fmt.Errorf("outbox: send: %w", fmt.Errorf("referee: %w", err))
	if !errors.Is(wrapped, protocol.ErrNotYourTurn) {
		t.Error("errors.Is does not see the code through fmt.Errorf wrapping")
	}
	if errors.Is(wrapped, protocol.ErrIllegalTransition) || errors.Is(wrapped, protocol.ErrConflict) {
		t.Error("errors.Is matches another code of the same status")
	}
	if !errors.Is(wrapped, &protocol.Error{Code: "not_your_turn"}) {
		t.Error("errors.Is does not match a bare *Error with the same code")
	}
	if errors.Is(fmt.Errorf("x: %v", err), protocol.ErrNotYourTurn) {
		t.Error("errors.Is matches through a formatted (unwrapped) error")
	}
	if errors.Is(errors.New("not_your_turn"), protocol.ErrNotYourTurn) {
		t.Error("errors.Is matches a plain error by its text")
	}

	sentinels := []*protocol.Error{
		protocol.ErrInvalid, protocol.ErrNotMember, protocol.ErrForbidden,
		protocol.ErrNotFound, protocol.ErrNotYourTurn, protocol.ErrIllegalTransition, protocol.ErrConflict,
		protocol.ErrDepthExceeded, protocol.ErrTooLarge, protocol.ErrRateLimited, protocol.ErrQuotaExceeded,
		protocol.ErrUnavailable, protocol.ErrTimeout, protocol.ErrInternal,
	}
	for i, a := range sentinels {
		if a.Status < 400 || a.Status > 599 || a.Code == "" || strings.ToLower(a.Code) != a.Code {
			t.Errorf("sentinel %+v has a bad code or status", a)
		}
		for j, b := range sentinels {
			e := fmt.Errorf("op: %w", protocol.Errorf(a, "detail"))
			if got := errors.Is(e, b); got != (i == j) {
				t.Errorf("errors.Is(%s, %s) = %v", a.Code, b.Code, got)
			}
		}
	}
}

func TestAsError(t *testing.T) {
	plain := protocol.AsError(errors.New("disk on fire"))
	if plain.Code != "internal" || plain.Status != 500 || plain.Message != "disk on fire" {
		t.Errorf("AsError(plain) = %+v", plain)
	}
	if !errors.Is(plain, protocol.ErrInternal) {
		t.Error("AsError(plain) is not ErrInternal")
	}

	inner := protocol.Errorf(protocol.ErrTooLarge, "body of %d bytes", 70000)
	got := protocol.AsError(fmt.Errorf("outbox: %w", inner))
	if got != inner {
		t.Errorf("AsError(wrapped) = %+v, want the wrapped %+v", got, inner)
	}
	if got.Code != "too_large" || got.Status != 413 {
		t.Errorf("AsError(wrapped) = %+v", got)
	}
}

func TestErrorBodyJSON(t *testing.T) {
	e := protocol.Errorf(protocol.ErrNotMember, "mallory is not in chat c1")
	b, err := json.Marshal(protocol.ErrorBody{Error: protocol.ErrorDetail{Code: e.Code, Message: e.Message}})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"error":{"code":"not_member","message":"mallory is not in chat c1"}}`; string(b) != want {
		t.Errorf("ErrorBody = %s, want %s", b, want)
	}
}

func TestGoalEnded(t *testing.T) {
	for status, want := range map[string]bool{
		protocol.GoalAccepted: false, protocol.GoalForming: false, protocol.GoalRunning: false,
		protocol.GoalConcluded: true, protocol.GoalFailed: true, protocol.GoalCancelled: true, protocol.GoalTimedOut: true,
		"": false, "done": false,
	} {
		if got := protocol.GoalEnded(status); got != want {
			t.Errorf("GoalEnded(%q) = %v, want %v", status, got, want)
		}
	}
}

func TestUsageAdd(t *testing.T) {
	got := protocol.Usage{LLMCalls: 1, PromptTokens: 10, CompletionTokens: 100}.Add(protocol.Usage{LLMCalls: 2, PromptTokens: 20, CompletionTokens: 200})
	if want := (protocol.Usage{LLMCalls: 3, PromptTokens: 30, CompletionTokens: 300}); got != want {
		t.Errorf("Add = %+v, want %+v", got, want)
	}
}

// The wire names of AgentMessage are docs/protocol.md's (IoA's).
func TestAgentMessageWireNames(t *testing.T) {
	m := protocol.AgentMessage{
		V: protocol.Version, ID: "m1", CommID: "c1", GoalID: "g1", Sender: "alice", Seq: 3,
		State: protocol.StateDiscussion, Type: protocol.MsgSyncTaskAssign, NextSpeaker: []string{"bob"},
		Tasks:  []protocol.Task{{TaskID: "t1", Assignee: "bob", TaskAbstract: "a", TaskDesc: "d"}},
		TaskID: "t1", TaskStatus: protocol.TaskCompleted, TaskConclusion: "c", Triggers: []string{"t1"},
		TeamUpDepth: 1, MaxTurns: 5, Turn: 2, UpdatedPlan: "p", Usage: &protocol.Usage{PromptTokens: 1},
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"v", "id", "comm_id", "goal_id", "sender", "seq", "state", "type", "next_speaker", "tasks",
		"task_id", "task_status", "task_conclusion", "triggers", "team_up_depth", "max_turns", "turn", "updated_plan", "usage"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("field %q missing from %s", k, b)
		}
	}
	task := raw["tasks"].([]any)[0].(map[string]any)
	for _, k := range []string{"task_id", "assignee", "task_abstract", "task_desc"} {
		if _, ok := task[k]; !ok {
			t.Errorf("task field %q missing from %s", k, b)
		}
	}
	var back protocol.AgentMessage
	if err := json.Unmarshal(b, &back); err != nil || back.Tasks[0] != m.Tasks[0] || back.Seq != 3 || back.State != protocol.StateDiscussion {
		t.Errorf("round trip = %+v, %v", back, err)
	}
}

func TestSubmitReplyLowered(t *testing.T) {
	for _, c := range []struct {
		inForce, asked time.Duration
		lowered        bool
	}{
		{time.Minute, 2 * time.Hour, true},
		{time.Minute, time.Minute, false},
		{time.Minute, 0, false},         // none asked
		{0, 2 * time.Hour, false},       // an older server says none
		{time.Hour, time.Minute, false}, // never raised, but not lowered either
	} {
		got, lowered := protocol.SubmitReply{Timeout: protocol.Duration(c.inForce)}.Lowered(c.asked)
		if got != c.inForce || lowered != c.lowered {
			t.Errorf("in force %v, asked %v: %v, %v; want %v, %v", c.inForce, c.asked, got, lowered, c.inForce, c.lowered)
		}
	}
}
