package orchestrator

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
)

// A message event carries the logged bytes of its message; it must decode
// to the same event as one encoded whole.
func TestMessageEventCarriesTheLoggedMessage(t *testing.T) {
	m := protocol.AgentMessage{Type: protocol.MsgDiscussion, Sender: "a", Seq: 4, CommID: "c1", Content: `he said "hi" }`}
	at := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	whole := protocol.GoalEvent{GoalID: "g1", Kind: protocol.EventMessage, CommID: "c1", At: at, Message: &m}
	spliced := withMessage(bus.Encode(protocol.GoalEvent{GoalID: "g1", Kind: protocol.EventMessage, CommID: "c1", At: at}), bus.Encode(m))
	var got protocol.GoalEvent
	if err := json.Unmarshal(spliced, &got); err != nil {
		t.Fatalf("%s: %v", spliced, err)
	}
	if string(bus.Encode(got)) != string(bus.Encode(whole)) {
		t.Errorf("spliced event %s\nwant %s", bus.Encode(got), bus.Encode(whole))
	}
}
