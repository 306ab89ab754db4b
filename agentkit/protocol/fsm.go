package protocol

import (
	"slices"
	"strings"
)

// State is a chat's phase, IoA's five states.
type State string

// The chat states of docs/protocol.md section 9.
const (
	StateDiscussion State = "discussion"
	StateSyncTasks  State = "sync_task_assignment"
	StateAsyncTasks State = "async_task_assignment"
	StatePause      State = "pause_and_trigger"
	StateConclusion State = "conclusion"
)

// Task run states kept in TaskState.Status.
const (
	TaskRunning   = "running"
	TaskCancelled = "cancelled"
)

// TaskState is a task as the chat knows it.
type TaskState struct {
	Task
	Async      bool   `json:"async"`
	Assigner   string `json:"assigner"`
	Attempt    int    `json:"attempt"`
	Progressed bool   `json:"progressed"`
	Status     string `json:"status"` // running, completed, failed, cancelled
	Result     string `json:"result,omitempty"`
	EndedSeq   uint64 `json:"ended_seq,omitempty"` // the log entry of its result
}

// Done reports whether the task has ended.
func (t TaskState) Done() bool { return t.Status != TaskRunning }

// Chat is the state of one group chat: a pure fold of its log by Apply.
type Chat struct {
	CommID      string      `json:"comm_id"`
	GoalID      string      `json:"goal_id"`
	Goal        string      `json:"goal"`
	Launcher    string      `json:"launcher"`
	Members     []string    `json:"members"`
	State       State       `json:"state"`
	Speaker     string      `json:"speaker"` // who may send a turn message; "" while waiting
	Turn        int         `json:"turn"`
	MaxTurns    int         `json:"max_turns"`
	TeamUpDepth int         `json:"team_up_depth"`
	FinalTurn   bool        `json:"final_turn"` // after turn_limit: only a conclusion is legal
	Resume      string      `json:"resume"`     // who speaks when the awaited tasks are done
	Waiting     []string    `json:"waiting"`    // task ids the current state waits on
	Tasks       []TaskState `json:"tasks"`
	Plan        string      `json:"plan,omitempty"`
	LastSeq     uint64      `json:"last_seq"`
	Outcome     string      `json:"outcome,omitempty"` // goal status once concluded
	Reason      string      `json:"reason,omitempty"`
	Conclusion  string      `json:"conclusion,omitempty"`
	Undone      []string    `json:"undone,omitempty"`      // the conclusion's parts nobody could do
	NotStarted  []string    `json:"not_started,omitempty"` // the conclusion's planned parts never assigned
}

// IsMember reports whether name is in the team.
func (c *Chat) IsMember(name string) bool { return slices.Contains(c.Members, name) }

// Task returns the task with the id, if the chat has one.
func (c *Chat) Task(id string) (TaskState, bool) {
	if i := c.taskIndex(id); i >= 0 {
		return c.Tasks[i], true
	}
	return TaskState{}, false
}

// Ended reports whether the chat has reached its terminal state.
func (c *Chat) Ended() bool { return c.State == StateConclusion }

// RunningTasks returns the ids of tasks that have not ended, in assignment order.
func (c *Chat) RunningTasks() []string {
	var ids []string
	for _, t := range c.Tasks {
		if !t.Done() {
			ids = append(ids, t.TaskID)
		}
	}
	return ids
}

func (c *Chat) taskIndex(id string) int {
	return slices.IndexFunc(c.Tasks, func(t TaskState) bool { return t.TaskID == id })
}

// clone copies everything Apply may change, so the caller's state is never
// touched and a refused message leaves no trace.
func (c Chat) clone() Chat {
	c.Members = slices.Clone(c.Members)
	c.Waiting = slices.Clone(c.Waiting)
	c.Tasks = slices.Clone(c.Tasks)
	return c
}

// IsTurnMessage reports whether a message of type t counts as a turn.
func IsTurnMessage(t string) bool {
	switch t {
	case MsgDiscussion, MsgSyncTaskAssign, MsgAsyncAssign, MsgPause, MsgConclusion:
		return true
	}
	return false
}

// Apply folds one logged message into the chat state. m must carry the
// sender and seq the referee stamped (seq = c.LastSeq+1). The referee may
// send a failed task_result for a task whose assignee is gone. Apply is pure: it
// reads no clock, and on error it returns c unchanged. The referee calls it
// before logging a message; every member calls it on what it receives.
func Apply(c Chat, m AgentMessage) (Chat, error) {
	if m.Seq != c.LastSeq+1 {
		return c, Errorf(ErrInvalid, "message seq %d does not follow %d", m.Seq, c.LastSeq)
	}
	if c.State == "" && !(m.Type == MsgSystem && m.Event == EventStart) {
		return c, Errorf(ErrIllegalTransition, "chat has not started")
	}
	if c.State == StateConclusion {
		return c, Errorf(ErrIllegalTransition, "chat has concluded; no more messages")
	}
	if m.Type == MsgSystem {
		if m.Sender != SystemSender {
			return c, Errorf(ErrForbidden, "only the referee sends system messages")
		}
	} else if !c.IsMember(m.Sender) && !(m.Type == MsgTaskResult && m.Sender == SystemSender) {
		return c, Errorf(ErrNotMember, "%q is not a member of chat %s", m.Sender, c.CommID)
	}
	// An array, not a map: no allocation on every message, and the first
	// field at fault is always the one named.
	for _, f := range [...]struct {
		name  string
		parts []string
	}{{"undone", m.Undone}, {"not_started", m.NotStarted}} {
		if len(f.parts) > 0 && m.Type != MsgConclusion {
			return c, Errorf(ErrInvalid, "%s belongs in a conclusion, not in a %s message", f.name, m.Type)
		}
		for _, u := range f.parts {
			if strings.TrimSpace(u) == "" {
				return c, Errorf(ErrInvalid, "%s: an empty part", f.name)
			}
		}
	}
	n := c.clone()
	var err error
	switch m.Type {
	case MsgSystem:
		err = n.applySystem(m)
	case MsgDiscussion, MsgSyncTaskAssign, MsgAsyncAssign, MsgPause, MsgConclusion:
		err = n.applyTurn(m)
	case MsgTaskProgress, MsgTaskResult:
		err = n.applyTaskReport(m)
	default:
		err = Errorf(ErrInvalid, "unknown message type %q", m.Type)
	}
	if err != nil {
		return c, err
	}
	n.LastSeq = m.Seq
	return n, nil
}

func (c *Chat) applySystem(m AgentMessage) error {
	switch m.Event {
	case EventStart:
		if c.State != "" {
			return Errorf(ErrIllegalTransition, "chat has already started")
		}
		if len(m.Team) == 0 {
			return Errorf(ErrInvalid, "start: team is empty")
		}
		members := make([]string, 0, len(m.Team))
		for _, card := range m.Team {
			if !ValidName(card.Name) || card.Name == SystemSender || slices.Contains(members, card.Name) {
				return Errorf(ErrInvalid, "start: bad or repeated member %q", card.Name)
			}
			members = append(members, card.Name)
		}
		if !slices.Contains(members, m.Launcher) {
			return Errorf(ErrInvalid, "start: launcher %q is not in the team", m.Launcher)
		}
		if m.MaxTurns <= 0 {
			return Errorf(ErrInvalid, "start: max_turns must be positive")
		}
		c.CommID, c.GoalID, c.Goal, c.Launcher = m.CommID, m.GoalID, m.Goal, m.Launcher
		c.Members, c.MaxTurns, c.TeamUpDepth = members, m.MaxTurns, m.TeamUpDepth
		c.State, c.Speaker = StateDiscussion, m.Launcher
		return nil
	case EventTurnLimit:
		c.State, c.Speaker, c.FinalTurn = StateDiscussion, c.Launcher, true
		c.Waiting, c.Resume = nil, ""
		return nil
	case EventSpeakerTimeout:
		if c.State != StateDiscussion || c.Speaker == "" {
			return Errorf(ErrIllegalTransition, "speaker_timeout: nobody holds the turn")
		}
		if c.Speaker == c.Launcher {
			return Errorf(ErrIllegalTransition, "speaker_timeout: the launcher timing out ends the chat")
		}
		c.Speaker = c.Launcher
		return nil
	case EventEnd:
		status := m.Status
		if status == "" {
			status = GoalFailed
		}
		if !GoalEnded(status) {
			return Errorf(ErrInvalid, "end: status %q is not terminal", status)
		}
		c.conclude(status, m.Reason, m.Content)
		return nil
	case EventNote:
		return nil
	default:
		return Errorf(ErrInvalid, "unknown system event %q", m.Event)
	}
}

func (c *Chat) conclude(status, reason, text string) {
	c.State, c.Speaker, c.Resume, c.Waiting = StateConclusion, "", "", nil
	c.Outcome, c.Reason, c.Conclusion = status, reason, text
	for i := range c.Tasks {
		if !c.Tasks[i].Done() {
			c.Tasks[i].Status = TaskCancelled
		}
	}
}

func (c *Chat) applyTurn(m AgentMessage) error {
	if c.State != StateDiscussion || c.Speaker == "" {
		return Errorf(ErrNotYourTurn, "the chat is in %s and waits for tasks %v", c.State, c.Waiting)
	}
	if m.Sender != c.Speaker {
		return Errorf(ErrNotYourTurn, "it is %s's turn", c.Speaker)
	}
	if m.Type != MsgConclusion {
		if c.FinalTurn {
			return Errorf(ErrIllegalTransition, "turn limit reached: only a conclusion is legal")
		}
		if c.Turn >= c.MaxTurns {
			return Errorf(ErrIllegalTransition, "turn limit of %d reached", c.MaxTurns)
		}
	}
	if m.UpdatedPlan != "" {
		c.Plan = m.UpdatedPlan
	}
	switch m.Type {
	case MsgDiscussion:
		if len(m.NextSpeaker) != 1 || !c.IsMember(m.NextSpeaker[0]) {
			return Errorf(ErrInvalid, "discussion needs exactly one next_speaker who is a member, got %v", m.NextSpeaker)
		}
		c.Speaker = m.NextSpeaker[0]
	case MsgSyncTaskAssign, MsgAsyncAssign:
		async := m.Type == MsgAsyncAssign
		ids, err := c.assign(m.Sender, m.Tasks, async)
		if err != nil {
			return err
		}
		c.State, c.Speaker, c.Resume, c.Waiting = StateSyncTasks, "", m.Sender, ids
		if async {
			c.State = StateAsyncTasks
		}
	case MsgPause:
		if len(m.Triggers) == 0 {
			return Errorf(ErrInvalid, "pause needs at least one trigger")
		}
		for i, id := range m.Triggers {
			t, ok := c.Task(id)
			switch {
			case !ok:
				return Errorf(ErrInvalid, "pause: trigger %q is not a task of this chat", id)
			case !t.Async:
				return Errorf(ErrInvalid, "pause: trigger %q is not an async task", id)
			case t.Done():
				return Errorf(ErrInvalid, "pause: trigger %q has already ended", id)
			case slices.Contains(m.Triggers[:i], id):
				return Errorf(ErrInvalid, "pause: trigger %q is repeated", id)
			}
		}
		c.State, c.Speaker, c.Resume, c.Waiting = StatePause, "", m.Sender, slices.Clone(m.Triggers)
	case MsgConclusion:
		if err := c.checkSeen(m.SeenSeq); err != nil {
			return err
		}
		c.conclude(GoalConcluded, "", m.Content)
		c.Undone, c.NotStarted = slices.Clone(m.Undone), slices.Clone(m.NotStarted)
		if c.FinalTurn {
			c.Reason = "turn_limit"
		}
	}
	c.Turn++
	return nil
}

// checkSeen refuses a conclusion decided before a task's result was
// logged: it would report that task as unfinished, or not at all, while the
// chat holds its result. seen 0 (a sender that does not say) is not checked.
func (c *Chat) checkSeen(seen uint64) error {
	if seen == 0 {
		return nil
	}
	if seen > c.LastSeq {
		return Errorf(ErrInvalid, "seen_seq %d is not an entry of the log yet (its last is %d)", seen, c.LastSeq)
	}
	for _, t := range c.Tasks {
		if t.EndedSeq > seen {
			return Errorf(ErrConflict, "task %s ended (%s) at seq %d, after seq %d that this conclusion was decided on: decide again with its result", t.TaskID, t.Status, t.EndedSeq, seen)
		}
	}
	return nil
}

// assign validates and records new tasks; a task id may be reused only to
// assign a failed task again (a new attempt).
func (c *Chat) assign(assigner string, tasks []Task, async bool) ([]string, error) {
	if len(tasks) == 0 {
		return nil, Errorf(ErrInvalid, "a task assignment needs at least one task")
	}
	ids := make([]string, 0, len(tasks))
	for _, t := range tasks {
		if !ValidID(t.TaskID) {
			return nil, Errorf(ErrInvalid, "task_id %q is not a valid id", t.TaskID)
		}
		if slices.Contains(ids, t.TaskID) {
			return nil, Errorf(ErrInvalid, "task_id %q appears twice", t.TaskID)
		}
		if !c.IsMember(t.Assignee) {
			return nil, Errorf(ErrInvalid, "task %s: assignee %q is not a member", t.TaskID, t.Assignee)
		}
		if t.TaskDesc == "" && t.TaskAbstract == "" {
			return nil, Errorf(ErrInvalid, "task %s has no description", t.TaskID)
		}
		attempt := 1
		if old, ok := c.Task(t.TaskID); ok {
			if old.Status != TaskFailed {
				return nil, Errorf(ErrInvalid, "task_id %q is already used", t.TaskID)
			}
			attempt = old.Attempt + 1
		}
		ids = append(ids, t.TaskID)
		ts := TaskState{Task: t, Async: async, Assigner: assigner, Attempt: attempt, Status: TaskRunning}
		if i := c.taskIndex(t.TaskID); i >= 0 {
			c.Tasks[i] = ts
		} else {
			c.Tasks = append(c.Tasks, ts)
		}
	}
	return ids, nil
}

func (c *Chat) applyTaskReport(m AgentMessage) error {
	i := c.taskIndex(m.TaskID)
	if i < 0 {
		return Errorf(ErrInvalid, "unknown task %q", m.TaskID)
	}
	t := &c.Tasks[i]
	if m.Sender != t.Assignee && m.Sender != SystemSender {
		return Errorf(ErrForbidden, "task %s belongs to %s", t.TaskID, t.Assignee)
	}
	// The referee speaks for a task only to fail it (its assignee left or
	// timed out); it never reports progress or success on its behalf.
	if m.Sender == SystemSender && (m.Type != MsgTaskResult || m.TaskStatus != TaskFailed) {
		return Errorf(ErrForbidden, "the referee may only fail task %s", t.TaskID)
	}
	if t.Done() {
		return Errorf(ErrIllegalTransition, "task %s has already ended (%s)", t.TaskID, t.Status)
	}
	t.Progressed = true
	if m.Type == MsgTaskResult {
		switch m.TaskStatus {
		case TaskCompleted, TaskFailed:
		default:
			return Errorf(ErrInvalid, "task_status must be completed or failed, got %q", m.TaskStatus)
		}
		t.Status, t.Result, t.EndedSeq = m.TaskStatus, m.TaskConclusion, m.Seq
	}
	c.maybeResume()
	return nil
}

// maybeResume hands the turn back once what the state waits on is done.
func (c *Chat) maybeResume() {
	for _, id := range c.Waiting {
		t, _ := c.Task(id)
		switch c.State {
		case StateAsyncTasks:
			if !t.Progressed {
				return
			}
		case StateSyncTasks, StatePause:
			if !t.Done() {
				return
			}
		default:
			return
		}
	}
	if c.State == StateDiscussion {
		return
	}
	c.State, c.Speaker, c.Resume, c.Waiting = StateDiscussion, c.Resume, "", nil
}
