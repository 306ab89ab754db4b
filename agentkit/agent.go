package agentkit

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/ioa-nats/ioa/agentkit/protocol"
)

// Agent is what a Runtime hosts: a card for the registry, a Worker for tasks
// and a Policy for talking.
//
// A person is an Agent whose card has type human and which has neither
// Worker nor Policy: the runtime keeps its card registered and online,
// accepts its invitations and follows its chats, but never speaks or runs
// a task for it. Its turns and tasks wait in the chat's state until the
// person answers on its outbox (the web console, or any client with its
// credentials), bounded by the speaker and task timeouts like any member.
type Agent struct {
	Card   protocol.AgentCard
	Worker Worker
	Policy Policy
}

// Person reports whether the agent is a person (see Agent).
func (a Agent) Person() bool {
	return a.Card.Type == protocol.TypeHuman && a.Worker == nil && a.Policy == nil
}

// Worker does the tasks assigned to an agent. Run must honour ctx: it is
// cancelled when the task times out, when the chat concludes and when the
// runtime stops.
type Worker interface {
	Run(ctx context.Context, t Task) (Result, error)
}

// WorkerFunc adapts a function to a Worker.
type WorkerFunc func(ctx context.Context, t Task) (Result, error)

// Run calls f.
func (f WorkerFunc) Run(ctx context.Context, t Task) (Result, error) { return f(ctx, t) }

// Task is a task assigned to the agent, with the context a worker needs. It
// is what the exec worker writes on a program's stdin.
type Task struct {
	protocol.Task
	CommID      string `json:"comm_id"`
	GoalID      string `json:"goal_id"`
	Goal        string `json:"goal"`
	Async       bool   `json:"async"`
	Attempt     int    `json:"attempt"`
	TeamUpDepth int    `json:"team_up_depth"`
	// Earlier holds the chat's tasks that had ended when this one was
	// assigned, in assignment order.
	Earlier []TaskOutcome `json:"earlier,omitempty"`
	// Progress, when not nil, sends a task_progress with a note to the chat;
	// long tasks may call it to show they are alive. The referee takes a
	// bounded number a task (limits.max_task_progress, 100 by default) and
	// answers the next with protocol.ErrQuotaExceeded. From then on Progress
	// returns that error at once without sending: a worker should stop
	// reporting and carry on with the task.
	Progress func(ctx context.Context, note string) error `json:"-"`
}

// TaskOutcome is an ended task of the chat, as a worker sees it.
type TaskOutcome struct {
	TaskID       string `json:"task_id"`
	Assignee     string `json:"assignee"`
	TaskAbstract string `json:"task_abstract,omitempty"`
	Status       string `json:"status"` // completed or failed
	Result       string `json:"result"`
}

// Result is what a worker produced for a task.
type Result struct {
	Conclusion string `json:"conclusion"`
}

// PanicError is a panic recovered from a worker or a policy.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// safely runs fn and turns a panic into a *PanicError, so that a bad worker
// or policy costs one task or one move, never the agent.
func safely[T any](fn func() (T, error)) (v T, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &PanicError{Value: p, Stack: debug.Stack()}
		}
	}()
	return fn()
}
