package orchestrator_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/bus/bustest"
	"github.com/ioa-nats/ioa/orchestrator"
)

// A chat whose shard is stuck (its store calls hang, or a flood of its
// messages) slows only the chats of that shard: a message for it is
// refused at once with 503 (send again) instead of holding the outbox
// endpoint, and messages for chats on other shards are refereed meanwhile.
func TestStuckChatDoesNotHoldUpTheOthers(t *testing.T) {
	b := bustest.New(t)
	orch := startOrchestrator(t, b)
	const stuck = "cstuck0000001"
	other := ""
	for i := 0; other == ""; i++ {
		if id := fmt.Sprintf("cother%07d", i); !orch.SameShard(stuck, id) {
			other = id
		}
	}
	send := func(comm, id string) error {
		subject, err := b.Subjects().Outbox("w1", comm)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		var reply protocol.SendReply
		return bus.Request(ctx, b.Conn(), subject, protocol.AgentMessage{Type: protocol.MsgDiscussion, ID: id, Content: "hello"}, &reply)
	}
	release := orch.HoldShard(stuck)
	err := send(stuck, "m1")
	if !errors.Is(err, protocol.ErrUnavailable) || !strings.Contains(err.Error(), "send again") {
		t.Errorf("a message for the stuck chat: %v, want 503 unavailable at once (send again)", err)
	}
	// Refereed while the other shard is stuck: there is no such chat.
	if err := send(other, "m2"); !errors.Is(err, protocol.ErrNotFound) {
		t.Errorf("a message for a chat on another shard: %v, want not_found from the referee", err)
	}
	release()
	// The shard drains the jobs that filled its queue first: until then the
	// answer is still 503, which a sender meets by sending again.
	err = send(stuck, "m3")
	for deadline := time.Now().Add(10 * time.Second); errors.Is(err, protocol.ErrUnavailable) && time.Now().Before(deadline); err = send(stuck, "m3") {
		time.Sleep(10 * time.Millisecond)
	}
	if !errors.Is(err, protocol.ErrNotFound) {
		t.Errorf("a message for the chat once its shard runs again: %v, want not_found from the referee", err)
	}
}

// startOrchestrator runs one orchestrator instance on b until the test ends.
func startOrchestrator(t *testing.T, b *bus.Bus) *orchestrator.Service {
	t.Helper()
	orch, err := orchestrator.New(b, orchestrator.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := orch.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = orch.Shutdown(context.Background()) })
	return orch
}
