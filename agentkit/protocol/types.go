package protocol

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Version is the protocol version carried in AgentMessage.V.
const Version = 1

// Agent types of AgentCard.Type.
const (
	TypeAssistant = "assistant"
	TypeTool      = "tool"
	TypeHuman     = "human"
)

// AgentCard describes an agent to the registry.
type AgentCard struct {
	Name         string   `json:"name"`
	Description  string   `json:"description"`
	Capabilities []string `json:"capabilities,omitempty"`
	Type         string   `json:"type,omitempty"`
	Tags         []string `json:"tags,omitempty"`
	NestedTeams  bool     `json:"nested_teams,omitempty"`
	// AutoJoin says the agent joins every team it is put in: a team-up
	// sends it no invitation (a round trip on the path of every goal), and
	// it learns of the chat from the start message on its inbox.
	AutoJoin       bool              `json:"auto_join,omitempty"`
	MaxConcurrency int               `json:"max_concurrency,omitempty"`
	Metadata       map[string]string `json:"metadata,omitempty"`
	// Incarnation changes each time the agent's process starts (any id of
	// up to 64 [A-Za-z0-9_-]). A registration with a new one tells the
	// referee that the old process is gone: the work it held is handed to
	// the new one at once, not after the heartbeat TTL.
	Incarnation string `json:"incarnation,omitempty"`
}

// Validate checks the card's required fields and enumerations. Size limits
// are the registry's business.
func (c *AgentCard) Validate() error {
	if err := CheckName("name", c.Name); err != nil {
		return err
	}
	if c.Name == SystemSender {
		return Errorf(ErrInvalid, "name %q is reserved", c.Name)
	}
	if strings.TrimSpace(c.Description) == "" {
		return Errorf(ErrInvalid, "description is required (it is what a search matches)")
	}
	switch c.Type {
	case "", TypeAssistant, TypeTool, TypeHuman:
	default:
		return Errorf(ErrInvalid, "type %q is not one of assistant, tool, human", c.Type)
	}
	if c.MaxConcurrency < 0 {
		return Errorf(ErrInvalid, "max_concurrency must not be negative")
	}
	if c.Incarnation != "" {
		if err := CheckID("incarnation", c.Incarnation); err != nil {
			return err
		}
	}
	return nil
}

// Registry payloads (docs/protocol.md section 5).

// RegisterReply answers registry.register.
type RegisterReply struct {
	Name         string    `json:"name"`
	Revision     uint64    `json:"revision"`
	RegisteredAt time.Time `json:"registered_at"`
}

// NameRequest is the body of deregister, heartbeat and get.
type NameRequest struct {
	Name string `json:"name"`
	// Incarnation, on a deregister, is the leaving process's: the card is
	// deleted only while it is still that incarnation's, so a process
	// stopping after its replacement registered (a rolling restart) does
	// not take the name away from the new one. Empty deletes any card.
	Incarnation string `json:"incarnation,omitempty"`
}

// HeartbeatReply answers registry.heartbeat.
type HeartbeatReply struct {
	TTL Duration `json:"ttl"`
	// Incarnation is the incarnation the name's card was registered with.
	// One other than the heartbeating process's own says that another
	// process registered the name since: both get its messages.
	Incarnation string `json:"incarnation,omitempty"`
}

// AgentInfo is a card with its liveness, the reply of registry.get.
type AgentInfo struct {
	AgentCard
	Online   bool      `json:"online"`
	LastSeen time.Time `json:"last_seen,omitzero"`
}

// ListRequest is the body of registry.list.
type ListRequest struct {
	Offset     int  `json:"offset"`
	Limit      int  `json:"limit"`
	OnlineOnly bool `json:"online_only"`
}

// ListReply answers registry.list.
type ListReply struct {
	Agents []AgentInfo `json:"agents"`
	Total  int         `json:"total"`
}

// SearchRequest is the body of registry.search.
type SearchRequest struct {
	Query          string   `json:"query,omitempty"`
	Queries        []string `json:"queries,omitempty"`
	Limit          int      `json:"limit,omitempty"`
	Exclude        []string `json:"exclude,omitempty"`
	Type           string   `json:"type,omitempty"`
	Tags           []string `json:"tags,omitempty"`
	IncludeOffline bool     `json:"include_offline,omitempty"`
}

// SearchResult is one ranked agent.
type SearchResult struct {
	Name         string   `json:"name"`
	Description  string   `json:"description"`
	Capabilities []string `json:"capabilities"`
	Type         string   `json:"type"`
	Tags         []string `json:"tags"`
	Score        float64  `json:"score"`
	// Match is how well the card covers the query on an absolute scale in
	// [0,1] (score only ranks the results of one query). A policy compares
	// it with its min_match to decide that no agent fits a task.
	Match  float64 `json:"match"`
	Online bool    `json:"online"`
}

// DefaultMinMatch is the match a registry result needs for the built-in
// policies to give it a task (registry.min_match). It was calibrated on the
// development set registry/search/testdata/discovery-dev as the threshold
// with the fewest errors of both kinds together: a correct best match
// refused, and a wrong best match accepted when the right agent is absent
// (see docs/architecture.md, "No capable agent").
const DefaultMinMatch = 0.26

// SearchReply answers registry.search.
type SearchReply struct {
	Results []SearchResult `json:"results"`
}

// Goal payloads (docs/protocol.md section 6).

// Goal statuses.
const (
	GoalAccepted = "accepted"
	GoalForming  = "forming"
	GoalRunning  = "running"
	// GoalAwaitingApproval: the team concluded and the goal waits for the
	// person named in approve_by to approve (concluded) or reject (failed)
	// it, until its deadline (timed_out).
	GoalAwaitingApproval = "awaiting_approval"
	GoalConcluded        = "concluded"
	GoalFailed           = "failed"
	GoalCancelled        = "cancelled"
	GoalTimedOut         = "timed_out"
)

// GoalEnded reports whether status is terminal.
func GoalEnded(status string) bool {
	switch status {
	case GoalConcluded, GoalFailed, GoalCancelled, GoalTimedOut:
		return true
	}
	return false
}

// ParentRef links a nested goal to the task it serves.
type ParentRef struct {
	GoalID string `json:"goal_id"`
	CommID string `json:"comm_id"`
	TaskID string `json:"task_id"`
}

// GoalRequest is the body of goal.submit.
type GoalRequest struct {
	Goal     string     `json:"goal"`
	Team     []string   `json:"team,omitempty"`
	Launcher string     `json:"launcher,omitempty"`
	MaxTurns int        `json:"max_turns,omitempty"`
	MaxDepth *int       `json:"max_depth,omitempty"`
	Timeout  Duration   `json:"timeout,omitempty"`
	Wait     bool       `json:"wait,omitempty"`
	Parent   *ParentRef `json:"parent,omitempty"`
	// ApproveBy names a person (an agent of type human) whose approval the
	// team's conclusion needs before the goal concludes.
	ApproveBy string `json:"approve_by,omitempty"`
	// IdempotencyKey makes the submission safe to send again: the same
	// submitter sending the same key gets the goal the first one created,
	// not a second goal (a lost reply is recovered by resending).
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// Submitter is set by the orchestrator from the subject the request
	// came on, never from the body.
	Submitter string `json:"-"`
}

// Validate checks the request's fields.
func (g *GoalRequest) Validate() error {
	if g.Goal == "" {
		return Errorf(ErrInvalid, "goal is required")
	}
	for _, n := range g.Team {
		if err := CheckName("team member", n); err != nil {
			return err
		}
	}
	if g.Launcher != "" {
		if err := CheckName("launcher", g.Launcher); err != nil {
			return err
		}
	}
	if g.ApproveBy != "" {
		if err := CheckName("approve_by", g.ApproveBy); err != nil {
			return err
		}
	}
	if len(g.IdempotencyKey) > MaxIdempotencyKey {
		return Errorf(ErrInvalid, "idempotency_key of %d bytes is over the limit of %d", len(g.IdempotencyKey), MaxIdempotencyKey)
	}
	if !utf8.ValidString(g.IdempotencyKey) {
		return Errorf(ErrInvalid, "idempotency_key is not valid UTF-8")
	}
	if g.MaxTurns < 0 {
		return Errorf(ErrInvalid, "max_turns must not be negative")
	}
	if g.MaxDepth != nil && *g.MaxDepth < 0 {
		return Errorf(ErrInvalid, "max_depth must not be negative")
	}
	if g.Timeout < 0 {
		return Errorf(ErrInvalid, "timeout must not be negative")
	}
	if p := g.Parent; p != nil {
		if err := CheckID("parent.goal_id", p.GoalID); err != nil {
			return err
		}
		if p.CommID != "" {
			if err := CheckID("parent.comm_id", p.CommID); err != nil {
				return err
			}
		}
		if p.TaskID != "" {
			if err := CheckID("parent.task_id", p.TaskID); err != nil {
				return err
			}
		}
	}
	return nil
}

// MaxIdempotencyKey is the longest GoalRequest.IdempotencyKey, in bytes.
const MaxIdempotencyKey = 256

// SubmitReply answers goal.submit without wait.
type SubmitReply struct {
	GoalID string `json:"goal_id"`
	Status string `json:"status"`
	// Timeout is the goal's timeout in force (GoalStatus.Timeout): one
	// asked for over the server's limits.goal_timeout was lowered to it.
	// An older server sends none.
	Timeout Duration `json:"timeout,omitempty"`
}

// Lowered returns the timeout in force and whether it is less than asked:
// the server lowered it to its limit. A reply without one (an older
// server) says nothing was lowered.
func (r SubmitReply) Lowered(asked time.Duration) (time.Duration, bool) {
	got := r.Timeout.D()
	return got, asked > 0 && got > 0 && got < asked
}

// GoalIDRequest is the body of goal.get and goal.cancel.
type GoalIDRequest struct {
	GoalID string `json:"goal_id"`
}

// GoalListRequest is the body of goal.list.
type GoalListRequest struct {
	Status string `json:"status,omitempty"`
	Limit  int    `json:"limit,omitempty"`
}

// GoalListReply answers goal.list.
type GoalListReply struct {
	Goals []GoalStatus `json:"goals"`
}

// Health statuses: an orchestrator answers <p>.health with starting until
// its goal service is open, then ready.
const (
	HealthStarting = "starting"
	HealthReady    = "ready"
)

// Health answers <p>.health. Any answer means the orchestrator is alive;
// Ready means its goal endpoints are open: the agents it was told to expect
// (the coordinator and the configured agents) are registered and online and
// the registry has loaded its index.
type Health struct {
	Status string `json:"status"`
	Ready  bool   `json:"ready"`
	// Waiting lists the expected agents not yet registered and online.
	Waiting []string `json:"waiting,omitempty"`
	// Since is when the instance started (starting) or became ready.
	Since time.Time `json:"since"`
}

// Usage counts model calls and tokens.
type Usage struct {
	LLMCalls         int `json:"llm_calls"`
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

// Add returns the sum of u and o.
func (u Usage) Add(o Usage) Usage {
	return Usage{u.LLMCalls + o.LLMCalls, u.PromptTokens + o.PromptTokens, u.CompletionTokens + o.CompletionTokens}
}

// GoalResult is how a goal ended.
type GoalResult struct {
	GoalID     string   `json:"goal_id"`
	Status     string   `json:"status"`
	Conclusion string   `json:"conclusion,omitempty"`
	Reason     string   `json:"reason,omitempty"`
	CommID     string   `json:"comm_id,omitempty"` // empty: the goal ended before its team formed
	Turns      int      `json:"turns"`
	Usage      Usage    `json:"usage"`
	Elapsed    Duration `json:"elapsed"`
	// Outcome says how much of what the goal asked for was done:
	// succeeded, partial or failed; Reason says why when it is not
	// succeeded, and Undone lists the parts that were not done.
	Outcome string   `json:"outcome,omitempty"`
	Undone  []string `json:"undone,omitempty"`
}

// Goal outcomes, beside the status of an ended goal.
const (
	OutcomeSucceeded = "succeeded" // every task done
	OutcomePartial   = "partial"   // some done, some failed, skipped or given to nobody
	OutcomeFailed    = "failed"    // nothing the goal asked for was done
)

// GoalStatus is a goal's record in KV ioa_goals and the reply of goal.get.
type GoalStatus struct {
	GoalID       string     `json:"goal_id"`
	ParentGoalID string     `json:"parent_goal_id,omitempty"`
	Parent       *ParentRef `json:"parent,omitempty"`
	Status       string     `json:"status"`
	Goal         string     `json:"goal"`
	Launcher     string     `json:"launcher"`
	// Submitter is the identity that submitted the goal when it came on an
	// identity-bound subject (<p>.goal.submit.<name>); empty for the admin.
	// Only it, or the admin, may cancel the goal.
	Submitter string      `json:"submitter,omitempty"`
	CommID    string      `json:"comm_id,omitempty"`
	Team      []string    `json:"team"`
	Depth     int         `json:"depth"`
	MaxTurns  int         `json:"max_turns"`
	MaxDepth  int         `json:"max_depth"`
	Timeout   Duration    `json:"timeout"`
	CreatedAt time.Time   `json:"created_at"`
	UpdatedAt time.Time   `json:"updated_at"`
	Deadline  time.Time   `json:"deadline,omitzero"`
	Children  []string    `json:"children"`
	Result    *GoalResult `json:"result,omitempty"`
	Outcome   string      `json:"outcome,omitempty"` // once ended: Result.Outcome
	// ApproveBy is the person whose approval the conclusion needs; while
	// the status is awaiting_approval, Result holds the proposed result.
	ApproveBy string `json:"approve_by,omitempty"`
	// ReplyTo is internal to the orchestrator: the reply subject of a
	// submission with wait, answered with the result by whichever instance
	// ends the goal. The goal endpoints never show it.
	ReplyTo string `json:"reply_to,omitempty"`
	// TraceParent is the W3C traceparent of the goal's root span when the
	// orchestrator traces (docs/protocol.md, "Trace context"): the chat's
	// messages carry it in their headers, so every member's spans join
	// the goal's trace.
	TraceParent string `json:"traceparent,omitempty"`
}

// Goal event kinds.
const (
	EventAccepted     = "accepted"
	EventTeamFormed   = "team_formed"
	EventMessage      = "message"
	EventTaskAssigned = "task_assigned"
	EventTaskDone     = "task_done"
	EventSubgoal      = "subgoal"
	EventConcluded    = "concluded"
	EventFailed       = "failed"
	EventCancelled    = "cancelled"
	EventTimedOut     = "timed_out"
	// EventApprovalRequested: the team concluded; the goal waits for
	// approve_by (Result holds the proposed result).
	EventApprovalRequested = "approval_requested"
)

// ApproveRequest answers a goal awaiting approval, on
// <p>.goal.approve.<caller> (the caller must be the goal's approve_by;
// an admin connection may use <p>.goal.approve and name the person in By).
type ApproveRequest struct {
	GoalID  string `json:"goal_id"`
	Approve bool   `json:"approve"`
	Note    string `json:"note,omitempty"`
	By      string `json:"by,omitempty"`
}

// Validate checks the request's fields.
func (a *ApproveRequest) Validate() error {
	if err := CheckID("goal_id", a.GoalID); err != nil {
		return err
	}
	if a.By != "" {
		if err := CheckName("by", a.By); err != nil {
			return err
		}
	}
	if len(a.Note) > 4096 {
		return Errorf(ErrInvalid, "note is over 4096 bytes")
	}
	return nil
}

// GoalEvent is published on <p>.goal.<goal_id>.events.
type GoalEvent struct {
	GoalID  string        `json:"goal_id"`
	Kind    string        `json:"kind"`
	At      time.Time     `json:"at"`
	CommID  string        `json:"comm_id,omitempty"`
	Team    []string      `json:"team,omitempty"`
	Message *AgentMessage `json:"message,omitempty"`
	Task    *Task         `json:"task,omitempty"`
	Child   string        `json:"child_goal_id,omitempty"`
	Result  *GoalResult   `json:"result,omitempty"`
	Usage   *Usage        `json:"usage,omitempty"`
	Outcome string        `json:"outcome,omitempty"` // the end events: Result.Outcome
}

// Team-up payloads (docs/protocol.md section 7).

// LaunchRequest is sent to <p>.agent.<name>.launch.
type LaunchRequest struct {
	GoalID   string   `json:"goal_id"`
	Goal     string   `json:"goal"`
	Team     []string `json:"team,omitempty"`
	MaxTurns int      `json:"max_turns"`
	Depth    int      `json:"depth"`
}

// LaunchReply answers launch.
type LaunchReply struct {
	CommID string `json:"comm_id"`
}

// TeamupRequest is sent to <p>.teamup.
type TeamupRequest struct {
	GoalID   string   `json:"goal_id"`
	Launcher string   `json:"launcher"`
	Members  []string `json:"members"`
	Name     string   `json:"name,omitempty"`
}

// TeamupReply answers teamup.
type TeamupReply struct {
	CommID string `json:"comm_id"`
}

// InviteRequest is sent to <p>.agent.<name>.invite.
type InviteRequest struct {
	CommID      string      `json:"comm_id"`
	GoalID      string      `json:"goal_id"`
	Goal        string      `json:"goal"`
	Launcher    string      `json:"launcher"`
	Team        []AgentCard `json:"team"`
	MaxTurns    int         `json:"max_turns"`
	TeamUpDepth int         `json:"team_up_depth"`
}

// InviteReply answers invite.
type InviteReply struct {
	Accept bool   `json:"accept"`
	Reason string `json:"reason,omitempty"`
}

// Chat payloads (docs/protocol.md section 8).

// Message types.
const (
	MsgSystem         = "system"
	MsgDiscussion     = "discussion"
	MsgSyncTaskAssign = "sync_task_assign"
	MsgAsyncAssign    = "async_task_assign"
	MsgPause          = "pause"
	MsgConclusion     = "conclusion"
	MsgTaskProgress   = "task_progress"
	MsgTaskResult     = "task_result"
)

// Task statuses carried in task_result.
const (
	TaskCompleted = "completed"
	TaskFailed    = "failed"
)

// System message events (AgentMessage.Event), set only by the referee.
const (
	EventStart          = "start"           // first message: goal, team, budgets; the launcher speaks
	EventTurnLimit      = "turn_limit"      // max_turns reached: the launcher's last turn, conclusion only
	EventSpeakerTimeout = "speaker_timeout" // the speaker was silent: the turn goes to the launcher
	EventEnd            = "end"             // the referee ends the chat (cancel, timeout, failure)
	EventNote           = "note"            // information only, no change of state
)

// Task is one unit of work assigned in a chat.
type Task struct {
	TaskID       string `json:"task_id"`
	Assignee     string `json:"assignee"`
	TaskAbstract string `json:"task_abstract,omitempty"`
	TaskDesc     string `json:"task_desc"`
}

// AgentMessage is a chat message. Sender, Seq, TS and State are set by the
// referee; whatever a sender puts there is overwritten.
type AgentMessage struct {
	V              int         `json:"v"`
	ID             string      `json:"id"`
	CommID         string      `json:"comm_id"`
	GoalID         string      `json:"goal_id"`
	Sender         string      `json:"sender"`
	Seq            uint64      `json:"seq"`
	TS             time.Time   `json:"ts,omitzero"`
	State          State       `json:"state,omitempty"`
	Type           string      `json:"type"`
	Content        string      `json:"content,omitempty"`
	NextSpeaker    []string    `json:"next_speaker,omitempty"`
	Tasks          []Task      `json:"tasks,omitempty"`
	TaskID         string      `json:"task_id,omitempty"`
	TaskStatus     string      `json:"task_status,omitempty"`
	TaskConclusion string      `json:"task_conclusion,omitempty"`
	Triggers       []string    `json:"triggers,omitempty"`
	TeamUpDepth    int         `json:"team_up_depth,omitempty"`
	MaxTurns       int         `json:"max_turns,omitempty"`
	Turn           int         `json:"turn,omitempty"`
	UpdatedPlan    string      `json:"updated_plan,omitempty"`
	Usage          *Usage      `json:"usage,omitempty"`
	Event          string      `json:"event,omitempty"`  // system messages: what happened
	Reason         string      `json:"reason,omitempty"` // system end: why the chat ended
	Status         string      `json:"status,omitempty"` // system end: the goal status it implies
	Team           []AgentCard `json:"team,omitempty"`   // system start: the team's cards
	Attempt        int         `json:"attempt,omitempty"`
	Launcher       string      `json:"launcher,omitempty"` // system start
	Goal           string      `json:"goal,omitempty"`     // system start
	// Undone lists, in a conclusion, the parts of the goal the launcher
	// gave to nobody because no registered agent can do them.
	Undone []string `json:"undone,omitempty"`
	// NotStarted lists, in a conclusion, the parts of the goal's plan the
	// launcher had meant for an agent but never assigned: the chat ended
	// first (its turn limit reached, say).
	NotStarted []string `json:"not_started,omitempty"`
	// SeenSeq is, optionally, the last log entry the sender had applied
	// when it decided on this message. A conclusion is refused (conflict)
	// when a task ended after it: its sender concluded without that
	// result, and decides again with it. Zero: not checked.
	SeenSeq uint64 `json:"seen_seq,omitempty"`
}

// SendReply answers an outbox request.
type SendReply struct {
	Seq   uint64 `json:"seq"`
	State State  `json:"state"`
}

// HistoryRequest is sent to <p>.agent.<name>.history.<comm_id>.
type HistoryRequest struct {
	AfterSeq uint64 `json:"after_seq"`
	Limit    int    `json:"limit"`
}

// HistoryReply answers history.
type HistoryReply struct {
	Messages []AgentMessage `json:"messages"`
	LastSeq  uint64         `json:"last_seq"`
}

// OpenChatsReply answers <p>.agent.<name>.chats: the open chats the agent
// is a member of, so a restarted agent can rejoin them.
type OpenChatsReply struct {
	Chats []string `json:"chats"`
}

// Duration is a time.Duration that travels as a Go duration string ("90s").
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) String() string { return time.Duration(d).String() }

// MarshalText encodes d as a Go duration string.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText accepts a Go duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("duration %q: want a Go duration such as \"90s\"", b)
	}
	*d = Duration(v)
	return nil
}
