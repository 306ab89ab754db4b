package search

import "slices"

// Soft matching: each query word is matched to its most similar word of the
// card in WordNet vector space, so "cancel" meets "churn" even when the
// averaged card vector is dominated by other words. It scores the candidates
// of the two views only, which keeps its cost independent of the corpus size.

type softTerm struct {
	id     int32
	weight float64
}

// oovTerm is a query word without a word vector (a name, jargon such as
// "rot13") that some card uses verbatim: the match counts it as covered by
// the cards that have it. Words no card uses (numbers, file names) are left
// out, as they say nothing about who can do the task.
type oovTerm struct {
	term   int32 // lexical term id
	weight float64
}

func (ix *Index) oovTerms(ts []term) []oovTerm {
	seen := map[int32]bool{}
	var out []oovTerm
	for _, t := range ts {
		if t.vec >= 0 {
			continue
		}
		id, ok := ix.text.terms[t.stem]
		if !ok || seen[id] || len(ix.text.postings[id]) == 0 {
			continue
		}
		seen[id] = true
		out = append(out, oovTerm{term: id, weight: t.idf * ix.text.specificity(len(ix.text.postings[id]))})
	}
	return out
}

const (
	// softWeight is the share of the soft-match signal in the fused score.
	softWeight = 0.4
	// softFloor is the cosine below which two words count as unrelated.
	softFloor = 0.1
	// softBidir is the share of the card-to-query direction: a card most of
	// whose words relate to the task is a better fit than one that merely
	// mentions them.
	softBidir = 0.5
)

// vectorWords returns the distinct word-vector rows of a card's terms with
// their stems.
func vectorWords(fields *[numFields][]term) ([]int32, []string, []float32) {
	seen := map[int32]bool{}
	var ids []int32
	var stems []string
	var idfs []float32
	for _, ts := range fields {
		for _, t := range ts {
			if t.vec >= 0 && !seen[t.vec] {
				seen[t.vec] = true
				ids = append(ids, t.vec)
				stems = append(stems, t.stem)
				idfs = append(idfs, float32(t.idf))
			}
		}
	}
	return ids, stems, idfs
}

func (ix *Index) softTerms(ts []term) []softTerm {
	seen := map[int32]bool{}
	var out []softTerm
	for _, t := range ts {
		if t.vec < 0 || seen[t.vec] {
			continue
		}
		seen[t.vec] = true
		out = append(out, softTerm{id: t.vec, weight: t.idf * ix.text.specificity(ix.text.df(t.stem))})
	}
	return out
}

// softScores returns, for each card in ids, the IDF-weighted mean over the
// query words of their best cosine with a word of the card, mixed with the
// same in the card-to-query direction. Words are weighted by their WordNet
// IDF times their specificity in the index, so that words most cards share
// ("data", "help") neither make a task look like every card nor a card look
// like every task. The second slice is the same with the query words that
// have no vector (oov) counted too, as found in the card verbatim or not:
// the card's absolute match (Hit.Match).
func (ix *Index) softScores(ids []int32, qs []softTerm, oov []oovTerm) ([]float64, []float64) {
	out := make([]float64, len(ids))
	match := make([]float64, len(ids))
	if len(qs) == 0 && len(oov) == 0 {
		return out, match
	}
	var wsum, osum float64
	for _, q := range qs {
		wsum += q.weight
	}
	for _, o := range oov {
		osum += o.weight
	}
	lex := ix.an.lex
	qvs := make([][]float32, len(qs))
	for i, q := range qs {
		qvs[i] = lex.Vector(q.id)
	}
	sims := make(map[int32][]float32) // card word -> cosine with each query word
	best := make([]float32, len(qs))
	for k, id := range ids {
		for i := range best {
			best[i] = -1
		}
		for _, w := range ix.slots[id].words {
			ws, ok := sims[w]
			if !ok {
				wv := lex.Vector(w)
				ws = make([]float32, len(qs))
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
			s += q.weight * max(0, float64(best[i])-softFloor)
		}
		var o float64
		for _, q := range oov {
			if slices.Contains(ix.text.docTerms[id], q.term) {
				o += q.weight * (1 - softFloor)
			}
		}
		if wsum > 0 {
			out[k] = s / wsum
		}
		match[k] = (s + o) / (wsum + osum)
		if len(ix.slots[id].words) > 0 {
			var c, cw float64
			sl := &ix.slots[id]
			for j, w := range sl.words {
				var m float32 = -1
				for _, x := range sims[w] {
					m = max(m, x)
				}
				ww := float64(sl.widf[j]) * ix.text.specificity(len(ix.text.postings[sl.wterm[j]]))
				c += ww * max(0, float64(m)-softFloor)
				cw += ww
			}
			if cw > 0 {
				out[k] = (1-softBidir)*out[k] + softBidir*c/cw
				match[k] = (1-softBidir)*match[k] + softBidir*c/cw
			}
		}
	}
	return out, match
}
