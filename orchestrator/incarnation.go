package orchestrator

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioa-nats/ioa/bus"
)

// An agent that registers with a new incarnation is a new process: the one
// before it is gone, with whatever it held. The referee follows the
// registry's cards (KV ioa_agents) and, in the chats it referees, hands that
// work to the new process at once instead of waiting for the old one's
// heartbeats to lapse: the message that gave it the turn, and the assignment
// of each task it was running, go again to its inbox. A member that then
// does not act loses its turn or task to the usual timeouts.

// watchIncarnations follows the registry's cards until ctx ends.
func (s *Service) watchIncarnations(ctx context.Context) error {
	agents, err := s.js.KeyValue(ctx, bus.BucketAgents)
	if err != nil {
		return err
	}
	w, err := agents.WatchAll(ctx)
	if err != nil {
		return err
	}
	s.wg.Go(func() {
		defer func() { _ = w.Stop() }()
		known := map[string]string{} // name -> incarnation
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				if e == nil || e.Operation() != jetstream.KeyValuePut {
					continue // the end of the initial values, or a deregistration
				}
				var card struct {
					Incarnation string `json:"incarnation"`
				}
				if json.Unmarshal(e.Value(), &card) != nil || card.Incarnation == "" {
					continue
				}
				name := e.Key()
				before, seen := known[name]
				known[name] = card.Incarnation
				if seen && before != card.Incarnation {
					s.handBack(ctx, name)
				}
			}
		}
	})
	return nil
}

// handBack re-sends to name's inbox, in every open chat this instance
// referees, what name must act on: the turn it holds and the tasks it runs.
func (s *Service) handBack(ctx context.Context, name string) {
	s.mu.Lock()
	var comms []string
	for comm, rec := range s.active {
		if slices.Contains(rec.members, name) {
			comms = append(comms, comm)
		}
	}
	s.mu.Unlock()
	for _, comm := range comms {
		s.onShardAsync(ctx, comm, func() {
			rec := s.activeChat(comm)
			if rec == nil || rec.stale || rec.Chat.Ended() {
				return
			}
			inbox, err := s.subj.Inbox(name, comm)
			if err != nil {
				return
			}
			now := time.Now().UTC()
			n := 0
			if rec.Chat.Speaker == name && rec.last != nil {
				_ = s.nc.Publish(inbox, rec.last)
				rec.TurnSince = now // the new process gets a full turn
				n++
			}
			for _, id := range rec.Chat.RunningTasks() {
				if t, ok := rec.Chat.Task(id); ok && t.Assignee == name {
					if msg := rec.assigns[id]; msg != nil {
						_ = s.nc.Publish(inbox, msg)
						rec.TaskSince[id] = now // and the whole task time
						n++
					}
				}
			}
			if n > 0 {
				s.log.Info("member restarted: its work handed to the new process", "comm", comm, "member", name, "messages", n)
			}
		})
	}
}
