package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/tmc/langchaingo/llms"
)

// NeedsTeam asks the model whether the agent does the task alone
// ("individual") or hands it to a nested team ("teamwork", with the team's
// sub-goal). Anything but a clear teamwork answer, a failed call included,
// means individual.
func (p *Policy) NeedsTeam(ctx context.Context, q agentkit.TeamCheck) (string, error) {
	if !q.Self.NestedTeams || q.Task.TeamUpDepth <= 0 {
		return "", nil
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.TurnTimeout)
	defer cancel()
	desc := q.Task.TaskDesc
	if desc == "" {
		desc = q.Task.TaskAbstract
	}
	choice, err := p.call(ctx, q.Self.Name, q.Task.GoalID, []llms.MessageContent{
		system(fmt.Sprintf("You are %s: %s\nDecide whether you do a task yourself (individual) or it needs a team of other agents (teamwork). "+
			`Answer with one JSON object: {"decision": "individual" or "teamwork", "subgoal": "the goal to give the team, when teamwork"}`,
			q.Self.Name, clip(oneLine(q.Self.Description), 400))),
		human("Task: " + clip(oneLine(q.Task.TaskAbstract), 200) + "\n" + clip(desc, 4000)),
	})
	if err != nil {
		p.log.Warn("needs-team call failed; doing the task alone", "agent", q.Self.Name, "task_id", q.Task.TaskID, "err", err)
		return "", nil
	}
	raw, err := extractJSON(choice.Content)
	if err != nil {
		return "", nil
	}
	var v struct {
		Decision any `json:"decision"`
		Subgoal  any `json:"subgoal"`
	}
	if json.Unmarshal([]byte(raw), &v) != nil {
		return "", nil
	}
	d, _ := v.Decision.(string)
	sub, _ := v.Subgoal.(string)
	if !strings.EqualFold(strings.TrimSpace(d), "teamwork") || strings.TrimSpace(sub) == "" {
		return "", nil
	}
	return clip(strings.TrimSpace(sub), 4000), nil
}
