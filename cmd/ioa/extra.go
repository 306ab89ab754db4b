package main

import (
	"fmt"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/configs"
)

// extraWorker builds the workers that need more than the standard library:
// http and llm.
func extraWorker(_ *configs.Config, a configs.Agent) (agentkit.Worker, error) {
	return nil, fmt.Errorf("worker kind %q is not available in this build", a.Worker.Kind)
}

// extraPolicy builds the model-driven policy.
func extraPolicy(_ *configs.Config, name string) (agentkit.Policy, error) {
	return nil, fmt.Errorf("policy %q is not available in this build", name)
}
