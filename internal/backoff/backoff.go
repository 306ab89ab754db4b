// Package backoff paces retries: a pause that starts small and doubles up
// to a ceiling, cut short when the context ends. Every retry loop of the
// runtime (JetStream writes and reads, registry and launch requests,
// registration, sends) waits with it, so they all back off the same way.
package backoff

import (
	"context"
	"time"
)

// Pacer is the pause before the next attempt of one retry loop. It is not
// safe for concurrent use: each loop has its own.
type Pacer struct {
	next, max time.Duration
}

// New returns a pacer whose first pause is first and whose pauses double up
// to max.
func New(first, max time.Duration) *Pacer {
	return &Pacer{next: first, max: max}
}

// Pause is the pause Wait or Next takes next, for a log line that says
// when the next attempt comes.
func (p *Pacer) Pause() time.Duration { return p.next }

// Next returns the pause to wait now and doubles the one after, up to the
// ceiling. Loops that wait elsewhere (a select on other channels) use it.
func (p *Pacer) Next() time.Duration {
	d := p.next
	p.next = min(2*p.next, p.max)
	return d
}

// Wait sleeps the next pause. It returns false, at once, if ctx ends first.
func (p *Pacer) Wait(ctx context.Context) bool {
	t := time.NewTimer(p.Next())
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
