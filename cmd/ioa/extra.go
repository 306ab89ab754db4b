package main

import (
	"fmt"
	"log/slog"
	"sync"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/llm"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/agentkit/worker"
	"github.com/ioa-nats/ioa/configs"
	"github.com/ioa-nats/ioa/telemetry"
)

// models shares one model client per configuration between the agents of a
// process (the client holds an HTTP transport).
var models struct {
	sync.Mutex
	byCfg map[configs.LLM]*llm.Model
}

func modelFor(c configs.LLM, log *slog.Logger) (*llm.Model, error) {
	models.Lock()
	defer models.Unlock()
	if m, ok := models.byCfg[c]; ok {
		return m, nil
	}
	m, err := llm.NewModel(llm.Config{
		Provider: c.Provider, BaseURL: c.BaseURL, APIKey: c.APIKey, Model: c.Model,
		Temperature: c.Temperature, Timeout: c.Timeout, Retries: c.Retries, MaxTokens: c.MaxTokens, Logger: log,
	})
	if err != nil {
		return nil, err
	}
	if models.byCfg == nil {
		models.byCfg = map[configs.LLM]*llm.Model{}
	}
	models.byCfg[c] = m
	return m, nil
}

// extraWorker builds the http and llm workers.
func extraWorker(cfg *configs.Config, a configs.Agent) (agentkit.Worker, error) {
	switch a.Worker.Kind {
	case "http":
		return &worker.HTTP{URL: a.Worker.URL, Timeout: a.Worker.Timeout, MaxResponse: int64(a.Worker.MaxOutput)}, nil
	case "llm":
		m, err := modelFor(cfg.LLM, newLogger(cfg))
		if err != nil {
			return nil, err
		}
		return worker.NewLLM(m, protocol.AgentCard{Name: a.Name, Description: a.Description, Capabilities: a.Capabilities}), nil
	}
	return nil, fmt.Errorf("worker kind %q is not builtin, exec, http, llm, mcp or a2a", a.Worker.Kind)
}

// extraPolicy builds the model-driven policy.
func extraPolicy(cfg *configs.Config, name string, metrics *telemetry.Metrics) (agentkit.Policy, error) {
	if name != "llm" {
		return nil, fmt.Errorf("policy %q is not rules or llm", name)
	}
	if !cfg.LLM.Configured() {
		return nil, fmt.Errorf("the llm policy needs llm.base_url (IOA_LLM_BASE_URL)")
	}
	m, err := modelFor(cfg.LLM, newLogger(cfg))
	if err != nil {
		return nil, err
	}
	return llm.New(m, llm.PolicyConfig{MaxTeam: cfg.Limits.MaxTeamSize, MinMatch: minMatch(cfg), Logger: newLogger(cfg), Metrics: metrics}), nil
}
