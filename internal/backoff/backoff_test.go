package backoff

import (
	"context"
	"testing"
	"time"
)

func TestPausesDoubleUpToTheCeiling(t *testing.T) {
	p := New(10*time.Millisecond, 50*time.Millisecond)
	var got []time.Duration
	for range 5 {
		got = append(got, p.Next())
	}
	want := []time.Duration{10, 20, 40, 50, 50}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("pauses %v, want %v ms", got, want)
		}
	}
}

func TestWaitEndsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if New(time.Hour, time.Hour).Wait(ctx) {
		t.Fatal("Wait on an ended context reported a completed pause")
	}
	if !New(time.Microsecond, time.Microsecond).Wait(context.Background()) {
		t.Fatal("Wait without an end reported an interruption")
	}
}
