package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
)

// TestMetricsOnTheHTTPListener: what `ioa serve --http` serves has the
// process's metrics on /metrics beside the A2A front door, and they count a
// goal run on the stack.
func TestMetricsOnTheHTTPListener(t *testing.T) {
	cfg := demoConfig(t)
	cfg.Bus.Insecure, cfg.A2A.Listen = true, "127.0.0.1:0"
	st := readyStack(t, cfg, stackOptions{services: true, http: true, sandbox: t.TempDir()})
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var res protocol.GoalResult
	if err := bus.Request(ctx, st.bus.Conn(), st.bus.Subjects().Goal(bus.GoalSubmit), protocol.GoalRequest{Goal: "Compute 6 * 7", Wait: true}, &res); err != nil || res.Status != protocol.GoalConcluded {
		t.Fatalf("goal: %+v %v", res, err)
	}
	resp, err := http.Get(st.http.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET /metrics: %s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	for _, want := range []string{
		"\nioa_goals_submitted_total 1\n",
		"\nioa_goals_ended_total{outcome=\"" + res.Outcome + "\",status=\"concluded\"} 1\n",
		"\nioa_nats_connected{conn=\"ioa-agents\"} 1\n",
		fmt.Sprintf("\nioa_registry_index_agents %d\n", 1+len(cfg.Agents)), // the coordinator and the demo agents
		"\ngo_goroutines ",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", strings.TrimSpace(want))
		}
	}
	// The front door is still there.
	resp, err = http.Get(st.http.base + "/.well-known/agent-card.json")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("A2A card: %s", resp.Status)
	}
}
