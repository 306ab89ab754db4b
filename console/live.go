package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
)

// maxFollowed bounds the goals one live page follows (the goal and its
// nested sub-goals).
const maxFollowed = 64

// keepAlive is how often an idle event stream sends a comment, so proxies
// and browsers keep it open.
const keepAlive = 20 * time.Second

// sse writes Server-Sent Events.
type sse struct {
	w http.ResponseWriter
	f http.Flusher
}

func startSSE(w http.ResponseWriter) (*sse, bool) {
	f, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "internal", "this connection cannot stream")
		return nil, false
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	_, _ = fmt.Fprint(w, ": ioa console\n\n")
	f.Flush()
	return &sse{w: w, f: f}, true
}

func (e *sse) send(event string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(e.w, "event: %s\ndata: %s\n\n", event, data); err != nil {
		return err
	}
	e.f.Flush()
	return nil
}

func (e *sse) ping() error {
	if _, err := fmt.Fprint(e.w, ": ping\n\n"); err != nil {
		return err
	}
	e.f.Flush()
	return nil
}

// liveItem is what the consumers hand to a live page's loop: a goal event
// or result, or a chat log entry.
type liveItem struct {
	goalID string
	event  *protocol.GoalEvent
	result *protocol.GoalResult
	msg    *protocol.AgentMessage
}

// serveGoalLive streams one goal, its chat and its nested sub-goals as they
// happen, from the start: JetStream ordered consumers on the goal's events
// (stream IOA_GOALS) and on each chat's log (IOA_CHATS). Events:
//
//	goal     GoalStatus, at the start and after each step of a goal's life
//	result   GoalResult, once, when a goal ends (from its result subject)
//	message  an AgentMessage as logged (with goal_id)
//	chat     ChatState after each message: state, speaker, task board, usage
//	error    {"message"} when following stops
func (s *Server) serveGoalLive(w http.ResponseWriter, r *http.Request) {
	root, err := s.getGoal(r, r.PathValue("id"))
	if err != nil {
		writeServiceError(w, err)
		return
	}
	out, ok := startSSE(w)
	if !ok {
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()

	items := make(chan liveItem, 256)
	post := func(it liveItem) {
		select {
		case items <- it:
		case <-ctx.Done():
		}
	}
	var consumers []jetstream.ConsumeContext
	defer func() {
		cancel() // first: a callback blocked on items returns
		for _, c := range consumers {
			c.Stop()
		}
	}()
	fail := func(err error) { _ = out.send("error", map[string]string{"message": err.Error()}) }

	followed := map[string]bool{}
	chats := map[string]*chatView{} // by goal id
	follow := func(goalID string) error {
		if followed[goalID] || len(followed) >= maxFollowed {
			return nil
		}
		followed[goalID] = true
		events, err := s.cfg.Subjects.GoalEvents(goalID)
		if err != nil {
			return err
		}
		result, _ := s.cfg.Subjects.GoalResult(goalID)
		cc, err := s.consume(ctx, bus.StreamGoals, []string{events, result}, func(m jetstream.Msg) {
			if m.Subject() == result {
				var res protocol.GoalResult
				if json.Unmarshal(m.Data(), &res) == nil {
					post(liveItem{goalID: goalID, result: &res})
				}
				return
			}
			var ev protocol.GoalEvent
			if json.Unmarshal(m.Data(), &ev) == nil {
				post(liveItem{goalID: goalID, event: &ev})
			}
		})
		if err != nil {
			return err
		}
		consumers = append(consumers, cc)
		return nil
	}
	followChat := func(goalID, commID string) error {
		if chats[goalID] != nil {
			return nil
		}
		subj, err := s.cfg.Subjects.Chat(commID)
		if err != nil {
			return err
		}
		chats[goalID] = newChatView()
		cc, err := s.consume(ctx, bus.StreamChats, []string{subj}, func(m jetstream.Msg) {
			var am protocol.AgentMessage
			if json.Unmarshal(m.Data(), &am) == nil {
				post(liveItem{goalID: goalID, msg: &am})
			}
		})
		if err != nil {
			return err
		}
		consumers = append(consumers, cc)
		return nil
	}
	// sendGoal sends the goal's record; res, when the step was its end,
	// completes a record that has not caught up with it yet.
	sendGoal := func(goalID string, res *protocol.GoalResult) error {
		g, err := s.getGoal(r, goalID)
		if err != nil {
			return nil // the record may lag its first event; the next step sends it
		}
		if res != nil && g.Result == nil {
			g.Status, g.Result, g.Outcome = res.Status, res, res.Outcome
		}
		return out.send("goal", g)
	}

	if err := out.send("goal", root); err != nil {
		return
	}
	if err := follow(root.GoalID); err != nil {
		fail(err)
		return
	}
	if root.CommID != "" {
		if err := followChat(root.GoalID, root.CommID); err != nil {
			fail(err)
			return
		}
	}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		var it liveItem
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if out.ping() != nil {
				return
			}
			continue
		case it = <-items:
		}
		var err error
		switch {
		case it.msg != nil:
			v := chats[it.goalID]
			if v == nil || !v.apply(*it.msg) {
				continue
			}
			it.msg.GoalID = it.goalID
			if err = out.send("message", it.msg); err == nil {
				err = out.send("chat", v.state(it.goalID, it.msg.TS))
			}
		case it.result != nil:
			// The result itself first: it needs no request, so the page
			// learns the end even when goal.get is slow.
			if err = out.send("result", it.result); err == nil {
				err = sendGoal(it.goalID, it.result)
			}
		case it.event != nil:
			ev := it.event
			switch ev.Kind {
			case protocol.EventMessage, protocol.EventTaskAssigned, protocol.EventTaskDone:
				continue // the chat's log says it, in order
			case protocol.EventTeamFormed:
				if ev.CommID != "" {
					if err = followChat(it.goalID, ev.CommID); err != nil {
						fail(err)
						return
					}
				}
			case protocol.EventSubgoal:
				if ev.Child != "" {
					if err = follow(ev.Child); err != nil {
						fail(err)
						return
					}
				}
			}
			err = sendGoal(it.goalID, ev.Result)
		}
		if err != nil {
			return // the browser went away
		}
	}
}

// consume runs an ordered consumer from the start of a stream's subjects.
func (s *Server) consume(ctx context.Context, stream string, subjects []string, fn func(jetstream.Msg)) (jetstream.ConsumeContext, error) {
	st, err := s.js.Stream(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", stream, err)
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: subjects})
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", stream, err)
	}
	return cons.Consume(fn)
}

// GoalChange is what the goal list's stream says: a goal was accepted,
// formed its team, or ended.
type GoalChange struct {
	GoalID string    `json:"goal_id"`
	Kind   string    `json:"kind"`
	At     time.Time `json:"at"`
}

// serveGoalsLive streams the goals' life steps (a core NATS subscription
// on <p>.goal.*.events), so the goal list redraws when something changes.
func (s *Server) serveGoalsLive(w http.ResponseWriter, r *http.Request) {
	changes := make(chan GoalChange, 64)
	sub, err := s.cfg.NC.Subscribe(s.cfg.Subjects.AllGoalEvents(), func(m *nats.Msg) {
		var ev protocol.GoalEvent
		if json.Unmarshal(m.Data, &ev) != nil {
			return
		}
		switch ev.Kind {
		case protocol.EventMessage, protocol.EventTaskAssigned, protocol.EventTaskDone:
			return
		}
		select {
		case changes <- GoalChange{GoalID: ev.GoalID, Kind: ev.Kind, At: ev.At}:
		default: // the page is slow; it reloads on the next change anyway
		}
	})
	if err != nil {
		writeError(w, http.StatusBadGateway, "unavailable", err.Error())
		return
	}
	defer func() { _ = sub.Unsubscribe() }()
	out, ok := startSSE(w)
	if !ok {
		return
	}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.done:
			return
		case <-tick.C:
			if out.ping() != nil {
				return
			}
		case c := <-changes:
			if out.send("goal", c) != nil {
				return
			}
		}
	}
}
