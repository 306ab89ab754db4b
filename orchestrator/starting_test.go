package orchestrator_test

import (
	"errors"
	"testing"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/bus/bustest"
)

// A message to a chat whose goal record already names it but whose start
// message is not logged yet is answered 503, send again; to a chat nobody
// is starting, 404.
func TestMessageToAChatBeingStartedIsUnavailable(t *testing.T) {
	b := bustest.New(t)
	s := startOrchestrator(t, b)
	send := func(comm string) error {
		outbox, _ := b.Subjects().Outbox("alice", comm)
		return bus.Request(t.Context(), b.Conn(), outbox, protocol.AgentMessage{ID: "m1", Type: protocol.MsgDiscussion, Content: "hi"}, nil)
	}
	if err := send("cnobodystarts"); !errors.Is(err, protocol.ErrNotFound) {
		t.Errorf("a chat nobody starts: %v, want not found", err)
	}
	done := s.MarkStarting("cbeingstarted")
	defer done()
	if err := send("cbeingstarted"); !errors.Is(err, protocol.ErrUnavailable) {
		t.Errorf("a chat being started: %v, want unavailable (send again)", err)
	}
}
