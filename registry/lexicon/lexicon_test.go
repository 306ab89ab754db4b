package lexicon

import "testing"

func TestDefaultLoads(t *testing.T) {
	l := Default()
	if l.Dim() <= 0 {
		t.Fatalf("Dim = %d", l.Dim())
	}
	for _, tc := range []struct{ in, want string }{
		{"analyzes", "analyze"}, {"mice", "mouse"}, {"ran", "run"}, {"data", "data"}, {"zzqx", "zzqx"},
	} {
		if got := l.Lemma(tc.in); got != tc.want {
			t.Errorf("Lemma(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestSimilarityIsMeaningful(t *testing.T) {
	l := Default()
	for _, tc := range []struct{ a, b, unrelated string }{
		{"bleach", "chemical", "guitar"},
		{"cancel", "subscription", "volcano"},
		{"doctor", "medicine", "carpet"},
		{"invoice", "payment", "tornado"},
	} {
		rel, unrel := l.Similarity(tc.a, tc.b), l.Similarity(tc.a, tc.unrelated)
		t.Logf("%s~%s %.3f  %s~%s %.3f", tc.a, tc.b, rel, tc.a, tc.unrelated, unrel)
		if rel <= unrel {
			t.Errorf("sim(%s,%s)=%.3f not above sim(%s,%s)=%.3f", tc.a, tc.b, rel, tc.a, tc.unrelated, unrel)
		}
	}
}

func TestRelated(t *testing.T) {
	rs := Default().Related("analyze")
	t.Logf("analyze: %v", rs)
	found := false
	for _, r := range rs {
		if r.Weight <= 0 || r.Weight > 1 {
			t.Errorf("weight %v out of (0,1]", r.Weight)
		}
		if r.Word == "analysis" {
			found = true
		}
	}
	if !found {
		t.Errorf("Related(analyze) lacks analysis: %v", rs)
	}
}

// Warm builds the tables Vector and Mean would otherwise build in the
// first request that needs them, and they are the ones those return.
func TestWarm(t *testing.T) {
	l, err := newLexicon(Default().t)
	if err != nil {
		t.Fatal(err)
	}
	if l.unit != nil || l.mean != nil {
		t.Fatal("a new lexicon already has its tables")
	}
	l.Warm()
	if len(l.unit) != l.numVecs*l.Dim() || len(l.mean) != l.Dim() {
		t.Fatalf("after Warm: %d unit values, %d mean values; want %d and %d", len(l.unit), len(l.mean), l.numVecs*l.Dim(), l.Dim())
	}
	id, ok := l.VectorID("dog")
	if !ok {
		t.Fatal(`no vector for "dog"`)
	}
	if v := l.Vector(id); &v[0] != &l.unit[int(id)*l.Dim()] {
		t.Error("Vector after Warm does not use the warmed table")
	}
	if m := l.Mean(); &m[0] != &l.mean[0] {
		t.Error("Mean after Warm does not use the warmed table")
	}
}
