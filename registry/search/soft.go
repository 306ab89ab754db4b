package search

import (
	"math"
	"slices"
)

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
// their stems: the words of the card's own fields first, own of them, then
// those learned from the tasks the agent concluded.
func vectorWords(fields *[numFields][]term) (ids []int32, stems []string, idfs []float32, own int) {
	seen := map[int32]bool{}
	add := func(ts []term) {
		for _, t := range ts {
			if t.vec >= 0 && !seen[t.vec] {
				seen[t.vec] = true
				ids = append(ids, t.vec)
				stems = append(stems, t.stem)
				idfs = append(idfs, float32(t.idf))
			}
		}
	}
	for f, ts := range fields {
		if f != fieldLearned {
			add(ts)
		}
	}
	own = len(ids)
	add(fields[fieldLearned])
	return ids, stems, idfs, own
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
// softBufs is softScores' scratch, kept between searches.
type softBufs struct {
	words   map[int32]int // card word -> its entry
	entries []wordSim
	sims    []float32 // each entry's cosines with the query words, side by side
}

// wordSim is what a search knows of one card word.
type wordSim struct {
	at   int     // where its cosines start in sims
	best float32 // the best of them
	spec float64 // its specificity in the index
}

func (ix *Index) softScores(ids []int32, qs []softTerm, oov []oovTerm, sb *softBufs) ([]float64, []float64) {
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
	// Each card word met is compared with the query words once per search:
	// its cosines, their best, and its specificity (a log) are kept in one
	// entry, the cosines side by side in one array.
	// The scratch comes from sb when given (a search's pooled buffers).
	if sb == nil {
		sb = &softBufs{}
	}
	if sb.words == nil {
		sb.words = make(map[int32]int, 8*len(ids))
	}
	words, entries, sims := sb.words, sb.entries[:0], sb.sims[:0]
	defer func() {
		clear(words)
		sb.entries, sb.sims = entries, sims
	}()
	specDenom := math.Log(1 + (float64(ix.text.n)+0.5)/0.5)
	entry := func(id int32, j int) *wordSim {
		sl := &ix.slots[id]
		w := sl.words[j]
		if k, ok := words[w]; ok {
			return &entries[k]
		}
		wv := lex.Vector(w)
		e := wordSim{at: len(sims), best: -1, spec: 1}
		for _, qv := range qvs {
			c := dot32(qv, wv)
			sims = append(sims, c)
			e.best = max(e.best, c)
		}
		if n := float64(ix.text.n); n > 0 {
			d := min(float64(len(ix.text.postings[sl.wterm[j]])), n)
			e.spec = math.Log(1+(n-d+0.5)/(d+0.5)) / specDenom
		}
		words[w] = len(entries)
		entries = append(entries, e)
		return &entries[len(entries)-1]
	}
	best := make([]float32, len(qs))
	for k, id := range ids {
		for i := range best {
			best[i] = -1
		}
		sl := &ix.slots[id]
		var c, cw float64   // the card-to-query direction
		var oc, ocw float64 // the same over the card's own words
		for j := range sl.words {
			e := entry(id, j)
			for i, x := range sims[e.at : e.at+len(qs)] {
				best[i] = max(best[i], x)
			}
			ww := float64(sl.widf[j]) * e.spec
			c += ww * max(0, float64(e.best)-softFloor)
			cw += ww
			if j < sl.own {
				oc += ww * max(0, float64(e.best)-softFloor)
				ocw += ww
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
		if cw > 0 {
			out[k] = (1-softBidir)*out[k] + softBidir*c/cw
		}
		// The match's card-to-query direction counts only the card's own
		// words: the words of the tasks an agent concluded would otherwise
		// dilute it, and every success would lower its match for the next
		// task until min_match refused it (the calculator's match for
		// "divide it by 2" fell from 0.49 to 0.21 after five goals).
		if ocw > 0 {
			match[k] = (1-softBidir)*match[k] + softBidir*oc/ocw
		}
	}
	return out, match
}
