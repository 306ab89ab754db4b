package agentkit

import (
	"log/slog"
	"slices"
	"testing"

	"github.com/ioa-nats/ioa/agentkit/protocol"
)

// A replica applies its chat's messages in seq order whatever order they
// arrive in, and keeps the last recentMessages of them, oldest first, for
// the policy; the policy's copy is its own.
func TestReplicaAppliesInOrderAndKeepsTheRecentMessages(t *testing.T) {
	opts := defaultOptions()
	opts.recentMessages = 3
	a := &agentState{rt: &Runtime{opts: opts}, Agent: Agent{Card: protocol.AgentCard{Name: "b"}}, log: slog.New(slog.DiscardHandler)}
	l := newChatLoop(a, "c1")
	msg := func(seq uint64) *protocol.AgentMessage {
		if seq == 1 {
			return &protocol.AgentMessage{Seq: 1, CommID: "c1", Type: protocol.MsgSystem, Event: protocol.EventStart, Sender: protocol.SystemSender,
				Launcher: "a", Team: []protocol.AgentCard{{Name: "a"}, {Name: "b"}}, Goal: "g", MaxTurns: 20, NextSpeaker: []string{"a"}}
		}
		speaker, next := "a", "b"
		if seq%2 == 1 {
			speaker, next = "b", "a"
		}
		return &protocol.AgentMessage{Seq: seq, CommID: "c1", Type: protocol.MsgDiscussion, Sender: speaker, Content: "m", NextSpeaker: []string{next}}
	}
	// 1, then 3 and 4 ahead of the gap at 2, then 2, then 5 to 7 in order
	// and 6 again.
	for _, seq := range []uint64{1, 3, 4, 2, 5, 6, 7, 6} {
		l.receive(t.Context(), msg(seq))
	}
	if l.chat.LastSeq != 7 || len(l.pending) != 0 {
		t.Fatalf("replica at seq %d with %d held, want 7 and none", l.chat.LastSeq, len(l.pending))
	}
	var seqs []uint64
	got := l.recentMessages()
	for _, m := range got {
		seqs = append(seqs, m.Seq)
	}
	if !slices.Equal(seqs, []uint64{5, 6, 7}) {
		t.Errorf("recent messages %v, want [5 6 7]", seqs)
	}
	got[0].Content = "changed by the policy"
	if l.recentMessages()[0].Content != "m" {
		t.Error("a policy's change to its Turn reached the replica")
	}
}
