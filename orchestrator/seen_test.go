package orchestrator_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/agentkit/rules"
	"github.com/ioa-nats/ioa/orchestrator"
	"github.com/nats-io/nats.go"
)

// lateConcluder assigns one async task and concludes as soon as it has the
// turn again. The first time, it decides while the task runs and holds its
// conclusion until the task's result is in the log: a launcher whose
// decision (a model's, say) took longer than the task.
type lateConcluder struct {
	nc      *nats.Conn
	chat    func(comm string) (string, error)
	decided chan struct{} // closed when the first conclusion is decided
	once    sync.Once

	mu    sync.Mutex
	asked []string // the conclusions decided, in order
}

func (p *lateConcluder) TeamUp(_ context.Context, r agentkit.TeamUpRequest) (agentkit.TeamUpDecision, error) {
	return agentkit.TeamUpDecision{Members: r.Team}, nil
}

func (p *lateConcluder) NeedsTeam(context.Context, agentkit.TeamCheck) (string, error) {
	return "", nil
}

func (p *lateConcluder) NextMessage(ctx context.Context, t agentkit.Turn) (protocol.AgentMessage, error) {
	if len(t.Chat.Tasks) == 0 {
		return protocol.AgentMessage{Type: protocol.MsgAsyncAssign, Content: "go",
			Tasks: []protocol.Task{{Assignee: "slow", TaskAbstract: "the answer", TaskDesc: "find the answer"}}}, nil
	}
	msg := protocol.AgentMessage{Type: protocol.MsgConclusion, Content: agentkit.TaskReport(t.Chat.Tasks)}
	p.mu.Lock()
	p.asked = append(p.asked, msg.Content)
	p.mu.Unlock()
	if len(t.Chat.RunningTasks()) == 0 {
		return msg, nil
	}
	// Hold the decision until the result has been logged.
	subject, err := p.chat(t.Chat.CommID)
	if err != nil {
		return protocol.AgentMessage{}, err
	}
	logged := make(chan struct{}, 1)
	sub, err := p.nc.Subscribe(subject, func(m *nats.Msg) {
		var am protocol.AgentMessage
		if json.Unmarshal(m.Data, &am) == nil && am.Type == protocol.MsgTaskResult {
			logged <- struct{}{}
		}
	})
	if err != nil {
		return protocol.AgentMessage{}, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := p.nc.Flush(); err != nil {
		return protocol.AgentMessage{}, err
	}
	p.once.Do(func() { close(p.decided) })
	select {
	case <-logged:
	case <-ctx.Done():
		return protocol.AgentMessage{}, ctx.Err()
	}
	return msg, nil
}

// A conclusion decided before a task's result was logged is refused by the
// referee (agentkit says what it had seen, seen_seq), and the launcher
// concludes again with the result: the goal's conclusion never reports as
// unfinished a task whose result the chat holds.
func TestConclusionMissingAResultIsDecidedAgain(t *testing.T) {
	w := newWorld(t, orchestrator.Config{})
	decided := make(chan struct{})
	lead := &lateConcluder{nc: w.nc, chat: w.b.Subjects().Chat, decided: decided}
	runAgents(t, w,
		agentkit.Agent{Card: protocol.AgentCard{Name: "lead", Description: "Leads the team"}, Policy: lead,
			Worker: agentkit.WorkerFunc(func(context.Context, agentkit.Task) (agentkit.Result, error) { return agentkit.Result{}, nil })},
		agentkit.Agent{
			Card: protocol.AgentCard{Name: "slow", Description: "Finds answers"},
			Worker: agentkit.WorkerFunc(func(ctx context.Context, _ agentkit.Task) (agentkit.Result, error) {
				select {
				case <-decided:
				case <-ctx.Done():
					return agentkit.Result{}, ctx.Err()
				}
				return agentkit.Result{Conclusion: "forty-two"}, nil
			}),
			Policy: rules.New(rules.Config{}),
		})
	res := w.SubmitWithin(t, protocol.GoalRequest{Goal: "Find the answer", Launcher: "lead", Team: []string{"slow"}, MaxTurns: 5}, 30*time.Second)
	if res.Status != protocol.GoalConcluded || res.Outcome != protocol.OutcomeSucceeded {
		t.Fatalf("goal %s %s (%s): %s", res.Status, res.Outcome, res.Reason, res.Conclusion)
	}
	if want := "the answer: forty-two"; res.Conclusion != want {
		t.Errorf("conclusion %q, want %q", res.Conclusion, want)
	}
	lead.mu.Lock()
	defer lead.mu.Unlock()
	if len(lead.asked) != 2 || !strings.Contains(lead.asked[0], "not finished") {
		t.Errorf("conclusions decided %q: want the stale one, refused, then the one with the result", lead.asked)
	}
}
