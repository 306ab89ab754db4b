package search

import (
	"slices"
	"testing"
)

// Type and tags filter in the vector store (chromem-go where-filters) and in
// the lexical view alike.
func TestSearchTypeAndTags(t *testing.T) {
	ix, err := NewIndex(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []Doc{
		{Name: "fr-tool", Type: "tool", Tags: []string{"French", "text"}, Description: "Translates text into French."},
		{Name: "fr-human", Type: "human", Tags: []string{"french"}, Description: "A person who translates text into French."},
		{Name: "de-tool", Type: "tool", Tags: []string{"german"}, Description: "Translates text into German."},
	} {
		if err := ix.Upsert(t.Context(), d); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		typ  string
		tags []string
		want []string
	}{
		{"", nil, []string{"de-tool", "fr-human", "fr-tool"}},
		{"tool", nil, []string{"de-tool", "fr-tool"}},
		{"", []string{"FRENCH"}, []string{"fr-human", "fr-tool"}},
		{"tool", []string{"french", " "}, []string{"fr-tool"}},
		{"tool", []string{"french", "text"}, []string{"fr-tool"}},
		{"human", []string{"german"}, nil},
	} {
		hits, err := ix.Search(t.Context(), Query{Texts: []string{"translate a letter into French"}, Type: c.typ, Tags: c.tags})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, h := range hits {
			got = append(got, h.Name)
		}
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("type %q tags %q: %v, want %v", c.typ, c.tags, got, c.want)
		}
	}
}

// Above probeDocs cards a query asks chromem-go about the shards nearest to
// it only. On the cards of both worlds (500), with shards of at most 32 and
// probes of 128 cards (a quarter), the dense candidates of the dev tasks are
// compared with those of asking every shard.
func TestShardRecall(t *testing.T) {
	defer func(m, p int) { maxShard, probeDocs = m, p }(maxShard, probeDocs)
	maxShard, probeDocs = 32, 128
	dev, qs, _ := loadDev(t)
	test, _, _ := loadTest(t)
	ix := buildIndex(t, append(dev, test...))
	if n := len(ix.vec.shards); n < 16 {
		t.Fatalf("%d shards of at most %d for %d cards", n, maxShard, ix.Len())
	}
	for _, sh := range ix.vec.shards {
		if len(sh.live) > maxShard || sh.coll.Count() != len(sh.live) {
			t.Fatalf("a shard holds %d cards (%d in its collection), at most %d", len(sh.live), sh.coll.Count(), maxShard)
		}
	}
	var found, total float64
	for _, q := range qs {
		p, _, err := ix.prepare(t.Context(), q.Query)
		if err != nil {
			t.Fatal(err)
		}
		v := ix.queryVector(p.ts)
		axpy(v, -1, ix.vec.mean())
		approx, err := ix.vec.nearestCards(t.Context(), v, minPool, nil, ix.byName)
		if err != nil {
			t.Fatal(err)
		}
		probeDocs = 1 << 30
		exact, err := ix.vec.nearestCards(t.Context(), v, minPool, nil, ix.byName)
		probeDocs = 128
		if err != nil {
			t.Fatal(err)
		}
		in := map[int32]bool{}
		for _, c := range approx {
			in[c.id] = true
		}
		for _, c := range exact {
			if in[c.id] {
				found++
			}
			total++
		}
	}
	recall := found / total
	t.Logf("recall of the %d nearest cards probing 128 of %d cards: %.3f", minPool, ix.Len(), recall)
	if recall < 0.5 {
		t.Errorf("recall %.3f", recall)
	}
	// What it costs the ranking: dev tasks among both worlds' cards.
	sub := qs[:min(len(qs), 120)]
	probed := evalIndex(t, ix, sub, ix.Len())
	probeDocs = 1 << 30
	exact := evalIndex(t, ix, sub, ix.Len())
	t.Logf("%d dev tasks among %d cards: MRR %.3f probing a quarter, %.3f asking every shard", len(sub), ix.Len(), probed.Overall.MRR, exact.Overall.MRR)
	if probed.Overall.MRR < exact.Overall.MRR-0.05 {
		t.Errorf("probing loses %.3f of MRR", exact.Overall.MRR-probed.Overall.MRR)
	}
}
