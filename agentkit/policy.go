package agentkit

import (
	"context"

	"github.com/ioa-nats/ioa/agentkit/protocol"
)

// Policy decides for an agent. A deterministic policy (agentkit/rules) and a
// model-backed one plug into the same interface, so every method gets what a
// model would need to decide. The runtime recovers panics and validates every
// message against the chat state machine before sending it.
type Policy interface {
	// TeamUp chooses the members of a chat the agent launches.
	TeamUp(ctx context.Context, req TeamUpRequest) (TeamUpDecision, error)
	// NextMessage is the agent's move when it holds the turn: a discussion,
	// a sync or async task assignment, a pause or a conclusion. The runtime
	// fills in v, id, comm_id, goal_id and sender.
	NextMessage(ctx context.Context, turn Turn) (protocol.AgentMessage, error)
	// NeedsTeam decides whether a task assigned to the agent goes to a
	// nested team (docs/protocol.md section 11): it returns the sub-goal to submit,
	// or "" to do the task itself. The runtime asks only when the card allows
	// nested teams and the chat's team_up_depth is above 0.
	NeedsTeam(ctx context.Context, req TeamCheck) (subgoal string, err error)
}

// UsageMeter is implemented by policies and workers that call models. Each
// time the runtime sends a message for an agent, it takes what the agent's
// policy and worker have spent for that goal since the last take and
// reports it in the message's usage; the referee sums message usage into
// GoalResult.usage. What is spent after an agent's last message in a chat
// (a task abandoned by a conclusion) is not reported.
type UsageMeter interface {
	// TakeUsage returns the usage recorded for the agent and goal since the
	// last call, and resets it.
	TakeUsage(agent, goalID string) protocol.Usage
}

// Searcher finds agents in the registry (registry.search). A policy may
// search from several goroutines at once (the rules policy asks about every
// clause of a goal together).
type Searcher interface {
	Search(ctx context.Context, req protocol.SearchRequest) ([]protocol.SearchResult, error)
}

// TeamUpRequest is a launch request as the launcher's policy sees it.
type TeamUpRequest struct {
	Self     protocol.AgentCard
	GoalID   string
	Goal     string
	Team     []string // named by the goal: skip discovery
	MaxTurns int
	Depth    int
	Registry Searcher
}

// TeamUpDecision is the team the launcher asks the orchestrator for.
type TeamUpDecision struct {
	// Members of the chat; the runtime puts the launcher first if it is
	// missing.
	Members []string
	// Name is an optional display name for the chat.
	Name string
}

// Turn is what a policy knows when its agent holds the turn.
type Turn struct {
	Self protocol.AgentCard
	// Chat is the agent's replica of the chat: goal, members, state, turn
	// count and budget, plan and the task board (Chat.Tasks).
	Chat protocol.Chat
	// Team holds the members' cards from the chat's start message.
	Team []protocol.AgentCard
	// Recent holds the last messages of the chat, oldest first.
	Recent []protocol.AgentMessage
	// Attempt counts the policy's earlier answers for this turn that were
	// refused; LastError says why the last one was.
	Attempt   int
	LastError error
	Registry  Searcher
}

// TeamCheck asks whether a task needs a nested team.
type TeamCheck struct {
	Self     protocol.AgentCard
	Task     Task
	Registry Searcher
}
