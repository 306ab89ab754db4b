package orchestrator_test

import (
	"strings"
	"testing"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/orchestrator"
)

// A member whose card says auto_join is not invited (it would decline, were
// it asked) and learns of the chat from the start message on its inbox; a
// member without it is invited, and its refusal still stops the team-up.
func TestAutoJoinMembersAreNotInvited(t *testing.T) {
	w := newWorld(t, orchestrator.Config{})
	ping := newWireAgent(t, w.b, card("ping", "talks"))
	ping.team = []string{"pong", "joiner"}
	ping.speak = pingPong("pong")
	pong := newWireAgent(t, w.b, card("pong", "talks back"))
	pong.speak = pingPong("ping")
	jc := card("joiner", "listens")
	jc.AutoJoin = true
	joiner := newWireAgent(t, w.b, jc)
	joiner.declineWith("an auto_join member must not be asked")
	for _, a := range []*wireAgent{ping, pong, joiner} {
		a.start(t.Context())
	}

	res := w.submitWait(t, protocol.GoalRequest{Goal: "chat a little", Launcher: "ping", MaxTurns: 3})
	if res.Status != protocol.GoalConcluded {
		t.Fatalf("result = %+v", res)
	}
	if n := joiner.invited(); n != 0 {
		t.Errorf("the auto_join member was invited %d times", n)
	}
	if n := pong.invited(); n != 1 {
		t.Errorf("the member without auto_join was invited %d times, want 1", n)
	}
	if log := joiner.log(res.CommID); len(log) == 0 || log[0].Event != protocol.EventStart {
		t.Errorf("the auto_join member's first inbox message = %+v, want the start", log)
	}

	pong.declineWith("busy")
	res = w.submitWait(t, protocol.GoalRequest{Goal: "chat again", Launcher: "ping", MaxTurns: 3})
	if res.Status != protocol.GoalFailed || !strings.Contains(res.Reason, "pong declined: busy") {
		t.Fatalf("result with a declining member = %+v", res)
	}
	if n := joiner.invited(); n != 0 {
		t.Errorf("the auto_join member was invited %d times", n)
	}
}
