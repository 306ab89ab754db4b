// Package mcpagent tests the mcp-agent example: it loads agents.yaml the
// way `ioa agent run` does, so the filesystem MCP server from npm joins as
// agent "files", and runs a goal that reads a file and reports on it.
package mcpagent

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/internal/interoptest"
	"github.com/ioa-nats/ioa/internal/nodetest"
	"github.com/ioa-nats/ioa/internal/stacktest"
)

const repoRoot = "../.."

func TestMCPAgent(t *testing.T) {
	nodetest.Require(t)
	cfg := interoptest.Load(t, "agents.yaml")
	agents := interoptest.Agents(t, cfg, repoRoot)
	files := agents[0].Card
	if files.Name != "files" || len(files.Capabilities) != 4 || !strings.HasPrefix(files.Description, "MCP server ") {
		t.Fatalf("card of files: %+v", files)
	}

	s := stacktest.Start(t, stacktest.Options{Coordinator: true})
	s.RunAgents(t, nil, agents...)
	notes, err := filepath.Abs("files/notes.txt")
	if err != nil {
		t.Fatal(err)
	}
	// Discovery alone finds "files" for the first clause.
	res := s.Submit(t, protocol.GoalRequest{Goal: "Read the text file " + notes + ". Then write a Markdown report of the results."})
	if res.Status != protocol.GoalConcluded || !strings.Contains(res.Conclusion, "tangerine-42") || !strings.Contains(res.Conclusion, "#") {
		t.Fatalf("goal %s (%s):\n%s", res.Status, res.Reason, res.Conclusion)
	}
}
