// Command embed runs the whole runtime inside one Go program: NATS with no
// network listener, the registry, the orchestrator with its coordinator, and
// two agents whose workers are Go functions. It submits a goal, prints how
// it ended and the conclusion, and exits.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"time"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/agentkit/rules"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/orchestrator"
	"github.com/ioa-nats/ioa/registry"
)

// Goal has two independent clauses: the coordinator finds the agent for
// each by meaning, runs both tasks at once and concludes with the results.
const Goal = "Count the words in 'the quick brown fox'. Convert 'hello nats' to upper case."

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, w io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	b, err := bus.Start(ctx, bus.Config{Ephemeral: true, Listen: bus.NoListen}) // in-process only, a temporary store
	if err != nil {
		return err
	}
	defer b.Close()
	reg, err1 := registry.New(b, registry.Config{})
	orch, err2 := orchestrator.New(b, orchestrator.Config{})
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	defer reg.Shutdown(context.WithoutCancel(ctx)) // safe before Start; runs after orch's
	defer orch.Shutdown(context.WithoutCancel(ctx))
	if err := errors.Join(reg.Start(ctx), orch.Start(ctx)); err != nil {
		return err
	}

	policy := rules.New(rules.Config{})
	agent := func(name, desc string, f func(string) string) agentkit.Agent {
		return agentkit.Agent{Card: protocol.AgentCard{Name: name, Description: desc}, Policy: policy,
			Worker: agentkit.WorkerFunc(func(_ context.Context, t agentkit.Task) (agentkit.Result, error) {
				_, s, _ := strings.Cut(t.TaskDesc, "'") // the text between single quotes
				s, _, _ = strings.Cut(s, "'")
				return agentkit.Result{Conclusion: f(s)}, nil
			})}
	}
	rt, err := agentkit.NewRuntime(b.Conn(), b.Subjects(), []agentkit.Agent{
		orchestrator.Coordinator("coordinator", policy),
		agent("word-counter", "Counts the words of a text.", func(s string) string { return fmt.Sprint(len(strings.Fields(s)), " words") }),
		agent("upper-caser", "Converts text to upper case.", strings.ToUpper),
	})
	if err != nil {
		return err
	}
	actx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- rt.Run(actx) }()
	defer func() { stop(); <-done }() // the agents deregister before the services stop
	select {                          // the agents are registered, so the goal can find them
	case <-rt.Ready():
	case err := <-done:
		return err
	}
	var res protocol.GoalResult // with wait, the reply is the GoalResult, once the goal ends
	if err := bus.Request(ctx, b.Conn(), b.Subjects().Goal(bus.GoalSubmit), protocol.GoalRequest{Goal: Goal, Wait: true}, &res); err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n%s\n", res.Status, res.Conclusion)
	return err
}
