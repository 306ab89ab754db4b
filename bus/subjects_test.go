package bus_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/internal/fuzzworker"
)

func TestSubjectBuilders(t *testing.T) {
	s, err := bus.NewSubjects("ioa")
	if err != nil {
		t.Fatal(err)
	}
	ok := func(got string, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	for got, want := range map[string]string{
		ok(s.Outbox("alice", "c1")):       "ioa.agent.alice.out.c1",
		ok(s.Inbox("alice", "c1")):        "ioa.agent.alice.in.c1",
		ok(s.History("alice", "c1")):      "ioa.agent.alice.history.c1",
		ok(s.AgentLaunchSubject("alice")): "ioa.agent.alice.launch",
		ok(s.AgentInviteSubject("alice")): "ioa.agent.alice.invite",
		ok(s.Chat("c1")):                  "ioa.chat.c1",
		ok(s.Task("c1", "t1")):            "ioa.task.c1.t1",
		ok(s.GoalEvents("g1")):            "ioa.goal.g1.events",
		ok(s.GoalResult("g1")):            "ioa.goal.g1.result",
		s.Registry(bus.RegistrySearch):    "ioa.registry.search",
		s.Goal(bus.GoalSubmit):            "ioa.goal.submit",
		s.Teamup():                        "ioa.teamup",
		s.AllOutboxes():                   "ioa.agent.*.out.*",
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
	for _, bad := range [][2]string{{"Alice", "c1"}, {"a.b", "c1"}, {"a", "c.1"}, {"a", "*"}, {"a", ">"}, {"", "c1"}, {"a", ""}, {"a b", "c"}} {
		if _, err := s.Outbox(bad[0], bad[1]); err == nil {
			t.Errorf("Outbox(%q, %q) accepted", bad[0], bad[1])
		}
	}
	for _, p := range []string{"", ".", "a.", "a..b", "a.*", "a b", "a.>"} {
		if _, err := bus.NewSubjects(p); err == nil {
			t.Errorf("prefix %q accepted", p)
		}
	}
	a, err := s.ParseAgent("ioa.agent.bob.out.c9")
	if err != nil || a.Name != "bob" || a.Kind != "out" || a.CommID != "c9" {
		t.Fatalf("ParseAgent = %+v, %v", a, err)
	}
	for _, bad := range []string{"ioa.agent.bob", "ioa.chat.c1", "ioa.agent.Bob.out.c1", "ioa.agent.bob.out.c1.x"} {
		if _, err := s.ParseAgent(bad); err == nil {
			t.Errorf("ParseAgent(%q) accepted", bad)
		}
	}
}

// The referee's own name is no agent's: no agent subject of any kind is
// built or parsed for it (on an outbox it would speak as the referee).
func TestSubjectsRefuseTheRefereesName(t *testing.T) {
	s, _ := bus.NewSubjects("ioa")
	sys := protocol.SystemSender
	for what, build := range map[string]func() (string, error){
		"Outbox":             func() (string, error) { return s.Outbox(sys, "c1") },
		"Inbox":              func() (string, error) { return s.Inbox(sys, "c1") },
		"History":            func() (string, error) { return s.History(sys, "c1") },
		"OpenChats":          func() (string, error) { return s.OpenChats(sys) },
		"AgentInboxes":       func() (string, error) { return s.AgentInboxes(sys) },
		"AgentLaunchSubject": func() (string, error) { return s.AgentLaunchSubject(sys) },
		"AgentInviteSubject": func() (string, error) { return s.AgentInviteSubject(sys) },
	} {
		if subj, err := build(); !errors.Is(err, protocol.ErrForbidden) {
			t.Errorf("%s(%q) = %q, %v; want forbidden", what, sys, subj, err)
		}
	}
	for _, subj := range []string{"ioa.agent.system.out.c1", "ioa.agent.system.in.c1", "ioa.agent.system.history.c1",
		"ioa.agent.system.chats", "ioa.agent.system.launch", "ioa.agent.system.invite"} {
		a, err := s.ParseAgent(subj)
		if !errors.Is(err, protocol.ErrForbidden) || !strings.Contains(err.Error(), "reserved for the referee") {
			t.Errorf("ParseAgent(%q) = %+v, %v; want forbidden: reserved for the referee", subj, a, err)
		}
	}
}

func FuzzSubjects(f *testing.F) {
	fuzzworker.Capture(f)
	for _, s := range [][2]string{{"alice", "c1"}, {"a.b", "c"}, {"a", "*"}, {"x", ">"}, {"ünï", "c"}, {"a", "b c"}, {"system", "c1"}} {
		f.Add(s[0], s[1])
	}
	s, _ := bus.NewSubjects("ioa")
	f.Fuzz(func(t *testing.T, name, id string) {
		for _, build := range []func() (string, error){
			func() (string, error) { return s.Outbox(name, id) },
			func() (string, error) { return s.Task(id, name) },
			func() (string, error) { return s.Chat(id) },
			func() (string, error) { return s.AgentInviteSubject(name) },
		} {
			subj, err := build()
			if err != nil {
				continue
			}
			// A built subject never carries a wildcard, whitespace or an
			// empty token, and round-trips through ParseAgent when it is
			// an agent subject.
			if strings.ContainsAny(subj, "*> \t\r\n") || strings.Contains(subj, "..") || strings.HasSuffix(subj, ".") {
				t.Fatalf("built bad subject %q from %q %q", subj, name, id)
			}
			if strings.HasPrefix(subj, "ioa.agent.") {
				a, err := s.ParseAgent(subj)
				if err != nil || a.Name != name {
					t.Fatalf("ParseAgent(%q) = %+v, %v", subj, a, err)
				}
			}
		}
	})
}
