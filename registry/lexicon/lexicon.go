package lexicon

import (
	"bytes"
	_ "embed"
	"fmt"
	"math"
	"sync"

	"github.com/ioa-nats/ioa/registry/lexicon/internal/morph"
	"github.com/ioa-nats/ioa/registry/lexicon/internal/table"
)

//go:generate go run ./internal/gen -out wordnet.gob.gz

//go:embed wordnet.gob.gz
var embedded []byte

// Lexicon answers questions about English words. It is immutable and safe for
// concurrent use.
type Lexicon struct {
	t       *table.Table
	ids     map[string]int32
	exc     map[string]int32
	maxIDF  float64
	numVecs int

	meanOnce sync.Once
	unitOnce sync.Once
	unit     []float32
	mean     []float32
}

// Relation is a word related to another, with a weight in (0,1].
type Relation struct {
	Word   string
	Weight float32
}

var (
	defaultOnce sync.Once
	defaultLex  *Lexicon
	defaultErr  error
)

// Default returns the embedded lexicon, decoding it on first use (about half a
// second on a small machine). It panics if the embedded data is corrupt, which the
// package tests rule out.
func Default() *Lexicon {
	defaultOnce.Do(func() {
		var t *table.Table
		t, defaultErr = table.Read(bytes.NewReader(embedded))
		if defaultErr == nil {
			defaultLex, defaultErr = newLexicon(t)
		}
	})
	if defaultErr != nil {
		panic(fmt.Sprintf("lexicon: embedded data: %v", defaultErr))
	}
	return defaultLex
}

func newLexicon(t *table.Table) (*Lexicon, error) {
	n := len(t.Words)
	if len(t.POS) != n || len(t.DF) != n || len(t.RelStart) != n+1 ||
		len(t.Vectors) != len(t.Scales)*t.Dim || len(t.Scales) > n || len(t.ExcForm) != len(t.ExcBase) ||
		len(t.RelWord) != len(t.RelWeight) {
		return nil, fmt.Errorf("inconsistent table sizes")
	}
	l := &Lexicon{t: t, ids: make(map[string]int32, n), exc: make(map[string]int32, len(t.ExcForm)), numVecs: len(t.Scales)}
	for i, w := range t.Words {
		l.ids[w] = int32(i)
	}
	for i, f := range t.ExcForm {
		if b := t.ExcBase[i]; b >= 0 && int(b) < n {
			l.exc[f] = b
		}
	}
	for _, j := range t.RelWord {
		if j < 0 || int(j) >= n {
			return nil, fmt.Errorf("relation out of range")
		}
	}
	l.maxIDF = math.Log(float64(t.NumDocs+1) / 1)
	return l, nil
}

// Dim is the dimension of the word vectors.
func (l *Lexicon) Dim() int { return l.t.Dim }

// Words splits text into lowercase words of letters and digits.
func Words(text string) []string { return morph.Words(text) }

// IsStopword reports whether w (lowercase) is a function word.
func IsStopword(w string) bool { return morph.IsStopword(w) }

// Lemma returns the dictionary form of the lowercase word w ("analyzes" ->
// "analyze", "mice" -> "mouse"), or w itself when WordNet does not know it.
func (l *Lexicon) Lemma(w string) string {
	return morph.Lemma(w, l.pos, l.excBase)
}

func (l *Lexicon) pos(w string) morph.POS {
	if i, ok := l.ids[w]; ok {
		return morph.POS(l.t.POS[i])
	}
	return 0
}

func (l *Lexicon) excBase(w string) (string, bool) {
	if i, ok := l.exc[w]; ok {
		return l.t.Words[i], true
	}
	return "", false
}

// Known reports whether WordNet has the lowercase word (as a lemma or in a gloss).
func (l *Lexicon) Known(w string) bool {
	_, ok := l.ids[w]
	return ok
}

// IDF is the inverse document frequency of w over WordNet's synsets: high for
// specific words, low for generic ones; words WordNet lacks get the maximum.
func (l *Lexicon) IDF(w string) float64 {
	if i, ok := l.ids[w]; ok && l.t.DF[i] > 0 {
		return math.Log(float64(l.t.NumDocs+1) / float64(l.t.DF[i]+1))
	}
	return l.maxIDF
}

// HasVector reports whether w has a word vector.
func (l *Lexicon) HasVector(w string) bool {
	i, ok := l.ids[w]
	return ok && int(i) < l.numVecs
}

// AddVector adds weight times the unit vector of w to dst (len Dim) and
// reports whether w has a vector.
func (l *Lexicon) AddVector(dst []float32, w string, weight float32) bool {
	i, ok := l.ids[w]
	if !ok || int(i) >= l.numVecs {
		return false
	}
	d := l.t.Dim
	row := l.t.Vectors[int(i)*d : int(i)*d+d]
	s := weight * l.t.Scales[i]
	dst = dst[:d]
	for j, b := range row {
		dst[j] += s * float32(int8(b))
	}
	return true
}

// Related returns words related to the lemma w, strongest first: synonyms,
// derivations ("analyze" -> "analysis"), similar adjectives and hypernyms of
// its most frequent senses.
func (l *Lexicon) Related(w string) []Relation {
	i, ok := l.ids[w]
	if !ok {
		return nil
	}
	lo, hi := l.t.RelStart[i], l.t.RelStart[i+1]
	out := make([]Relation, 0, hi-lo)
	for k := lo; k < hi; k++ {
		out = append(out, Relation{Word: l.t.Words[l.t.RelWord[k]], Weight: float32(l.t.RelWeight[k]) / 255})
	}
	return out
}

// Similarity is the cosine of the word vectors of a and b, 0 if either lacks one.
func (l *Lexicon) Similarity(a, b string) float64 {
	if !l.HasVector(a) || !l.HasVector(b) {
		return 0
	}
	va := make([]float32, l.t.Dim)
	vb := make([]float32, l.t.Dim)
	l.AddVector(va, a, 1)
	l.AddVector(vb, b, 1)
	var dot, na, nb float64
	for j := range va {
		dot += float64(va[j]) * float64(vb[j])
		na += float64(va[j]) * float64(va[j])
		nb += float64(vb[j]) * float64(vb[j])
	}
	return dot / math.Sqrt(na*nb)
}

// Warm computes the tables Vector and Mean build on first use (the unit
// vectors of every word: hundreds of milliseconds), so that a server pays
// for them when it starts rather than in its first request.
func (l *Lexicon) Warm() {
	if l.numVecs > 0 {
		l.Vector(0)
	}
	l.Mean()
}

// Mean is the average of all word vectors: the direction every text shares,
// which embedders subtract so that similarity reflects content, not
// "being English" (the common-component removal of SIF embeddings).
func (l *Lexicon) Mean() []float32 {
	l.meanOnce.Do(func() {
		m := make([]float32, l.t.Dim)
		for i := 0; i < l.numVecs; i++ {
			l.AddVector(m, l.t.Words[i], 1/float32(l.numVecs))
		}
		l.mean = m
	})
	return l.mean
}

// VectorID returns the row of w's vector, for use with Vector.
func (l *Lexicon) VectorID(w string) (int32, bool) {
	i, ok := l.ids[w]
	if !ok || int(i) >= l.numVecs {
		return 0, false
	}
	return i, true
}

// Vector returns the unit vector of row id (see VectorID). The slice is
// shared and must not be modified.
func (l *Lexicon) Vector(id int32) []float32 {
	l.unitOnce.Do(func() {
		d := l.t.Dim
		u := make([]float32, l.numVecs*d)
		for i := 0; i < l.numVecs; i++ {
			row := u[i*d : (i+1)*d]
			l.AddVector(row, l.t.Words[i], 1)
			var n float64
			for _, x := range row {
				n += float64(x) * float64(x)
			}
			if n > 0 {
				inv := float32(1 / math.Sqrt(n))
				for j := range row {
					row[j] *= inv
				}
			}
		}
		l.unit = u
	})
	d := l.t.Dim
	return l.unit[int(id)*d : int(id)*d+d]
}
