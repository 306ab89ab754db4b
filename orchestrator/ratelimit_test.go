package orchestrator

import "testing"

// The limiters of a chat go when it ends, so a long-running referee keeps
// one per member of the open chats only.
func TestRateLimitsForgetEndedChats(t *testing.T) {
	l := newRateLimits(1, 1)
	for _, k := range []string{"a/c1", "b/c1", "a/c2"} {
		if !l.allow(k) {
			t.Fatalf("first message of %s refused", k)
		}
	}
	if l.allow("a/c1") {
		t.Fatal("a second message within the burst of 1 was allowed")
	}
	l.forget("c1", []string{"a", "b"})
	if len(l.byKey) != 1 || l.byKey["a/c2"] == nil {
		t.Fatalf("limiters left: %v, want only a/c2", l.byKey)
	}
}
