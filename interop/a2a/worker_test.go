package a2a_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/agentkit/rules"
	"github.com/ioa-nats/ioa/internal/nodetest"
	"github.com/ioa-nats/ioa/internal/stacktest"
	"github.com/ioa-nats/ioa/interop/a2a"
)

const jsToken = "interop-test-token-0123456789"

func task(desc string) agentkit.Task {
	return agentkit.Task{Task: protocol.Task{TaskID: "t1", TaskDesc: desc}, GoalID: "g1", CommID: "c1", Goal: desc}
}

// A remote agent built with the official A2A JavaScript SDK, nobody here
// wrote it: its card becomes capabilities, tasks go to it as messages, and
// its results, failures and questions come back.
func TestJSAgentAsWorker(t *testing.T) {
	node, dir := nodetest.Require(t)
	for _, streaming := range []string{"on", "off"} {
		t.Run("streaming "+streaming, func(t *testing.T) {
			port := nodetest.Start(t, node, dir, "a2a-agent.mjs", "A2A_TOKEN="+jsToken, "A2A_STREAMING="+streaming)
			base := fmt.Sprintf("http://127.0.0.1:%d", port)
			w, err := a2a.DialWorker(t.Context(), a2a.WorkerConfig{URL: base, Token: jsToken})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = w.Close() })
			if caps := w.Capabilities(); len(caps) != 1 || !strings.HasPrefix(caps[0], "shout a text in capital letters: ") {
				t.Errorf("capabilities %q", caps)
			}
			if w.Card().Name != "shouter" || !strings.Contains(w.Description(), "capital letters") {
				t.Errorf("card %s: %s", w.Card().Name, w.Description())
			}
			var notes []string
			tk := task("shout hello there")
			tk.Progress = func(_ context.Context, note string) error { notes = append(notes, note); return nil }
			res, err := w.Run(t.Context(), tk)
			if err != nil || res.Conclusion != "HELLO THERE!" {
				t.Errorf("shout: %q, %v", res.Conclusion, err)
			}
			if streaming == "on" && (len(notes) != 1 || notes[0] != "taking a deep breath") {
				t.Errorf("progress notes %q", notes)
			}
			_, err = w.Run(t.Context(), task("please refuse this"))
			if !errors.Is(err, a2a.ErrRemoteFailed) || !strings.Contains(err.Error(), "I refuse to shout that") {
				t.Errorf("failed task: %v", err)
			}
			_, err = w.Run(t.Context(), task("a question for you"))
			if !errors.Is(err, a2a.ErrInputRequired) || !strings.Contains(err.Error(), "Which language") {
				t.Errorf("input-required task: %v", err)
			}
		})
	}

	port := nodetest.Start(t, node, dir, "a2a-agent.mjs", "A2A_TOKEN="+jsToken)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	t.Run("without the token", func(t *testing.T) {
		w, err := a2a.DialWorker(t.Context(), a2a.WorkerConfig{URL: base + "/.well-known/agent-card.json"})
		if err != nil {
			t.Fatal(err) // the card itself is public
		}
		_, err = w.Run(t.Context(), task("shout hi"))
		if err == nil || !strings.Contains(err.Error(), "401") && !strings.Contains(strings.ToLower(err.Error()), "unauthorized") {
			t.Errorf("without the token: %v", err)
		}
	})

	t.Run("member of a team", func(t *testing.T) {
		w, err := a2a.DialWorker(t.Context(), a2a.WorkerConfig{URL: base, Token: jsToken})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = w.Close() })
		s := stacktest.Start(t, stacktest.Options{Coordinator: true})
		s.RunAgents(t, nil, agentkit.Agent{
			Card:   protocol.AgentCard{Name: "shouter", Description: w.Description(), Capabilities: w.Capabilities(), Type: protocol.TypeTool},
			Worker: w, Policy: rules.New(rules.Config{}),
		})
		res := s.Submit(t, protocol.GoalRequest{Goal: "Shout good morning in capital letters."})
		if res.Status != protocol.GoalConcluded || !strings.Contains(res.Conclusion, "GOOD MORNING IN CAPITAL LETTERS!") {
			t.Fatalf("goal %s (%s):\n%s", res.Status, res.Reason, res.Conclusion)
		}
		res = s.Submit(t, protocol.GoalRequest{Goal: "Shout a question in capital letters.", Team: []string{"shouter"}})
		if !strings.Contains(res.Conclusion, "Which language should I shout in?") {
			t.Fatalf("the agent's question is not in the chat's conclusion: %s (%s):\n%s", res.Status, res.Reason, res.Conclusion)
		}
	})
}

func TestDialWorkerErrors(t *testing.T) {
	for url, want := range map[string]string{
		"ftp://x":                   "not an http(s) URL",
		"http://127.0.0.1:1":        "fetch the agent card",
		"http://127.0.0.1:1/c.json": "fetch the agent card",
	} {
		if _, err := a2a.DialWorker(t.Context(), a2a.WorkerConfig{URL: url}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", url, err, want)
		}
	}
}

// A remote that answers garbage, a JSON-RPC error, or nothing in time.
func TestWorkerRemoteErrors(t *testing.T) {
	var base string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{kind}/.well-known/agent-card.json", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"name":"remote","description":"d","url":"%s/%s/rpc","preferredTransport":"JSONRPC","protocolVersion":"0.3.0","version":"1","capabilities":{},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"skills":[]}`, base, r.PathValue("kind"))
	})
	mux.HandleFunc("POST /garbage/rpc", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "<html>oops") })
	mux.HandleFunc("POST /error/rpc", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `{"jsonrpc":"2.0","id":"x","error":{"code":-32603,"message":"the model is down"}}`)
	})
	mux.HandleFunc("POST /hang/rpc", func(_ http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // so that the server notices the client going away
		<-r.Context().Done()
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	base = srv.URL
	for kind, want := range map[string]string{"garbage": "a2a remote: ", "error": "a2a remote: ", "hang": "timed out"} {
		w, err := a2a.DialWorker(t.Context(), a2a.WorkerConfig{URL: base + "/" + kind, Timeout: 300 * time.Millisecond})
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		_, err = w.Run(t.Context(), task("do it"))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", kind, err, want)
		}
		if kind == "hang" && !errors.Is(err, a2a.ErrTimeout) {
			t.Errorf("hang: %v is not ErrTimeout", err)
		}
		_ = w.Close()
	}
}
