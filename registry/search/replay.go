package search

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// The outcome replay protocol measures learning from outcomes on a labelled
// world whose agents each have several tasks, so that a need comes back in
// new words:
//
//   - the history: the first task (by id) of every other agent (by name) is
//     replayed as a finished task; the probe: every other task of every agent
//     with more than one, searched afterwards;
//   - "none": no history; "picked": each history task is given to the agent
//     the index (without history) ranks first, which concludes it when it is
//     an acceptable agent and fails it otherwise, as a team-up that takes the
//     registry's first answer would see; "failures": only the failed outcomes
//     of "picked"; "concluded": each history task concluded by its gold agent,
//     as when a team found the right member in the end.
//
// Every condition is scored on the probe, overall and split by whether the
// probe's gold agent has history.

// ReplayCondition is one history of the replay protocol.
type ReplayCondition struct {
	Name string
	// Outcomes recorded, concluded and failed.
	Concluded, Failed int
	// All, WithHistory and WithoutHistory score the probe tasks: all of them,
	// those whose gold agent has a history task, and the others.
	All, WithHistory, WithoutHistory Metrics
}

// ReplayReport is the outcome of ReplayOutcomes.
type ReplayReport struct {
	History, Probe int // tasks
	Conditions     []ReplayCondition
}

// ReplayOutcomes runs the replay protocol on docs and queries; newIndex
// makes an empty index (one per condition).
func ReplayOutcomes(ctx context.Context, docs []Doc, queries []EvalQuery, newIndex func() (*Index, error)) (ReplayReport, error) {
	var rep ReplayReport
	byGold := map[string][]EvalQuery{}
	for _, q := range queries {
		byGold[q.Gold] = append(byGold[q.Gold], q)
	}
	golds := make([]string, 0, len(byGold))
	for g, qs := range byGold {
		if len(qs) > 1 {
			golds = append(golds, g)
		}
		slices.SortFunc(qs, func(a, b EvalQuery) int { return strings.Compare(a.ID, b.ID) })
	}
	slices.Sort(golds)
	var history, probe []EvalQuery
	hasHistory := map[string]bool{}
	for i, g := range golds {
		qs := byGold[g]
		if i%2 == 0 {
			history = append(history, qs[0])
			hasHistory[g] = true
			qs = qs[1:]
		} else {
			qs = qs[1:] // the same share of each agent's tasks is probed
		}
		probe = append(probe, qs...)
	}
	rep.History, rep.Probe = len(history), len(probe)
	if len(history) == 0 {
		return rep, fmt.Errorf("search: replay: no agent has more than one task")
	}

	build := func() (*Index, error) {
		ix, err := newIndex()
		if err != nil {
			return nil, err
		}
		for _, d := range docs {
			if err := ix.Upsert(ctx, d); err != nil {
				return nil, err
			}
		}
		return ix, nil
	}
	ix, err := build()
	if err != nil {
		return rep, err
	}
	ok := func(q EvalQuery, name string) bool { return name == q.Gold || slices.Contains(q.AlsoOK, name) }
	type rec struct {
		agent string
		out   Outcome
	}
	var picked, concluded []rec
	now := time.Now()
	for _, q := range history {
		hits, err := ix.Search(ctx, Query{Texts: []string{q.Query}, Limit: 1})
		if err != nil {
			return rep, err
		}
		if len(hits) > 0 {
			picked = append(picked, rec{hits[0].Name, Outcome{Task: q.Query, OK: ok(q, hits[0].Name), At: now}})
		}
		concluded = append(concluded, rec{q.Gold, Outcome{Task: q.Query, OK: true, At: now}})
	}
	var failures []rec
	for _, r := range picked {
		if !r.out.OK {
			failures = append(failures, r)
		}
	}
	for i, c := range []struct {
		name string
		recs []rec
	}{{"none", nil}, {"picked", picked}, {"failures", failures}, {"concluded", concluded}} {
		if i > 0 { // "none" uses the index that picked
			if ix, err = build(); err != nil {
				return rep, err
			}
		}
		by := map[string][]Outcome{}
		cond := ReplayCondition{Name: c.name}
		for _, r := range c.recs {
			by[r.agent] = append(by[r.agent], r.out)
			if r.out.OK {
				cond.Concluded++
			} else {
				cond.Failed++
			}
		}
		for a, outs := range by {
			if err := ix.SetOutcomes(ctx, a, outs, now); err != nil {
				return rep, err
			}
		}
		rank := func(q EvalQuery) ([]string, error) {
			// Past the first 100 an agent counts as not found (as in
			// the service, whose largest limit is 100).
			hits, err := ix.Search(ctx, Query{Texts: []string{q.Query}, Limit: min(len(docs), 100)})
			names := make([]string, len(hits))
			for i, h := range hits {
				names[i] = h.Name
			}
			return names, err
		}
		var with, without []EvalQuery
		for _, q := range probe {
			if hasHistory[q.Gold] {
				with = append(with, q)
			} else {
				without = append(without, q)
			}
		}
		for _, part := range []struct {
			qs  []EvalQuery
			dst *Metrics
		}{{probe, &cond.All}, {with, &cond.WithHistory}, {without, &cond.WithoutHistory}} {
			r, err := Evaluate(part.qs, len(docs), rank)
			if err != nil {
				return rep, err
			}
			*part.dst = r.Overall
		}
		rep.Conditions = append(rep.Conditions, cond)
	}
	return rep, nil
}

// WriteTable prints the replay report.
func (r ReplayReport) WriteTable(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "outcome replay: %d history tasks replayed as finished, %d probe tasks searched\n", r.History, r.Probe)
	fmt.Fprintf(&b, "%-10s %9s | %-20s | %-20s | %-20s\n", "history", "ok/failed", "probe: Top@1 MRR", "gold with history", "gold without")
	for _, c := range r.Conditions {
		fmt.Fprintf(&b, "%-10s %4d/%-4d | %6.3f %6.3f       | %6.3f %6.3f       | %6.3f %6.3f\n", c.Name, c.Concluded, c.Failed,
			c.All.Top1, c.All.MRR, c.WithHistory.Top1, c.WithHistory.MRR, c.WithoutHistory.Top1, c.WithoutHistory.MRR)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
