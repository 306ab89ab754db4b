package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
)

// chatView is one chat folded from its log with protocol.Apply, the same
// pure function the referee and every member run, plus what the console
// shows beside the state: who is a person, usage per agent, and when each
// task attempt started and ended.
type chatView struct {
	chat  protocol.Chat
	cards map[string]protocol.AgentCard
	usage map[string]protocol.Usage
	total protocol.Usage
	times map[string]*taskTime
}

type taskTime struct {
	attempt    int
	start, end time.Time
}

func newChatView() *chatView {
	return &chatView{cards: map[string]protocol.AgentCard{}, usage: map[string]protocol.Usage{}, times: map[string]*taskTime{}}
}

// apply folds one logged message; it reports false for an entry that does
// not follow (a repeat, or a foreign entry on a server that lets others
// write the log), which changes nothing.
func (v *chatView) apply(m protocol.AgentMessage) bool {
	next, err := protocol.Apply(v.chat, m)
	if err != nil {
		return false
	}
	v.chat = next
	if m.Type == protocol.MsgSystem && m.Event == protocol.EventStart {
		for _, c := range m.Team {
			v.cards[c.Name] = c
		}
	}
	if m.Usage != nil {
		v.usage[m.Sender] = v.usage[m.Sender].Add(*m.Usage)
		v.total = v.total.Add(*m.Usage)
	}
	for _, t := range v.chat.Tasks {
		tt := v.times[t.TaskID]
		if tt == nil || tt.attempt != t.Attempt {
			tt = &taskTime{attempt: t.Attempt, start: m.TS}
			v.times[t.TaskID] = tt
		}
		if t.Done() && tt.end.IsZero() {
			tt.end = m.TS
		}
	}
	return true
}

// person reports whether a member is a person (card type human).
func (v *chatView) person(name string) bool { return v.cards[name].Type == protocol.TypeHuman }

// ChatState is what the console shows of a chat: the FSM's state, the task
// board and the usage, and what waits on a person.
type ChatState struct {
	GoalID    string                    `json:"goal_id"`
	CommID    string                    `json:"comm_id"`
	State     protocol.State            `json:"state"`
	Speaker   string                    `json:"speaker"`
	Turn      int                       `json:"turn"`
	MaxTurns  int                       `json:"max_turns"`
	FinalTurn bool                      `json:"final_turn"`
	Launcher  string                    `json:"launcher"`
	Waiting   []string                  `json:"waiting"`
	LastSeq   uint64                    `json:"last_seq"`
	Members   []Member                  `json:"members"`
	Tasks     []TaskRow                 `json:"tasks"`
	Usage     map[string]protocol.Usage `json:"usage"`
	Total     protocol.Usage            `json:"total"`
	// YourTurn names the person who holds the turn, if a person does.
	YourTurn string `json:"your_turn,omitempty"`
	// InputRequired lists the running tasks assigned to people.
	InputRequired []string `json:"input_required,omitempty"`
	Ended         bool     `json:"ended"`
}

// Member is one member of a chat.
type Member struct {
	Name   string `json:"name"`
	Type   string `json:"type"`
	Person bool   `json:"person"`
}

// TaskRow is one task of the board.
type TaskRow struct {
	TaskID     string    `json:"task_id"`
	Assignee   string    `json:"assignee"`
	Abstract   string    `json:"task_abstract,omitempty"`
	Desc       string    `json:"task_desc"`
	Async      bool      `json:"async"`
	Status     string    `json:"status"`
	Attempt    int       `json:"attempt"`
	Result     string    `json:"result,omitempty"`
	Started    time.Time `json:"started,omitzero"`
	Ended      time.Time `json:"ended,omitzero"`
	DurationMS int64     `json:"duration_ms"` // so far, for a running task (as of the last message)
	Person     bool      `json:"person"`
}

func (v *chatView) state(goalID string, lastTS time.Time) ChatState {
	c := &v.chat
	st := ChatState{
		GoalID: goalID, CommID: c.CommID, State: c.State, Speaker: c.Speaker, Turn: c.Turn, MaxTurns: c.MaxTurns,
		FinalTurn: c.FinalTurn, Launcher: c.Launcher, Waiting: c.Waiting, LastSeq: c.LastSeq,
		Usage: v.usage, Total: v.total, Ended: c.Ended(), Members: []Member{}, Tasks: []TaskRow{},
	}
	for _, n := range c.Members {
		st.Members = append(st.Members, Member{Name: n, Type: v.cards[n].Type, Person: v.person(n)})
	}
	if !c.Ended() && c.State == protocol.StateDiscussion && c.Speaker != "" && v.person(c.Speaker) {
		st.YourTurn = c.Speaker
	}
	for _, t := range c.Tasks {
		row := TaskRow{
			TaskID: t.TaskID, Assignee: t.Assignee, Abstract: t.TaskAbstract, Desc: t.TaskDesc, Async: t.Async,
			Status: t.Status, Attempt: t.Attempt, Result: t.Result, Person: v.person(t.Assignee),
		}
		if tt := v.times[t.TaskID]; tt != nil {
			row.Started, row.Ended = tt.start, tt.end
			end := tt.end
			if end.IsZero() {
				end = lastTS
			}
			if !tt.start.IsZero() && end.After(tt.start) {
				row.DurationMS = end.Sub(tt.start).Milliseconds()
			}
		}
		if !c.Ended() && t.Status == protocol.TaskRunning && row.Person {
			st.InputRequired = append(st.InputRequired, t.TaskID)
		}
		st.Tasks = append(st.Tasks, row)
	}
	return st
}

// loadChat folds a chat's log as it is now.
func (s *Server) loadChat(ctx context.Context, commID string) (*chatView, error) {
	subj, err := s.cfg.Subjects.Chat(commID)
	if err != nil {
		return nil, protocol.Errorf(protocol.ErrInvalid, "%v", err)
	}
	stream, err := s.js.Stream(ctx, bus.StreamChats)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", bus.StreamChats, err)
	}
	last, err := stream.GetLastMsgForSubject(ctx, subj)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, protocol.Errorf(protocol.ErrNotFound, "chat %s has no log", commID)
	}
	if err != nil {
		return nil, fmt.Errorf("chat %s: %w", commID, err)
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subj}})
	if err != nil {
		return nil, fmt.Errorf("chat %s: %w", commID, err)
	}
	v := newChatView()
	for {
		batch, err := cons.Fetch(256, jetstream.FetchMaxWait(s.cfg.RequestTimeout))
		if err != nil {
			return nil, fmt.Errorf("chat %s: %w", commID, err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			var am protocol.AgentMessage
			if json.Unmarshal(m.Data(), &am) == nil {
				v.apply(am)
			}
			if md, err := m.Metadata(); err == nil && md.Sequence.Stream >= last.Sequence {
				return v, nil
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return nil, fmt.Errorf("chat %s: %w", commID, err)
		}
		if got == 0 {
			return nil, fmt.Errorf("chat %s: the log stopped short of its last entry", commID)
		}
	}
}
