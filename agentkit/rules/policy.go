package rules

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/protocol"
)

// Config tunes the policy; the zero value is the default.
type Config struct {
	// MaxTeam bounds the team the launcher asks for, itself included
	// (default 8).
	MaxTeam int
	// SearchLimit is how many agents team-up asks the registry for per
	// clause (default 5).
	SearchLimit int
	// MinMatch is the registry match (protocol.SearchResult.Match) an agent
	// needs for a clause to be given to it: a clause no registered agent
	// matches that well is given to nobody, and the conclusion says so.
	// Zero means protocol.DefaultMinMatch; negative: no threshold.
	MinMatch float64
}

// Policy is the rules policy. Everything it needs is in the chat replica
// (the plan is in Chat.Plan), so it survives restarts; it only keeps, from
// team-up to the plan, the registry's answers that formed a team (formed),
// which a restart merely makes it ask for again.
type Policy struct {
	cfg    Config
	formed *formedTeams
}

var _ agentkit.Policy = (*Policy)(nil)

// New returns a rules policy.
func New(cfg Config) *Policy {
	if cfg.MaxTeam <= 0 {
		cfg.MaxTeam = 8
	}
	if cfg.SearchLimit <= 0 {
		cfg.SearchLimit = 5
	}
	if cfg.MinMatch == 0 {
		cfg.MinMatch = protocol.DefaultMinMatch
	}
	return &Policy{cfg: cfg, formed: &formedTeams{}}
}

// TeamUp takes the team the goal names, or else, for each clause of the
// goal, the registry's best-ranked agent whose match reaches MinMatch, never
// the launcher itself. A clause no agent matches well enough adds nobody; a
// goal none of whose clauses does gets a team of the launcher alone, which
// concludes that no registered agent can do it.
func (p *Policy) TeamUp(ctx context.Context, req agentkit.TeamUpRequest) (agentkit.TeamUpDecision, error) {
	self := req.Self.Name
	var members []string
	add := func(n string) {
		if n != self && !slices.Contains(members, n) && len(members) < p.cfg.MaxTeam-1 {
			members = append(members, n)
		}
	}
	if len(req.Team) > 0 {
		for _, n := range req.Team {
			add(n)
		}
		return agentkit.TeamUpDecision{Members: members}, nil
	}
	if req.Registry == nil {
		return agentkit.TeamUpDecision{}, errors.New("rules: team-up needs a registry")
	}
	clauses := Split(req.Goal)
	results, errs := searchAll(ctx, req.Registry, clauses, func(text string) protocol.SearchRequest {
		return protocol.SearchRequest{Query: text, Limit: p.cfg.SearchLimit, Exclude: []string{self}}
	})
	for i := range clauses {
		if errs[i] != nil {
			return agentkit.TeamUpDecision{}, fmt.Errorf("rules: team-up: %w", errs[i])
		}
		if j := slices.IndexFunc(results[i], func(r protocol.SearchResult) bool { return r.Name != self && p.capable(r) }); j >= 0 {
			add(results[i][j].Name)
		}
	}
	p.formed.put(req.GoalID, req.Goal, clauses, results)
	return agentkit.TeamUpDecision{Members: members}, nil
}

// searchAll asks the registry about every clause at once (the searches are
// independent, and one after the other they were most of a small goal's
// time) and returns each clause's results and error, in clause order.
func searchAll(ctx context.Context, reg agentkit.Searcher, clauses []Clause, req func(text string) protocol.SearchRequest) ([][]protocol.SearchResult, []error) {
	results, errs := make([][]protocol.SearchResult, len(clauses)), make([]error, len(clauses))
	var wg sync.WaitGroup
	for i, c := range clauses {
		wg.Go(func() { results[i], errs[i] = reg.Search(ctx, req(c.Text)) })
	}
	wg.Wait()
	return results, errs
}

// NextMessage is the move for the agent holding the turn. A member given
// the turn answers the plan and hands the turn back; the launcher states
// the plan (asking a person on the team about it first), assigns
// the independent clauses async, pauses on them, assigns the dependent ones
// sync one at a time, and concludes.
func (p *Policy) NextMessage(ctx context.Context, t agentkit.Turn) (protocol.AgentMessage, error) {
	c := &t.Chat
	self := t.Self.Name
	if c.Launcher != self {
		return p.memberReply(t), nil
	}
	// A refused move would be refused again: this policy is
	// deterministic. Concluding is always legal for the speaker.
	if c.FinalTurn || t.LastError != nil || c.Turn >= c.MaxTurns {
		return conclusion(c), nil
	}
	items := ParsePlan(c.Plan)
	if len(items) == 0 {
		return p.planMessage(ctx, t), nil
	}
	return nextStep(c, items), nil
}

// errNoRegistry stands for the registry's answer when the policy has none.
var errNoRegistry = errors.New("rules: no registry")

// capable reports whether a search result matches its query well enough to
// be given the work.
func (p *Policy) capable(r protocol.SearchResult) bool {
	return p.cfg.MinMatch < 0 || r.Match >= p.cfg.MinMatch
}

func (p *Policy) memberReply(t agentkit.Turn) protocol.AgentMessage {
	var mine []string
	for _, it := range ParsePlan(t.Chat.Plan) {
		if it.Assignee == t.Self.Name {
			mine = append(mine, it.Text)
		}
	}
	content := t.Self.Name + ": ready; nothing in the plan is mine"
	if len(mine) > 0 {
		content = t.Self.Name + ": ready for: " + strings.Join(mine, "; ")
	}
	return protocol.AgentMessage{Type: protocol.MsgDiscussion, Content: content, NextSpeaker: []string{t.Chat.Launcher}}
}

// planMessage states the plan, one line per clause with its assignee:
// to the first person on the team, else with the launcher's first step.
func (p *Policy) planMessage(ctx context.Context, t agentkit.Turn) protocol.AgentMessage {
	c := &t.Chat
	// The answers that formed the team give each clause to the member
	// recruited for it; without them (a named team, a restart) the
	// registry is asked, deep enough to rank every member.
	clauses, results, formed := p.formed.take(c.GoalID, c.Goal)
	if !formed {
		clauses = Split(c.Goal)
	}
	if len(clauses) == 0 {
		return protocol.AgentMessage{Type: protocol.MsgConclusion, Content: "The goal is empty; there is nothing to do."}
	}
	errs := make([]error, len(clauses))
	if !formed && t.Registry != nil {
		results, errs = searchAll(ctx, t.Registry, clauses, func(text string) protocol.SearchRequest {
			return protocol.SearchRequest{Query: text, Limit: 100, Exclude: []string{t.Self.Name}}
		})
	}
	items := make([]Item, len(clauses))
	for i, cl := range clauses {
		var res []protocol.SearchResult
		var err error = errNoRegistry
		if results != nil {
			res, err = results[i], errs[i]
		}
		items[i] = Item{
			TaskID:   "t" + strconv.Itoa(i+1),
			Async:    len(clauses) > 1 && !cl.Dependent,
			Assignee: p.assign(t, cl.Text, res, err),
			Text:     cl.Text,
		}
	}
	plan := FormatPlan(items)
	// A person on the team is asked about the plan before the work starts
	// (the console shows it as their turn); programs are not: their
	// answer is "ready", and a round of it would cost a turn, a log entry
	// and a delivery to every member, and tell the chat nothing the plan's
	// lines do not. So without a person the plan rides on the launcher's
	// first step: the first assignment, or the conclusion when nobody can
	// do anything.
	if person := firstPerson(t); person != "" {
		return protocol.AgentMessage{
			Type:        protocol.MsgDiscussion,
			Content:     "Plan:\n" + plan,
			UpdatedPlan: plan,
			NextSpeaker: []string{person},
		}
	}
	c.Plan = plan // the turn's own copy: the first step (a conclusion lists the undone parts) reads it
	m := nextStep(c, items)
	m.UpdatedPlan = plan
	m.Content = "Plan:\n" + plan + "\n" + m.Content
	return m
}

// firstPerson is the first member of the team other than the speaker whose
// card says it is a person (type human), or "".
func firstPerson(t agentkit.Turn) string {
	for _, card := range t.Team {
		if card.Type == protocol.TypeHuman && card.Name != t.Self.Name && t.Chat.IsMember(card.Name) {
			return card.Name
		}
	}
	return ""
}

// assign picks the member for a clause: nobody ("") when no registered
// agent matches it well enough (MinMatch); else the registry's best-ranked
// member of the team other than the launcher that matches it well enough,
// or the best-ranked member at all (the team the goal named); without an
// answer from the registry, the member whose card shares the most words
// with the clause, else the launcher itself.
//
// res and err are the registry's answer for text (errNoRegistry without one).
func (p *Policy) assign(t agentkit.Turn, text string, res []protocol.SearchResult, err error) string {
	self := t.Self.Name
	others := slices.DeleteFunc(slices.Clone(t.Chat.Members), func(n string) bool { return n == self })
	if err == nil {
		if !slices.ContainsFunc(res, p.capable) {
			return "" // no registered agent can do it
		}
		if i := slices.IndexFunc(res, func(r protocol.SearchResult) bool { return slices.Contains(others, r.Name) && p.capable(r) }); i >= 0 {
			return res[i].Name
		}
		for _, r := range res {
			if slices.Contains(others, r.Name) {
				return r.Name
			}
		}
	}
	if len(others) == 0 {
		return self
	}
	best, bestScore := self, 0
	want := words(text)
	for _, card := range t.Team {
		if !slices.Contains(others, card.Name) {
			continue
		}
		have := words(card.Description + " " + strings.Join(card.Capabilities, " ") + " " + strings.Join(card.Tags, " "))
		score := 0
		for w := range want {
			if have[w] {
				score++
			}
		}
		if score > bestScore {
			best, bestScore = card.Name, score
		}
	}
	return best
}

func words(s string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if len(w) > 2 {
			m[w] = true
		}
	}
	return m
}

// nextStep follows the plan from the task board.
func nextStep(c *protocol.Chat, items []Item) protocol.AgentMessage {
	var batch []protocol.Task
	items = slices.DeleteFunc(slices.Clone(items), func(it Item) bool { return it.Assignee == "" })
	for _, it := range items {
		if _, ok := c.Task(it.TaskID); it.Async && !ok {
			batch = append(batch, protocol.Task{TaskID: it.TaskID, Assignee: it.Assignee, TaskAbstract: it.Text, TaskDesc: it.Text})
		}
	}
	if len(batch) > 0 {
		return protocol.AgentMessage{Type: protocol.MsgAsyncAssign, Content: "Starting the independent tasks: " + taskIDs(batch) + ".", Tasks: batch}
	}
	var triggers []string
	for _, it := range items {
		if ts, ok := c.Task(it.TaskID); it.Async && ok && !ts.Done() {
			triggers = append(triggers, it.TaskID)
		}
	}
	if len(triggers) > 0 {
		return protocol.AgentMessage{Type: protocol.MsgPause, Content: "Waiting for " + strings.Join(triggers, ", ") + ".", Triggers: triggers}
	}
	for _, it := range items {
		if it.Async {
			continue
		}
		ts, ok := c.Task(it.TaskID)
		if !ok {
			task := protocol.Task{TaskID: it.TaskID, Assignee: it.Assignee, TaskAbstract: it.Text, TaskDesc: describe(it.Text, c.Tasks)}
			return protocol.AgentMessage{Type: protocol.MsgSyncTaskAssign, Content: "Next: " + it.TaskID + ".", Tasks: []protocol.Task{task}}
		}
		if !ts.Done() {
			break // cannot wait for a sync task while holding the turn
		}
	}
	return conclusion(c)
}

// describe is a dependent task's description: the clause, then a blank
// line and the results so far.
func describe(text string, tasks []protocol.TaskState) string {
	var b strings.Builder
	b.WriteString(text)
	first := true
	for _, t := range tasks {
		if !t.Done() {
			continue
		}
		if first {
			b.WriteString("\n\nResults so far:")
			first = false
		}
		name := t.TaskAbstract
		if name == "" {
			name = t.TaskID
		}
		if t.Status == protocol.TaskCompleted {
			fmt.Fprintf(&b, "\n- %s: %s", name, t.Result)
		} else {
			fmt.Fprintf(&b, "\n- %s: FAILED: %s", name, t.Result)
		}
	}
	return b.String()
}

// conclusion reports every task, then the parts of the plan nobody was
// given because no registered agent can do them (also in Undone, for the
// goal's outcome), and those meant for an agent but never assigned because
// the chat ends first (in NotStarted).
func conclusion(c *protocol.Chat) protocol.AgentMessage {
	var undone, notStarted []string
	var notStartedLines []string
	for _, it := range ParsePlan(c.Plan) {
		switch _, assigned := c.Task(it.TaskID); {
		case it.Assignee == "":
			undone = append(undone, it.Text)
		case !assigned:
			notStarted = append(notStarted, it.Text)
			notStartedLines = append(notStartedLines, fmt.Sprintf("%s: NOT DONE: not started (%s for %s) before the chat ended", it.Text, it.TaskID, it.Assignee))
		}
	}
	var lines []string
	if len(c.Tasks) > 0 || len(undone) == 0 {
		lines = append(lines, agentkit.TaskReport(c.Tasks))
	}
	for _, u := range undone {
		lines = append(lines, fmt.Sprintf("%s: NOT DONE: no registered agent can do this; it needs an agent able to: %s", u, u))
	}
	lines = append(lines, notStartedLines...)
	failed := 0
	for _, t := range c.Tasks {
		if t.Status != protocol.TaskCompleted {
			failed++
		}
	}
	if failed > 0 {
		lines = append(lines, fmt.Sprintf("Note: %d of %d tasks did not complete.", failed, len(c.Tasks)))
	}
	return protocol.AgentMessage{Type: protocol.MsgConclusion, Content: strings.Join(lines, "\n"), Undone: undone, NotStarted: notStarted}
}

func taskIDs(ts []protocol.Task) string {
	ids := make([]string, len(ts))
	for i, t := range ts {
		ids[i] = t.TaskID
	}
	return strings.Join(ids, ", ")
}

// NeedsTeam hands a task to a nested team when the agent may team up and
// the task's own text (its first paragraph: later ones carry earlier
// results; after a "Title: " the steps) splits into two or more steps, one
// of which the registry ranks another agent best for. The sub-goal lists
// the steps, one per line, so the nested launcher plans them one by one.
func (p *Policy) NeedsTeam(ctx context.Context, q agentkit.TeamCheck) (string, error) {
	if !q.Self.NestedTeams || q.Task.TeamUpDepth <= 0 || q.Registry == nil {
		return "", nil
	}
	text := q.Task.TaskDesc
	if text == "" {
		text = q.Task.TaskAbstract
	}
	text, _, _ = strings.Cut(text, "\n\n")
	steps := Steps(text)
	if len(steps) < 2 {
		return "", nil
	}
	other := false
	for _, step := range steps {
		res, err := q.Registry.Search(ctx, protocol.SearchRequest{Query: step, Limit: 1})
		if err != nil {
			return "", fmt.Errorf("rules: needs team: %w", err)
		}
		if len(res) > 0 && res[0].Name != q.Self.Name {
			other = true
		}
	}
	if !other {
		return "", nil
	}
	return "- " + strings.Join(steps, "\n- "), nil
}
