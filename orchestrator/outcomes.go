package orchestrator

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/registry"
)

// outcomeWriter records finished tasks in the registry's outcomes bucket
// off the chats' path. Each record is a compare-and-set on the assignee's
// key, and the busiest agents are in many chats at once: written from the
// shards, every task result cost the chat two round trips, and the shards
// of chats sharing an agent fought over its key. Here one goroutine writes,
// all of an agent's pending entries in one compare-and-set.
type outcomeWriter struct {
	mu      sync.Mutex
	pending map[string][]registry.OutcomeEntry // agent -> entries, in order
	n       int
	dropped int // entries not kept since the last warning
	wake    chan struct{}
}

// maxPendingOutcomes bounds the entries waiting to be written: outcomes
// are evidence for ranking, not state, so with the bucket unwritable for
// long the newest are dropped (and counted) rather than memory growing.
const maxPendingOutcomes = 10_000

func newOutcomeWriter() *outcomeWriter {
	return &outcomeWriter{pending: map[string][]registry.OutcomeEntry{}, wake: make(chan struct{}, 1)}
}

// add queues a finished task of agent; it never blocks.
func (w *outcomeWriter) add(agent string, e registry.OutcomeEntry) {
	w.mu.Lock()
	if w.n >= maxPendingOutcomes {
		w.dropped++
		w.mu.Unlock()
		return
	}
	w.pending[agent] = append(w.pending[agent], e)
	w.n++
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// putBack queues again, ahead of what came since, entries whose write was
// cut short by a stop: the last flush writes them.
func (w *outcomeWriter) putBack(agent string, es []registry.OutcomeEntry) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending[agent] = append(es, w.pending[agent]...)
	w.n += len(es)
}

// take returns the pending entries and how many were dropped since the last
// take, and starts afresh.
func (w *outcomeWriter) take() (map[string][]registry.OutcomeEntry, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	p, d := w.pending, w.dropped
	w.pending, w.n, w.dropped = map[string][]registry.OutcomeEntry{}, 0, 0
	return p, d
}

// writeOutcomes runs until ctx ends, then writes what is still pending
// (the shards are drained before a clean stop cancels ctx) within
// outcomeFlushFor.
func (s *Service) writeOutcomes(ctx context.Context) {
	for {
		select {
		case <-s.outcomeQ.wake:
			// Woken and stopped at once, select may pick either: a flush
			// on the cancelled ctx would fail every write (and warn).
			if ctx.Err() != nil {
				break
			}
			s.flushOutcomes(ctx)
			// Under load, outcomes that come within outcomeLinger of each
			// other go in one write per agent (and one re-index of its
			// card in every registry instance) instead of one each.
			select {
			case <-time.After(outcomeLinger):
			case <-ctx.Done():
			}
			continue
		case <-ctx.Done():
		}
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), outcomeFlushFor)
		s.flushOutcomes(fctx)
		cancel()
		return
	}
}

const (
	outcomeFlushFor = 2 * time.Second
	outcomeLinger   = 100 * time.Millisecond
)

func (s *Service) flushOutcomes(ctx context.Context) {
	pending, dropped := s.outcomeQ.take()
	if dropped > 0 {
		s.log.Warn("task outcomes not recorded: too many waiting to be written", "dropped", dropped)
	}
	for agent, es := range pending {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := registry.RecordOutcomes(wctx, s.outcomes, agent, es...)
		cancel()
		switch {
		case err != nil && errors.Is(ctx.Err(), context.Canceled):
			// Stopping: the last flush, on a context of its own, writes them.
			s.outcomeQ.putBack(agent, es)
		case err != nil:
			s.log.Warn("record task outcomes", "agent", agent, "tasks", len(es), "err", err)
		}
	}
}

// recordOutcome tells the registry, through its outcomes bucket, that the
// assignee of a task finished it: the registry learns from it what the agent
// can do (registry.RecordOutcomes). It only queues the entry.
func (s *Service) recordOutcome(comm string, t protocol.Task, status string) {
	text := t.TaskDesc
	if text == "" {
		text = t.TaskAbstract
	}
	if t.Assignee == "" || text == "" || (status != protocol.TaskCompleted && status != protocol.TaskFailed) {
		return
	}
	s.outcomeQ.add(t.Assignee, registry.OutcomeEntry{TaskID: comm + "." + t.TaskID, Task: text, Status: status, At: time.Now()})
}
