package orchestrator

import (
	"context"
	"errors"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/protocol"
)

// errNoTasks is what the coordinator answers if someone assigns it work.
var errNoTasks = errors.New("the coordinator leads teams and does no tasks itself")

// Coordinator returns the built-in launcher for goals that name none: it
// forms the team and leads the chat with policy, and does no tasks itself.
func Coordinator(name string, policy agentkit.Policy) agentkit.Agent {
	return agentkit.Agent{
		Card: protocol.AgentCard{
			Name: name,
			Description: "Coordinates a team of agents for a goal: splits the goal into tasks, " +
				"finds the agents able to do them, assigns the work and assembles the conclusion.",
			Capabilities: []string{"team coordination", "task planning"},
			Type:         protocol.TypeAssistant,
			Tags:         []string{"ioa", "coordinator"},
		},
		Worker: agentkit.WorkerFunc(func(context.Context, agentkit.Task) (agentkit.Result, error) {
			return agentkit.Result{}, errNoTasks
		}),
		Policy: policy,
	}
}
