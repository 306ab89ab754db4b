package search

import "math"

// What the index itself knows about words: how many cards use each. A word on
// most cards tells them apart no better than a stopword, whatever its weight
// in WordNet, and a word on no card can only be matched by meaning.

// df is the number of cards containing stem.
func (x *lexIndex) df(stem string) int {
	if id, ok := x.terms[stem]; ok {
		return len(x.postings[id])
	}
	return 0
}

// specificity is how well a word found on df of the cards tells them apart,
// in (0,1]: 1 for a word no card uses, falling towards 0 as more cards use
// it. It is BM25's IDF divided by its largest value, so it has the same range
// whatever the number of cards.
func (x *lexIndex) specificity(df int) float64 {
	n := float64(x.n)
	if n == 0 {
		return 1
	}
	d := min(float64(df), n)
	return math.Log(1+(n-d+0.5)/(d+0.5)) / math.Log(1+(n+0.5)/0.5)
}

// queryVector is the local embedding of a query's terms. A word that no card
// contains also brings in its WordNet relatives (synonyms, derivations,
// hypernyms), at the weight lexical expansion gives them: "hailstorm" finds
// no card, but its hypernym "storm" leads towards the weather cards.
func (ix *Index) queryVector(ts []term) []float32 {
	lex := ix.an.lex
	ew := float32(ix.opts.expansionWeight)
	v := make([]float32, lex.Dim())
	var known float32
	for _, t := range ts {
		w := float32(t.idf)
		if t.vec >= 0 {
			axpy(v, w, lex.Vector(t.vec))
			known += w
		} else {
			addHashed(v, t.stem, w*oovWeight)
		}
		if ew == 0 || ix.text.df(t.stem) > 0 {
			continue
		}
		for _, r := range lex.Related(t.lemma) {
			if id, ok := lex.VectorID(r.Word); ok {
				rw := w * ew * r.Weight
				axpy(v, rw, lex.Vector(id))
				known += rw
			}
		}
	}
	finishLocal(lex, v, known)
	return v
}
