package protocol_test

import (
	"errors"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/internal/fuzzworker"
)

func TestValidName(t *testing.T) {
	cases := []struct {
		in   string
		want bool
	}{
		{"a", true},
		{"alice", true},
		{"0agent", true},
		{"web-search_2", true},
		{"system", true}, // a valid name; reserved by AgentCard.Validate, the FSM and bus.Subjects
		{strings.Repeat("a", 64), true},
		{strings.Repeat("a", 65), false},
		{"", false},
		{"_agent", false},
		{"-agent", false},
		{"Alice", false},
		{"aLice", false},
		{"a.b", false},
		{".", false},
		{"a*", false},
		{"*", false},
		{"a>", false},
		{">", false},
		{"a b", false},
		{" a", false},
		{"a ", false},
		{"a\n", false},
		{"a\tb", false},
		{"a\x00", false},
		{"a/b", false},
		{"a$", false},
		{"é", false},
		{"agenté", false},
		{"代理", false},
		{"a\u00a0b", false}, // no-break space
	}
	for _, tc := range cases {
		if got := protocol.ValidName(tc.in); got != tc.want {
			t.Errorf("ValidName(%q) = %v, want %v", tc.in, got, tc.want)
		}
		err := protocol.CheckName("assignee", tc.in)
		if tc.want != (err == nil) {
			t.Errorf("CheckName(%q) = %v, want ok %v", tc.in, err, tc.want)
		}
		if err != nil && (!errors.Is(err, protocol.ErrInvalid) || !strings.Contains(err.Error(), "assignee")) {
			t.Errorf("CheckName(%q) = %v, want an invalid error naming the field", tc.in, err)
		}
	}
}

func TestValidID(t *testing.T) {
	cases := []struct {
		in   string
		want bool
	}{
		{"a", true},
		{"A", true},
		{"-", true},
		{"_", true},
		{"Goal_01-xY", true},
		{"01HZX3K5Q8", true},
		{strings.Repeat("Z", 64), true},
		{strings.Repeat("Z", 65), false},
		{"", false},
		{"a.b", false},
		{"a*", false},
		{"*", false},
		{">", false},
		{"a>b", false},
		{"a b", false},
		{" ", false},
		{"a\n", false},
		{"\ta", false},
		{"a\x00", false},
		{"ü", false},
		{"idé", false},
		{"a+b", false},
		{"a/b", false},
	}
	for _, tc := range cases {
		if got := protocol.ValidID(tc.in); got != tc.want {
			t.Errorf("ValidID(%q) = %v, want %v", tc.in, got, tc.want)
		}
		err := protocol.CheckID("task_id", tc.in)
		if tc.want != (err == nil) {
			t.Errorf("CheckID(%q) = %v, want ok %v", tc.in, err, tc.want)
		}
		if err != nil && (!errors.Is(err, protocol.ErrInvalid) || !strings.Contains(err.Error(), "task_id")) {
			t.Errorf("CheckID(%q) = %v, want an invalid error naming the field", tc.in, err)
		}
	}
}

// Whatever a name or id validator accepts can be put in a subject token: it
// holds no wildcard, no token separator and no white space.
func FuzzValidName(f *testing.F) {
	fuzzworker.Capture(f)
	for _, s := range []string{"alice", "a.b", "a*", ">", "a b", "A", "_x", "é", strings.Repeat("a", 64), strings.Repeat("a", 65), "a\n", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		check := func(what string) {
			if !utf8.ValidString(s) || len(s) == 0 || len(s) > 64 {
				t.Fatalf("%s accepted %q (len %d)", what, s, len(s))
			}
			for _, r := range s {
				if r == '.' || r == '*' || r == '>' || unicode.IsSpace(r) || r > unicode.MaxASCII || unicode.IsControl(r) {
					t.Fatalf("%s accepted %q with %q", what, s, r)
				}
			}
		}
		name, id := protocol.ValidName(s), protocol.ValidID(s)
		if name {
			check("ValidName")
			if !id {
				t.Fatalf("name %q is not a valid id", s)
			}
			if strings.ToLower(s) != s {
				t.Fatalf("ValidName accepted upper case %q", s)
			}
		}
		if id {
			check("ValidID")
		}
		if (protocol.CheckName("f", s) == nil) != name || (protocol.CheckID("f", s) == nil) != id {
			t.Fatalf("Check* disagrees with Valid* on %q", s)
		}
	})
}
