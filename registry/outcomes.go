package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/registry/search"
)

// BucketOutcomes is the KV bucket of the agents' finished tasks: under each
// agent's name, an OutcomeRecord (docs/protocol.md, section 5).
const BucketOutcomes = bus.BucketOutcomes

// OutcomeRecord is the value under an agent's name in BucketOutcomes: its
// latest finished tasks, oldest first, at most search.MaxOutcomes.
type OutcomeRecord struct {
	Agent    string         `json:"agent"`
	Outcomes []OutcomeEntry `json:"outcomes"`
}

// OutcomeEntry is one finished task.
type OutcomeEntry struct {
	// TaskID identifies the task (e.g. "<comm_id>.<task_id>"); an entry
	// with the id of one already kept replaces it.
	TaskID string `json:"task_id,omitempty"`
	// Task is the text the agent was given.
	Task string `json:"task"`
	// Status is protocol.TaskCompleted or protocol.TaskFailed.
	Status string    `json:"status"`
	At     time.Time `json:"at"`
}

// maxOutcomeTaskBytes bounds the task text kept per outcome.
const maxOutcomeTaskBytes = 1024

// casAttempts bounds the compare-and-set attempts of RecordOutcomes; between
// two, it waits up to casBackoff, at random, so racing writers spread out.
const (
	casAttempts = 50
	casBackoff  = 5 * time.Millisecond
)

// RecordOutcomes adds finished tasks of agent to its record in kv (the
// BucketOutcomes bucket) in one compare-and-set, in order, so that writers
// never lose each other's entries, and keeps the latest search.MaxOutcomes.
// A writer that collects them (the orchestrator, off its chats' path) pays
// one read and one write per agent instead of one of each per task.
func RecordOutcomes(ctx context.Context, kv jetstream.KeyValue, agent string, es ...OutcomeEntry) error {
	if !protocol.ValidName(agent) {
		return fmt.Errorf("registry: outcome: %q is not a valid agent name", agent)
	}
	for i := range es {
		e := &es[i]
		if e.Status != protocol.TaskCompleted && e.Status != protocol.TaskFailed {
			return fmt.Errorf("registry: outcome: status %q is not %s or %s", e.Status, protocol.TaskCompleted, protocol.TaskFailed)
		}
		if strings.TrimSpace(e.Task) == "" {
			return errors.New("registry: outcome: the task has no text")
		}
		if len(e.Task) > maxOutcomeTaskBytes {
			e.Task = strings.ToValidUTF8(e.Task[:maxOutcomeTaskBytes], "")
		}
		if e.At.IsZero() {
			e.At = time.Now()
		}
	}
	if len(es) == 0 {
		return nil
	}
	var err error
	for range casAttempts {
		var rec OutcomeRecord
		var rev uint64
		entry, gerr := kv.Get(ctx, agent)
		switch {
		case gerr == nil:
			rev = entry.Revision()
			if json.Unmarshal(entry.Value(), &rec) != nil {
				rec = OutcomeRecord{} // not ours: start afresh
			}
		case errors.Is(gerr, jetstream.ErrKeyNotFound):
		default:
			return fmt.Errorf("registry: outcome of %s: %w", agent, gerr)
		}
		rec.Agent = agent
		for _, e := range es {
			if e.TaskID != "" {
				rec.Outcomes = slices.DeleteFunc(rec.Outcomes, func(o OutcomeEntry) bool { return o.TaskID == e.TaskID })
			}
			rec.Outcomes = append(rec.Outcomes, e)
		}
		if n := len(rec.Outcomes); n > search.MaxOutcomes {
			rec.Outcomes = rec.Outcomes[n-search.MaxOutcomes:]
		}
		data, _ := json.Marshal(rec)
		if rev == 0 {
			_, err = kv.Create(ctx, agent, data)
		} else {
			_, err = kv.Update(ctx, agent, data, rev)
		}
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("registry: outcome of %s: %w", agent, errors.Join(err, ctx.Err()))
		case <-time.After(rand.N(casBackoff)):
		}
	}
	return fmt.Errorf("registry: outcome of %s: %w", agent, err)
}

// applyOutcomes hands an agent's outcomes from KV to the index.
func (s *Service) applyOutcomes(ctx context.Context, e jetstream.KeyValueEntry) {
	name := e.Key()
	var outs []search.Outcome
	if e.Operation() == jetstream.KeyValuePut {
		var rec OutcomeRecord
		if err := json.Unmarshal(e.Value(), &rec); err != nil {
			s.log.Warn("registry: ignoring invalid outcomes in KV", "key", name, "revision", e.Revision(), "err", err)
		}
		for _, o := range rec.Outcomes {
			outs = append(outs, search.Outcome{Task: o.Task, OK: o.Status == protocol.TaskCompleted, At: o.At})
		}
	}
	if err := s.index.SetOutcomes(ctx, name, outs, time.Now()); err != nil {
		// The outcomes are kept; re-indexing the card failed.
		s.log.Warn("registry: index outcomes; retrying in the background", "agent", name, "err", err)
		s.setPending(name)
	}
}
