package search

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// The replay protocol (replay.go) on the dev and the test world: learning
// from outcomes ranks the agents that concluded a task higher for the same
// need in new words, and a history of failures alone changes nothing. The
// weights of the learned field were chosen on the dev world. The test world
// gives, on the probe tasks whose agent has history, MRR 0.669 with no
// history, 0.681 with the registry's own picks (concluded or failed) and
// 0.694 with every history task concluded by its agent (and on those whose
// agent has none, 0.652, 0.637 and 0.623: the extended cards draw some of
// their tasks).
func TestOutcomeReplay(t *testing.T) {
	if testing.Short() || raceEnabled {
		// Pure computation, indexing each world four times: make unit runs
		// it without the race detector.
		t.Skip("indexes each world four times; run without -race and -short")
	}
	for _, world := range []string{"discovery-dev", "discovery-test"} {
		t.Run(world, func(t *testing.T) {
			docs, qs, _ := loadWorld(t, world)
			rep, err := ReplayOutcomes(t.Context(), docs, qs, func() (*Index, error) { return NewIndex(nil) })
			if err != nil {
				t.Fatal(err)
			}
			var table strings.Builder
			if err := rep.WriteTable(&table); err != nil {
				t.Fatal(err)
			}
			t.Logf("\n%s", table.String())
			by := map[string]ReplayCondition{}
			for _, c := range rep.Conditions {
				by[c.Name] = c
			}
			none, picked, failures, concluded := by["none"], by["picked"], by["failures"], by["concluded"]
			if failures.Failed == 0 || picked.Concluded == 0 || concluded.Concluded != rep.History {
				t.Fatalf("histories: %+v", rep.Conditions)
			}
			if failures.All != none.All {
				t.Errorf("failures alone changed the ranking: %+v, with no history %+v", failures.All, none.All)
			}
			if concluded.WithHistory.MRR < none.WithHistory.MRR+0.01 {
				t.Errorf("concluded history: MRR %.3f for agents with history, %.3f without the history: no gain",
					concluded.WithHistory.MRR, none.WithHistory.MRR)
			}
			if picked.WithHistory.MRR < none.WithHistory.MRR {
				t.Errorf("the registry's own picks as history: MRR %.3f for agents with history, %.3f without the history",
					picked.WithHistory.MRR, none.WithHistory.MRR)
			}
		})
	}
}

func TestSetOutcomes(t *testing.T) {
	ctx := t.Context()
	ix, err := NewIndex(nil)
	if err != nil {
		t.Fatal(err)
	}
	// Two cards alike but for their names.
	for _, n := range []string{"alpha", "beta"} {
		if err := ix.Upsert(ctx, Doc{Name: n, Description: "Plans trips: itineraries, transport and places to stay.", Capabilities: []string{"trip planning"}}); err != nil {
			t.Fatal(err)
		}
	}
	first := func() string {
		t.Helper()
		hits, err := ix.Search(ctx, Query{Texts: []string{"find a traditional ryokan in Kyoto for the cherry blossom week"}})
		if err != nil || len(hits) == 0 {
			t.Fatalf("search: %v %v", hits, err)
		}
		return hits[0].Name
	}
	// The outcomes go to the one ranked second.
	top := first()
	other := map[string]string{"alpha": "beta", "beta": "alpha"}[top]
	now := time.Now()
	done := Outcome{Task: "Book a ryokan in Kyoto during the cherry blossom season", OK: true, At: now}
	failed := Outcome{Task: "book a ryokan in Kyoto during the cherry blossom season", OK: false, At: now}
	for _, c := range []struct {
		name string
		outs []Outcome
		want string
	}{
		{"concluded", []Outcome{done}, other},
		{"failed only", []Outcome{failed}, top},
		{"concluded then failed", []Outcome{done, failed}, top},
		{"failed then concluded", []Outcome{failed, done}, other},
		{"too old", []Outcome{{Task: done.Task, OK: true, At: now.Add(-MaxOutcomeAge - time.Hour)}}, top},
		{"forgotten", nil, top},
	} {
		if err := ix.SetOutcomes(ctx, other, c.outs, now); err != nil {
			t.Fatal(err)
		}
		if got := first(); got != c.want {
			t.Errorf("%s: first %s, want %s", c.name, got, c.want)
		}
	}

	// Only the latest MaxOutcomes count.
	var many []Outcome
	many = append(many, done)
	for i := range MaxOutcomes {
		many = append(many, Outcome{Task: "translate letter " + strings.Repeat("x", i+1) + " into Welsh", OK: true}) // distinct without numbers, which are not learned
	}
	if got := ix.learn(many, now); len(got) != MaxOutcomes || slices.Contains(got, done.Task) {
		t.Errorf("learned %d tasks (the oldest kept: %v), want the latest %d", len(got), slices.Contains(got, done.Task), MaxOutcomes)
	}

	// Outcomes may come before the card, and wait for it.
	if err := ix.SetOutcomes(ctx, "gamma", []Outcome{done}, now); err != nil {
		t.Fatal(err)
	}
	if err := ix.Upsert(ctx, Doc{Name: "gamma", Description: "Plans trips: itineraries, transport and places to stay.", Capabilities: []string{"trip planning"}}); err != nil {
		t.Fatal(err)
	}
	if got := first(); got != "gamma" {
		t.Errorf("first %s, want gamma (its outcome came before its card)", got)
	}
	if err := ix.SetOutcomes(ctx, " ", []Outcome{done}, now); err == nil {
		t.Error("outcomes for a blank name: no error")
	}
}

// TestOutcomesDoNotLowerTheMatch: the tasks an agent concluded may raise its
// match for a task in their words, never lower its or another agent's match
// for their own skills. The demo calculator's match for "divide it by 2"
// fell from 0.50 to 0.21, under min_match, after the unit converter
// concluded "Convert 2,500 meters to miles": the "2" learned with it.
func TestOutcomesDoNotLowerTheMatch(t *testing.T) {
	ctx := t.Context()
	ix, err := NewIndex(nil)
	if err != nil {
		t.Fatal(err)
	}
	calc := Doc{Name: "calculator", Description: "Evaluates arithmetic expressions and computes exact numeric results.",
		Capabilities: []string{"arithmetic", "multiply, divide, add or subtract numbers", "divide one number by another", "square roots and powers"}}
	units := Doc{Name: "units", Description: "Converts measurements between units of length, mass, volume, speed and temperature.",
		Capabilities: []string{"convert kilometres to miles", "unit conversion"}}
	for _, d := range []Doc{calc, units} {
		if err := ix.Upsert(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	match := func(q string) float64 {
		t.Helper()
		hits, err := ix.Search(ctx, Query{Texts: []string{q}, Keep: func(n string) bool { return n == "calculator" }})
		if err != nil || len(hits) != 1 {
			t.Fatalf("search %q: %v %v", q, hits, err)
		}
		return hits[0].Match
	}
	const q = "divide it by 2"
	before := match(q)
	now := time.Now()
	var outs []Outcome
	for _, task := range []string{"What is 15% of 240", "Divide 100 by 8", "What is the square root of 144",
		"Compute 17% of 3,200", "What is 7 times 6", "Compute the monthly interest on a loan of 12000 euros"} {
		outs = append(outs, Outcome{Task: task, OK: true, At: now})
	}
	if err := ix.SetOutcomes(ctx, "calculator", outs, now); err != nil {
		t.Fatal(err)
	}
	if after := match(q); after < before-1e-9 {
		t.Errorf("match for %q: %.3f before the agent's outcomes, %.3f after: its successes lowered it", q, before, after)
	}
	// Nor do another agent's: numbers are a task's data, not a skill, and a
	// later paragraph (the rules policy's earlier results) is context.
	if err := ix.SetOutcomes(ctx, "units", []Outcome{
		{Task: "Convert 2,500 meters to miles", OK: true, At: now},
		{Task: "How many miles is 42 km", OK: true, At: now},
		{Task: "Convert the sizes in sub/sizes.csv and units.md to metres", OK: true, At: now},
		{Task: "convert it to pounds\n\nResults so far:\n- Divide 100 by 8: 100 / 8 = 12.5", OK: true, At: now},
	}, now); err != nil {
		t.Fatal(err)
	}
	if after := match(q); after < before-1e-9 {
		t.Errorf("match for %q: %.3f before another agent's outcomes, %.3f after: they lowered it", q, before, after)
	}
	if got := ix.learned["units"]; !slices.Equal(got, []string{"Convert meters to miles", "How many miles is km", "Convert the sizes in and to metres", "convert it to pounds"}) {
		t.Errorf("learned %q", got)
	}
	// What it learned still helps a task in those words.
	if m := match("the monthly interest on a loan"); m < 0.2 {
		t.Errorf("match for a task it concluded, in its words: %.3f", m)
	}
}

// TestFileNamesAskForAFile: a task naming a file by a name no card holds
// ("Read sub/b.md") matched the demo's file reader at 0.21, under the
// default min_match of 0.26, so nobody was given it; the query now says
// "file" after each file name.
func TestFileNamesAskForAFile(t *testing.T) {
	ctx := t.Context()
	ix, err := NewIndex(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []Doc{
		{Name: "file-reader", Description: "Reads text files from the shared sandbox folder, shows what a file contains, and lists the files in it.",
			Capabilities: []string{"read a file", "show or open a file", "list files"}},
		{Name: "text-analyst", Description: "Counts the words, sentences and characters of a text or a file and finds its most frequent words.",
			Capabilities: []string{"word count", "text statistics"}},
		{Name: "calculator", Description: "Evaluates arithmetic expressions and computes exact numeric results.",
			Capabilities: []string{"arithmetic", "multiply, divide, add or subtract numbers"}},
	} {
		if err := ix.Upsert(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	top := func(q string) Hit {
		t.Helper()
		hits, err := ix.Search(ctx, Query{Texts: []string{q}, Limit: 1})
		if err != nil || len(hits) != 1 {
			t.Fatalf("search %q: %v, %v", q, hits, err)
		}
		return hits[0]
	}
	for _, c := range []struct{ file, bare, want string }{
		{"Read sub/b.md", "Read sub/b", "file-reader"},
		{"Open data.csv", "Open data", "file-reader"},
		{"Count the words in notes.txt", "Count the words in notes", "text-analyst"},
	} {
		named, bare := top(c.file), top(c.bare)
		if named.Name != c.want || named.Match < bare.Match+0.03 {
			t.Errorf("%q: %s %.3f; %q: %s %.3f; want %s, and the file name to raise the match", c.file, named.Name, named.Match, c.bare, bare.Name, bare.Match, c.want)
		}
	}
}
