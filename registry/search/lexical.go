package search

import (
	"math"
)

// The fields of an agent card that the lexical index keeps apart, so that a
// word in a capability can count for more than the same word in prose.
const (
	fieldName = iota
	fieldDesc
	fieldCaps
	fieldTags
	fieldLearned // the tasks the agent concluded (SetOutcomes)
	numFields
)

type posting struct {
	doc int32
	tf  [numFields]uint8
}

// lexIndex is an inverted index scored with BM25F. It is not safe for
// concurrent use; Index guards it.
type lexIndex struct {
	k1, b    float64
	weights  [numFields]float64
	terms    map[string]int32
	postings [][]posting
	lens     [][numFields]uint16 // by slot
	docTerms [][]int32           // by slot: distinct terms, for removal; nil when free
	n        int
	lenSum   [numFields]float64
}

func newLexIndex(weights [numFields]float64) *lexIndex {
	return &lexIndex{k1: 1.2, b: 0.75, weights: weights, terms: make(map[string]int32)}
}

// add indexes doc slot with the terms of each field.
func (x *lexIndex) add(slot int32, fields *[numFields][]term) {
	var lens [numFields]uint16
	terms := make([]int32, 0, 32) // non-nil: nil marks a free slot
	tfs := make(map[int32]*[numFields]uint8)
	for f, ts := range fields {
		lens[f] = uint16(min(len(ts), math.MaxUint16))
		x.lenSum[f] += float64(lens[f])
		for _, t := range ts {
			s := t.stem
			id, ok := x.terms[s]
			if !ok {
				id = int32(len(x.postings))
				x.terms[s] = id
				x.postings = append(x.postings, nil)
			}
			tf := tfs[id]
			if tf == nil {
				tf = new([numFields]uint8)
				tfs[id] = tf
				terms = append(terms, id)
			}
			if tf[f] < math.MaxUint8 {
				tf[f]++
			}
		}
	}
	for _, id := range terms {
		x.postings[id] = append(x.postings[id], posting{doc: slot, tf: *tfs[id]})
	}
	for int(slot) >= len(x.docTerms) {
		x.docTerms = append(x.docTerms, nil)
		x.lens = append(x.lens, [numFields]uint16{})
	}
	x.docTerms[slot] = terms
	x.lens[slot] = lens
	x.n++
}

// remove drops doc slot from the index.
func (x *lexIndex) remove(slot int32) {
	if int(slot) >= len(x.docTerms) || x.docTerms[slot] == nil {
		return
	}
	for f, l := range x.lens[slot] {
		x.lenSum[f] -= float64(l)
	}
	for _, id := range x.docTerms[slot] {
		ps := x.postings[id]
		for i := range ps {
			if ps[i].doc == slot {
				ps[i] = ps[len(ps)-1]
				x.postings[id] = ps[:len(ps)-1]
				break
			}
		}
	}
	x.docTerms[slot] = nil
	x.lens[slot] = [numFields]uint16{}
	x.n--
}

// queryTerm is a stem with the weight it carries in the query.
type queryTerm struct {
	stem   string
	weight float64
}

// score adds the BM25F score of every document matching qs into acc (indexed
// by slot) and returns the slots touched.
func (x *lexIndex) score(qs []queryTerm, acc []float64, touched []int32) []int32 {
	n := float64(x.n)
	if n == 0 {
		return touched
	}
	var avg [numFields]float64
	for f := range avg {
		avg[f] = max(x.lenSum[f]/n, 1)
	}
	for _, q := range qs {
		id, ok := x.terms[q.stem]
		if !ok {
			continue
		}
		ps := x.postings[id]
		if len(ps) == 0 {
			continue
		}
		df := float64(len(ps))
		idf := math.Log(1 + (n-df+0.5)/(df+0.5))
		for _, p := range ps {
			lens := &x.lens[p.doc]
			var tf float64
			for f := range numFields {
				if p.tf[f] == 0 {
					continue
				}
				norm := 1 - x.b + x.b*float64(lens[f])/avg[f]
				tf += x.weights[f] * float64(p.tf[f]) / norm
			}
			if acc[p.doc] == 0 {
				touched = append(touched, p.doc)
			}
			acc[p.doc] += q.weight * idf * tf * (x.k1 + 1) / (tf + x.k1)
		}
	}
	return touched
}
