package registry

import (
	"context"
	"time"
)

// Cards the index could not take, because the embedder (a remote service)
// failed, are not left out until their agents register again: the retry loop
// indexes them once the embedder answers, waiting RetryInterval after a
// failure, then twice as long after each failure in a row, up to RetryMax.

func (s *Service) setPending(name string) {
	s.pendingMu.Lock()
	s.pending[name] = true
	s.pendingMu.Unlock()
	select {
	case s.retry <- struct{}{}:
	default:
	}
}

func (s *Service) clearPending(name string) {
	s.pendingMu.Lock()
	delete(s.pending, name)
	s.pendingMu.Unlock()
}

func (s *Service) isPending(name string) bool {
	s.pendingMu.Lock()
	defer s.pendingMu.Unlock()
	return s.pending[name]
}

// Pending returns how many agents wait to be indexed.
func (s *Service) Pending() int {
	s.pendingMu.Lock()
	defer s.pendingMu.Unlock()
	return len(s.pending)
}

func (s *Service) retryLoop(ctx context.Context) {
	wait := s.cfg.RetryInterval
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.retry:
		}
		for s.Pending() > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			if s.retryPending(ctx) {
				wait = s.cfg.RetryInterval
			} else {
				wait = min(2*wait, s.cfg.RetryMax)
			}
		}
	}
}

// retryPending indexes the pending agents again; it reports whether every
// one of them could be indexed.
func (s *Service) retryPending(ctx context.Context) bool {
	s.pendingMu.Lock()
	names := make([]string, 0, len(s.pending))
	for n := range s.pending {
		names = append(names, n)
	}
	s.pendingMu.Unlock()
	ok := true
	for _, name := range names {
		s.upsertMu.Lock()
		s.view.mu.RLock()
		a, have := s.view.agents[name]
		s.view.mu.RUnlock()
		if !have {
			// Not in the view yet (the watch puts it there just after the
			// failure), or deregistered, which clears it.
			s.upsertMu.Unlock()
			continue
		}
		err := s.index.Upsert(ctx, a.rec.doc())
		s.upsertMu.Unlock()
		if err != nil {
			if ctx.Err() != nil {
				return false
			}
			s.log.Debug("registry: index retry failed", "agent", name, "err", err)
			ok = false
			// The embedder is still down: the others would fail alike.
			break
		}
		s.clearPending(name)
		s.log.Info("registry: indexed after a retry", "agent", name)
	}
	return ok
}
