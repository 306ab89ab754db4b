package search

import (
	"cmp"
	"slices"
)

// Soft matching: each query word is matched to its most similar word of the
// card in WordNet vector space, so "cancel" meets "churn" even when the
// averaged card vector is dominated by other words. It reranks the fused
// candidates only, which keeps its cost independent of the corpus size.

type softTerm struct {
	id     int32
	weight float64
}

// softWeight is the share of the soft-match signal in the final score.
var softWeight = 0.4

// softCandidates is how many of the best fused candidates are reranked.
const softCandidates = 50

func (ix *Index) vectorWords(text string) []int32 {
	var ids []int32
	for _, t := range analyze(ix.lex, text) {
		if id, ok := ix.lex.VectorID(t.lemma); ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

func (ix *Index) softTerms(text string) []softTerm {
	seen := map[int32]bool{}
	var out []softTerm
	for _, t := range analyze(ix.lex, text) {
		id, ok := ix.lex.VectorID(t.lemma)
		if !ok || seen[id] {
			continue
		}
		seen[id] = true
		out = append(out, softTerm{id: id, weight: ix.lex.IDF(t.lemma)})
	}
	return out
}

// softRerank mixes the soft-match score, scaled by its maximum over the
// candidates, into scores.
func (ix *Index) softRerank(scores map[int32]float64, qs []softTerm) {
	if softWeight == 0 || len(qs) == 0 || len(scores) == 0 {
		return
	}
	var wsum float64
	for _, q := range qs {
		wsum += q.weight
	}
	qvs := make([][]float32, len(qs))
	for i, q := range qs {
		qvs[i] = ix.lex.Vector(q.id)
	}
	sims := make(map[int32][]float64) // card word -> cosine with each query word
	best := make([]float64, len(qs))
	// Only the best softCandidates by fused score are reranked; the rest keep
	// their order below them. This bounds the cost per query.
	ids := make([]int32, 0, len(scores))
	for id := range scores {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b int32) int {
		if c := cmp.Compare(scores[b], scores[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	if len(ids) > softCandidates {
		ids = ids[:softCandidates]
	}
	soft := make(map[int32]float64, len(ids))
	var maxSoft float64
	for _, id := range ids {
		clear(best)
		for _, w := range ix.slots[id].words {
			ws, ok := sims[w]
			if !ok {
				wv := ix.lex.Vector(w)
				ws = make([]float64, len(qs))
				for i, qv := range qvs {
					ws[i] = dot32(qv, wv)
				}
				sims[w] = ws
			}
			for i, c := range ws {
				best[i] = max(best[i], c)
			}
		}
		var s float64
		for i, q := range qs {
			s += q.weight * best[i]
		}
		s /= wsum
		soft[id] = s
		maxSoft = max(maxSoft, s)
	}
	for id, s := range scores {
		var n float64
		if maxSoft > 0 {
			n = soft[id] / maxSoft
		}
		scores[id] = (1-softWeight)*s + softWeight*n
	}
}
