// Package a2aagent tests the a2a-agent example: a team whose members are
// an A2A agent built with the official A2A JavaScript SDK, an MCP server
// from npm and a built-in ioa agent concludes a goal.
package a2aagent

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/internal/interoptest"
	"github.com/ioa-nats/ioa/internal/nodetest"
	"github.com/ioa-nats/ioa/internal/stacktest"
)

const repoRoot = "../.."

func TestMixedTeam(t *testing.T) {
	node, dir := nodetest.Require(t)
	port := nodetest.Start(t, node, dir, "a2a-agent.mjs")
	cfg := interoptest.Load(t, "agents.yaml")
	if cfg.Agents[0].Name != "shouter" || cfg.Agents[0].Worker.URL != "http://127.0.0.1:41241" {
		t.Fatalf("agents.yaml: %+v", cfg.Agents[0])
	}
	cfg.Agents[0].Worker.URL = fmt.Sprintf("http://127.0.0.1:%d", port) // a free port, for the test
	agents := interoptest.Agents(t, cfg, repoRoot)
	if c := agents[0].Card; c.Description == "" || !strings.HasPrefix(c.Capabilities[0], "shout a text in capital letters") {
		t.Fatalf("card of shouter: %+v", c)
	}

	s := stacktest.Start(t, stacktest.Options{Coordinator: true})
	s.RunAgents(t, nil, agents...)
	notes, err := filepath.Abs("../mcp-agent/files/notes.txt")
	if err != nil {
		t.Fatal(err)
	}
	res := s.Submit(t, protocol.GoalRequest{
		Goal: "Read the text file " + notes + ". Then shout it in capital letters. Then write a Markdown report of the results.",
		Team: []string{"files", "shouter", "report-writer"},
	})
	if res.Status != protocol.GoalConcluded || !strings.Contains(res.Conclusion, "THE PASS PHRASE IS TANGERINE-42") {
		t.Fatalf("goal %s (%s):\n%s", res.Status, res.Reason, res.Conclusion)
	}
	var st protocol.GoalStatus
	if err := s.Request(t, s.Bus.Subjects().Goal("get"), protocol.GoalIDRequest{GoalID: res.GoalID}, &st); err != nil {
		t.Fatal(err)
	}
	t.Logf("team %v, %d turns:\n%s", st.Team, res.Turns, res.Conclusion)
}
