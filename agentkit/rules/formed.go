package rules

import (
	"slices"
	"sync"

	"github.com/ioa-nats/ioa/agentkit/protocol"
)

// formedTeams keeps, per goal, the registry's answers that formed its team,
// from team-up until the launcher states the plan: the plan gives each
// clause to the member recruited for it from the same answers, and asks the
// registry nothing again. It is only a saving: a plan made without it (the
// launcher restarted, another replica of it formed the team, the goal named
// its team) asks the registry as before.
type formedTeams struct {
	mu    sync.Mutex
	goals map[string]formedTeam
	order []string // oldest first, to bound the memory of teams never planned
}

type formedTeam struct {
	goal    string
	clauses []Clause // Split(goal), so the plan does not split it again
	results [][]protocol.SearchResult
}

// maxFormedTeams bounds the answers kept for goals whose plan never came
// (the chat failed to start, the launcher's turn went to another replica).
const maxFormedTeams = 1024

func (f *formedTeams) put(goalID, goal string, clauses []Clause, results [][]protocol.SearchResult) {
	if goalID == "" {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.goals == nil {
		f.goals = map[string]formedTeam{}
	}
	if _, ok := f.goals[goalID]; !ok {
		f.order = append(f.order, goalID)
	}
	f.goals[goalID] = formedTeam{goal, clauses, results}
	for len(f.order) > maxFormedTeams {
		delete(f.goals, f.order[0])
		f.order = f.order[1:]
	}
}

// take returns and forgets the clauses and answers kept for goalID, if they
// were for the same goal text.
func (f *formedTeams) take(goalID, goal string) ([]Clause, [][]protocol.SearchResult, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.goals[goalID]
	if !ok {
		return nil, nil, false
	}
	delete(f.goals, goalID)
	if i := slices.Index(f.order, goalID); i >= 0 {
		f.order = slices.Delete(f.order, i, i+1)
	}
	if t.goal != goal {
		return nil, nil, false
	}
	return t.clauses, t.results, true
}
