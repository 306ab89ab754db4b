package search

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ioa-nats/ioa/internal/fuzzworker"
)

var testDocs = []Doc{
	{Name: "sql-writer", Description: "Turns questions into SQL queries for your database schema.", Capabilities: []string{"text to sql", "query optimization"}, Tags: []string{"database", "sql"}},
	{Name: "dog-trainer", Description: "Advice on training puppies and fixing barking or leash pulling.", Capabilities: []string{"obedience training", "behaviour problems"}, Tags: []string{"pets", "dogs"}},
	{Name: "tax-helper", Description: "Explains income tax deductions and helps fill in returns.", Capabilities: []string{"deductions", "tax returns"}, Tags: []string{"finance", "tax"}},
	{Name: "recipe-planner", Description: "Plans weekly meals and shopping lists from recipes.", Capabilities: []string{"meal planning", "shopping lists"}, Tags: []string{"cooking", "food"}},
}

func newTestIndex(t *testing.T) *Index {
	t.Helper()
	return buildIndex(t, testDocs)
}

func names(hits []Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.Name
	}
	return out
}

func checkHits(t *testing.T, hits []Hit) {
	t.Helper()
	seen := map[string]bool{}
	for i, h := range hits {
		if h.Score < 0 || h.Score > 1 {
			t.Errorf("hit %d score %v outside [0,1]", i, h.Score)
		}
		if i > 0 && hits[i-1].Score < h.Score {
			t.Errorf("hits not sorted at %d: %v", i, hits)
		}
		if seen[h.Name] {
			t.Errorf("duplicate hit %q", h.Name)
		}
		seen[h.Name] = true
	}
}

func TestSearchRanksTheRightAgent(t *testing.T) {
	ix := newTestIndex(t)
	for _, tc := range []struct{ query, want string }{
		{"write a SQL query listing top customers", "sql-writer"},
		{"my puppy keeps barking at night", "dog-trainer"},
		{"what can I deduct on my income tax", "tax-helper"},
		{"what should we cook for dinner this week", "recipe-planner"},
	} {
		hits, err := ix.Search(t.Context(), Query{Texts: []string{tc.query}})
		if err != nil {
			t.Fatal(err)
		}
		checkHits(t, hits)
		if len(hits) == 0 || hits[0].Name != tc.want {
			t.Errorf("%q: got %v, want %s first", tc.query, hits, tc.want)
		}
	}
}

// A query with no word to judge a card by (stop words, numbers, a
// fraction) matches no card: it used to match every card at 1, so the
// first-ranked agent was handed it whatever it could do.
func TestNothingToJudgeByMatchesNothing(t *testing.T) {
	ix := newTestIndex(t)
	for _, q := range []string{"What is of?", "42", "is", "?!"} {
		hits, err := ix.Search(t.Context(), Query{Texts: []string{q}})
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hits {
			if h.Match != 0 {
				t.Errorf("%q: %s matches %.3f, want 0", q, h.Name, h.Match)
			}
		}
	}
	hits, err := ix.Search(t.Context(), Query{Texts: []string{"plan my meals"}})
	if err != nil || len(hits) == 0 || hits[0].Match < 0.3 {
		t.Errorf("plan my meals: %+v %v, want a match", hits, err)
	}
}

// Arithmetic in symbols reads as the words cards use for it: "What is
// 1/3?" had no word left and matched nobody.
func TestOperatorsAreWords(t *testing.T) {
	for in, want := range map[string]string{
		"What is 1/3 of 90?":                    "What is 1 divided by 3 of 90?",
		"Compute 6*7 + 2":                       "Compute 6 times 7 plus 2",
		"1+2+3":                                 "1 plus 2 plus 3",
		"15% of 2^(3)":                          "15 percent of 2 power (3)",
		"km/h and 2026-12-03":                   "km/h and 2026 minus 12 minus 03",
		"2 to the 10th power, the 1st and 22nd": "2 to the 10 power, the 1 and 22",
		"the 4th-floor north":                   "the 4-floor north",
	} {
		if got := withOperatorWords(in); got != want {
			t.Errorf("withOperatorWords(%q) = %q, want %q", in, got, want)
		}
	}
	ix := buildIndex(t, append(slices.Clone(testDocs), Doc{Name: "calculator", Description: "Evaluates arithmetic.", Capabilities: []string{"divide one number by another", "what percent of a number is", "square roots and powers"}}))
	for _, q := range []string{"What is 1/3?", "What is 15% of 240?", "What is 2 to the 10th power?"} {
		hits, err := ix.Search(t.Context(), Query{Texts: []string{q}})
		if err != nil || len(hits) == 0 || hits[0].Name != "calculator" || hits[0].Match < 0.2 {
			t.Errorf("%q: %+v %v, want the calculator matched", q, hits, err)
		}
	}
}

func TestUpsertReplaces(t *testing.T) {
	ix := newTestIndex(t)
	ctx := t.Context()
	if err := ix.Upsert(ctx, Doc{Name: "dog-trainer", Description: "Identifies constellations and planets in the night sky.", Tags: []string{"astronomy"}}); err != nil {
		t.Fatal(err)
	}
	if got := ix.Len(); got != len(testDocs) {
		t.Fatalf("Len = %d after replacing, want %d", got, len(testDocs))
	}
	hits, err := ix.Search(ctx, Query{Texts: []string{"which planets are visible in the night sky"}, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 1 || hits[0].Name != "dog-trainer" {
		t.Errorf("replacement not searchable: %v", hits)
	}
	if ix.text.n != len(testDocs) {
		t.Errorf("lexical index holds %d docs, want %d", ix.text.n, len(testDocs))
	}
	if _, ok := ix.text.terms[stem("puppy")]; ok && len(ix.text.postings[ix.text.terms[stem("puppy")]]) != 0 {
		t.Error("old words still indexed")
	}
}

func TestDelete(t *testing.T) {
	ix := newTestIndex(t)
	ctx := t.Context()
	if err := ix.Delete(ctx, "tax-helper"); err != nil {
		t.Fatal(err)
	}
	if err := ix.Delete(ctx, "tax-helper"); !errors.Is(err, ErrNotFound) {
		t.Errorf("second Delete = %v, want ErrNotFound", err)
	}
	if ix.Len() != len(testDocs)-1 {
		t.Errorf("Len = %d", ix.Len())
	}
	hits, err := ix.Search(ctx, Query{Texts: []string{"income tax deductions"}, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(names(hits), "tax-helper") {
		t.Errorf("deleted doc returned: %v", hits)
	}
	// The freed slot is reused by the next insert.
	if err := ix.Upsert(ctx, Doc{Name: "garden-helper", Description: "Tells you when to plant tomatoes."}); err != nil {
		t.Fatal(err)
	}
	hits, err = ix.Search(ctx, Query{Texts: []string{"plant tomatoes"}, Limit: 1})
	if err != nil || len(hits) != 1 || hits[0].Name != "garden-helper" {
		t.Errorf("after reuse: %v %v", hits, err)
	}
}

func TestKeepFiltersAndFillsLimit(t *testing.T) {
	ix, err := NewIndex(nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for i := range 300 {
		d := Doc{Name: fmt.Sprintf("agent-%03d", i), Description: "Writes SQL queries for databases."}
		if i%3 == 0 {
			d.Description = "Grows tomatoes and other vegetables."
		}
		if err := ix.Upsert(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	keep := func(name string) bool { return strings.HasSuffix(name, "0") } // 30 agents
	hits, err := ix.Search(ctx, Query{Texts: []string{"write a sql query"}, Limit: 25, Keep: keep})
	if err != nil {
		t.Fatal(err)
	}
	checkHits(t, hits)
	if len(hits) != 25 {
		t.Errorf("got %d hits, want 25", len(hits))
	}
	for _, h := range hits {
		if !keep(h.Name) {
			t.Errorf("Keep ignored: %s", h.Name)
		}
	}
	// Fewer pass than the limit: all of them come back.
	hits, err = ix.Search(ctx, Query{Texts: []string{"write a sql query"}, Limit: 100, Keep: keep})
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 30 {
		t.Errorf("got %d hits, want all 30 that pass", len(hits))
	}
}

func TestMultiTextQuery(t *testing.T) {
	ix := newTestIndex(t)
	hits, err := ix.Search(t.Context(), Query{Texts: []string{"my puppy pulls on the leash", "dog obedience"}})
	if err != nil {
		t.Fatal(err)
	}
	checkHits(t, hits)
	if len(hits) == 0 || hits[0].Name != "dog-trainer" {
		t.Errorf("got %v", hits)
	}
	// Blank angles are ignored; only blank angles is an error.
	if _, err := ix.Search(t.Context(), Query{Texts: []string{"", "  "}}); !errors.Is(err, ErrEmptyQuery) {
		t.Errorf("blank query: %v, want ErrEmptyQuery", err)
	}
}

func TestLimits(t *testing.T) {
	ix := newTestIndex(t)
	for _, tc := range []struct{ limit, want int }{{0, len(testDocs)}, {-3, len(testDocs)}, {1, 1}, {2, 2}, {100, len(testDocs)}} {
		hits, err := ix.Search(t.Context(), Query{Texts: []string{"tax"}, Limit: tc.limit})
		if err != nil {
			t.Fatal(err)
		}
		checkHits(t, hits)
		if len(hits) != tc.want {
			t.Errorf("limit %d: %d hits, want %d", tc.limit, len(hits), tc.want)
		}
	}
}

func TestEmptyIndexAndInvalidDoc(t *testing.T) {
	ix, err := NewIndex(nil)
	if err != nil {
		t.Fatal(err)
	}
	hits, err := ix.Search(t.Context(), Query{Texts: []string{"anything"}})
	if err != nil || len(hits) != 0 {
		t.Errorf("empty index: %v %v", hits, err)
	}
	if err := ix.Upsert(t.Context(), Doc{Description: "no name"}); !errors.Is(err, ErrInvalidDoc) {
		t.Errorf("Upsert without name: %v", err)
	}
	if err := ix.Upsert(t.Context(), Doc{Name: "the-and-of"}); err != nil { // only stopwords
		t.Errorf("Upsert stopword-only doc: %v", err)
	}
	if _, err := ix.Search(t.Context(), Query{Texts: []string{"the of and"}}); err != nil {
		t.Errorf("stopword-only query: %v", err)
	}
	if _, err := NewIndex(nil, WithDenseWeight(2)); err == nil {
		t.Error("WithDenseWeight(2) accepted")
	}
}

func TestCustomEmbedderIsNormalised(t *testing.T) {
	raw := func(_ context.Context, text string) ([]float32, error) {
		return []float32{float32(len(text)), 3, 4}, nil
	}
	ix, err := NewIndex(raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range testDocs {
		if err := ix.Upsert(t.Context(), d); err != nil {
			t.Fatal(err)
		}
	}
	hits, err := ix.Search(t.Context(), Query{Texts: []string{"tax returns"}})
	if err != nil {
		t.Fatal(err)
	}
	checkHits(t, hits)
	if hits[0].Name != "tax-helper" {
		t.Errorf("got %v", hits)
	}
	failing := func(context.Context, string) ([]float32, error) { return nil, errors.New("boom") }
	ix2, _ := NewIndex(failing)
	if err := ix2.Upsert(t.Context(), testDocs[0]); err == nil {
		t.Error("embedder error swallowed")
	}
}

func TestConcurrentUse(t *testing.T) {
	ix := newTestIndex(t)
	ctx := t.Context()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 20 {
				name := fmt.Sprintf("w%d-%d", w, i%5)
				if err := ix.Upsert(ctx, Doc{Name: name, Description: "helps with taxes and recipes"}); err != nil {
					t.Error(err)
				}
				if _, err := ix.Search(ctx, Query{Texts: []string{"tax recipes"}, Limit: 3}); err != nil {
					t.Error(err)
				}
				if i%7 == 0 {
					_ = ix.Delete(ctx, name)
				}
			}
		})
	}
	wg.Wait()
}

func TestLocalEmbedderNormalised(t *testing.T) {
	v, err := LocalEmbedder()(t.Context(), "Analyzes your cloud bill to find idle resources")
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	if n < 0.999 || n > 1.001 {
		t.Errorf("|v|^2 = %v", n)
	}
}

func TestStem(t *testing.T) {
	for in, want := range map[string]string{
		"optimization": "optim", "optimizer": "optim", "caresses": "caress", "ponies": "poni",
		"relational": "relat", "hopping": "hop", "generalizations": "general", "sky": "sky", "c#": "c#",
		"running": "run", "agreed": "agre", "news": "news", // Porter2 keeps news, Porter made it new
	} {
		if got := stem(in); got != want {
			t.Errorf("stem(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzSearch(f *testing.F) {
	fuzzworker.Capture(f)
	f.Add("write a sql query", "agent-x", "Does things, quickly!")
	f.Add("", "", "")
	f.Add("ÄÖÜ ß 数据库 ---", "n", "\x00\xff")
	ix, err := NewIndex(nil)
	if err != nil {
		f.Fatal(err)
	}
	for _, d := range testDocs {
		if err := ix.Upsert(context.Background(), d); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, query, name, desc string) {
		_ = ix.Upsert(t.Context(), Doc{Name: name, Description: desc, Capabilities: []string{desc}, Tags: []string{query}})
		hits, err := ix.Search(t.Context(), Query{Texts: []string{query}, Limit: 3})
		if err != nil && !errors.Is(err, ErrEmptyQuery) {
			t.Fatal(err)
		}
		checkHits(t, hits)
		if name != "" {
			_ = ix.Delete(t.Context(), name)
		}
	})
}

// A task's quoted text is its data: it does not dilute the match ("ROT13
// the text \"Hello agents\"" matched at 0.26, "ROT13 the text" at 0.52),
// unless the quote is all there is to judge by.
func TestQuotedTextIsData(t *testing.T) {
	for in, want := range map[string]string{
		`ROT13 the text "Hello agents"`:      "ROT13 the text " + strings.Repeat(" ", len(`"Hello agents"`)),
		"Encode 'Hello NATS' with ROT13.":    "Encode" + strings.Repeat(" ", len(" 'Hello NATS' ")) + "with ROT13.",
		"What's in fox.txt? Don't guess":     "What's in fox.txt? Don't guess",
		"Translate “good morning” to French": "Translate " + strings.Repeat(" ", len("“good morning”")) + " to French",
	} {
		if got := withoutQuotedText(in); got != want {
			t.Errorf("withoutQuotedText(%q) = %q, want %q", in, got, want)
		}
	}
	ix := buildIndex(t, append(slices.Clone(testDocs), Doc{Name: "rot13", Description: "Encodes and decodes text with ROT13, the letter substitution cipher that rotates each letter by 13 places.",
		Capabilities: []string{"rot13", "caesar cipher", "encode text", "decode text"}}))
	match := func(q string) float64 {
		t.Helper()
		hits, err := ix.Search(t.Context(), Query{Texts: []string{q}})
		if err != nil || len(hits) == 0 || hits[0].Name != "rot13" {
			t.Fatalf("%q: %+v %v, want rot13 first", q, hits, err)
		}
		return hits[0].Match
	}
	if quoted, bare := match(`ROT13 the text "Hello agents"`), match("ROT13 the text"); quoted != bare {
		t.Errorf("the quote changed the match: %.3f with it, %.3f without", quoted, bare)
	}
	if m := match(`"rot13 cipher"`); m < 0.3 {
		t.Errorf("a query that is all quote matched %.3f, want it judged by its quote", m)
	}
}

func TestDataAfterAColon(t *testing.T) {
	for in, want := range map[string][]string{
		"Count the words in: the quick brown fox": {"Count the words in: the quick brown fox", "Count the words in"},
		"Translate into French:  good morning":    {"Translate into French:  good morning", "Translate into French"},
		"Task 2: convert 5 km to miles":           {"Task 2: convert 5 km to miles"}, // a label
		"Note: count the sheep":                   {"Note: count the sheep"},
		"Meet at 10:30 tomorrow":                  {"Meet at 10:30 tomorrow"},
		"Fetch http://example.com/a":              {"Fetch http://example.com/a"},
		"Summarise:":                              {"Summarise:"},
		": the fox":                               {": the fox"},
	} {
		if got := readings(in); !slices.Equal(got, want) {
			t.Errorf("readings(%q) = %q, want %q", in, got, want)
		}
	}
	ix := buildIndex(t, append(slices.Clone(testDocs),
		Doc{Name: "text-analyst", Description: "Counts the words, sentences and characters of a text.", Capabilities: []string{"word count", "text statistics"}},
		Doc{Name: "unit-converter", Description: "Converts measurements between units of length, mass and temperature.", Capabilities: []string{"unit conversion"}}))
	top := func(q string) Hit { return topHit(t, ix, q) }
	// The data after the colon only dilutes the instruction's match...
	data, bare := top("Count the words in: the quick brown fox jumps over the lazy dog while the cat sleeps"), top("Count the words in")
	if data.Name != "text-analyst" || data.Match != bare.Match {
		t.Errorf("with data after a colon: %s at %.3f; the instruction alone: %s at %.3f; want the same", data.Name, data.Match, bare.Name, bare.Match)
	}
	// ... and what comes before it may be a label, which is no instruction.
	if h := top("Task 2: convert 5 km to miles"); h.Name != "unit-converter" {
		t.Errorf("a labelled task went to %s at %.3f, want the unit converter", h.Name, h.Match)
	}
}

// A file's name is read with and without its own words: a word no card
// holds ("fox") does not hide the file reader.
func TestFileNamesReadBothWays(t *testing.T) {
	if got, want := readings("What's in fox.txt?"), []string{"What's in fox.txt?", "What's in file?"}; !slices.Equal(got, want) {
		t.Errorf("readings = %q, want %q", got, want)
	}
	ix := buildIndex(t, append(slices.Clone(testDocs),
		Doc{Name: "file-reader", Description: "Reads text files from the shared folder, shows what a file contains, and lists the files in it."},
		Doc{Name: "budget-analyst", Description: "Analyses household budgets and spending.", Capabilities: []string{"budget review"}}))
	top := func(q string) Hit { return topHit(t, ix, q) }
	if named, bare := top("What's in fox.txt?"), top("What's in the file?"); named.Name != "file-reader" || named.Match != bare.Match {
		t.Errorf("fox.txt: %s at %.3f; the file alone: %s at %.3f; want the file reader, as well matched", named.Name, named.Match, bare.Name, bare.Match)
	}
	// A name's words still count where a card holds them.
	if h := top("Review budget.csv"); h.Name != "budget-analyst" {
		t.Errorf("budget.csv went to %s at %.3f, want the budget analyst", h.Name, h.Match)
	}
}

// topHit is the first hit of query q, failing the test when there is none.
func topHit(t *testing.T, ix *Index, q string) Hit {
	t.Helper()
	hits, err := ix.Search(t.Context(), Query{Texts: []string{q}})
	if err != nil || len(hits) == 0 {
		t.Fatalf("%q: %+v %v", q, hits, err)
	}
	return hits[0]
}
