package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
)

// A member's answer to its invitation says why a team cannot form in
// words a launcher can act on: no Go types, no trailing colon, no hint at
// ioa serve for an agent's subject.
func TestInviteAnswer(t *testing.T) {
	const subject = "ioa.agent.bot2.invite"
	noResponders := fmt.Errorf("wrapped: %w", bus.ErrNoResponders)
	for _, tc := range []struct {
		name string
		raw  string
		err  error
		want string // "" for an acceptance
	}{
		{"accepted", `{"accept":true}`, nil, ""},
		{"declined", `{"accept":false,"reason":"busy"}`, nil, "member bot2 declined: busy"},
		{"declined without a reason", `{"accept":false}`, nil, "member bot2 declined"},
		{"a string for accept", `{"accept":"yes"}`, nil, `member bot2 answered the invitation with "{\"accept\":\"yes\"}", not {"accept":true} or {"accept":false,"reason":"…"}: field "accept": got a string, want a boolean`},
		{"not JSON", `ok`, nil, `member bot2 answered the invitation with "ok", not {"accept":true}`},
		{"nobody listens", ``, noResponders, "member bot2 does not listen for invitations on ioa.agent.bot2.invite (is it running?"},
		{"no answer in time", ``, context.DeadlineExceeded, "member bot2 did not answer the invitation within 8s"},
	} {
		err := inviteAnswer("bot2", subject, []byte(tc.raw), tc.err, bus.Codec{})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want nil", tc.name, err)
		case tc.want != "" && !errors.Is(err, protocol.ErrConflict):
			t.Errorf("%s: %v, want a conflict", tc.name, err)
		case tc.want != "" && !strings.HasPrefix(protocol.AsError(err).Message, tc.want):
			t.Errorf("%s:\n got %q\nwant %q…", tc.name, protocol.AsError(err).Message, tc.want)
		}
	}
}
