package search

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// EvalQuery is one task of an evaluation set with the agents that solve it.
type EvalQuery struct {
	ID         string   `json:"id"`
	Query      string   `json:"query"`
	Gold       string   `json:"gold"`
	AlsoOK     []string `json:"also_ok"`
	Difficulty string   `json:"difficulty"`
}

// Metrics summarise the ranks of the acceptable agents over N queries.
type Metrics struct {
	N        int
	Top1     float64 // share of queries with an acceptable agent first
	Top10    float64 // share with one in the first ten
	MeanRank float64 // lower is better; an agent not returned counts numAgents+1
	MRR      float64 // mean reciprocal rank; not returned counts 0
}

// Report holds metrics overall and per difficulty.
type Report struct {
	Overall      Metrics
	ByDifficulty map[string]Metrics
}

// String renders the report as a small table.
func (r Report) String() string {
	var b strings.Builder
	row := func(name string, m Metrics) {
		fmt.Fprintf(&b, "%-12s n=%-4d top1=%.3f top10=%.3f MR=%.1f MRR=%.3f\n", name, m.N, m.Top1, m.Top10, m.MeanRank, m.MRR)
	}
	row("overall", r.Overall)
	keys := make([]string, 0, len(r.ByDifficulty))
	for k := range r.ByDifficulty {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		row(k, r.ByDifficulty[k])
	}
	return b.String()
}

// Evaluate ranks every query with rank and scores the result: an agent's rank
// is the best 1-based position of Gold or any AlsoOK.
func Evaluate(queries []EvalQuery, numAgents int, rank func(q EvalQuery) ([]string, error)) (Report, error) {
	type sums struct {
		n                        int
		top1, top10, rank, recip float64
	}
	all := &sums{}
	by := make(map[string]*sums)
	for _, q := range queries {
		names, err := rank(q)
		if err != nil {
			return Report{}, fmt.Errorf("search: evaluate %s: %w", q.ID, err)
		}
		r := numAgents + 1
		for i, name := range names {
			if name == q.Gold || slices.Contains(q.AlsoOK, name) {
				r = i + 1
				break
			}
		}
		found := r <= len(names)
		for _, s := range []*sums{all, by[q.Difficulty]} {
			if s == nil {
				s = &sums{}
				by[q.Difficulty] = s
			}
			s.n++
			if r == 1 {
				s.top1++
			}
			if r <= 10 {
				s.top10++
			}
			s.rank += float64(r)
			if found {
				s.recip += 1 / float64(r)
			}
		}
	}
	metrics := func(s *sums) Metrics {
		if s.n == 0 {
			return Metrics{}
		}
		n := float64(s.n)
		return Metrics{N: s.n, Top1: s.top1 / n, Top10: s.top10 / n, MeanRank: s.rank / n, MRR: s.recip / n}
	}
	rep := Report{Overall: metrics(all), ByDifficulty: make(map[string]Metrics, len(by))}
	for k, s := range by {
		rep.ByDifficulty[k] = metrics(s)
	}
	return rep, nil
}

// agentCard is the jsonl form of an agent card.
type agentCard struct {
	Name         string   `json:"name"`
	Description  string   `json:"description"`
	Capabilities []string `json:"capabilities"`
	Type         string   `json:"type"`
	Tags         []string `json:"tags"`
}

// LoadAgents reads agent cards, one JSON object per line.
func LoadAgents(r io.Reader) ([]Doc, error) {
	var docs []Doc
	err := eachJSONLine(r, func(line []byte) error {
		var c agentCard
		if err := json.Unmarshal(line, &c); err != nil {
			return err
		}
		if c.Name == "" {
			return ErrInvalidDoc
		}
		docs = append(docs, Doc{Name: c.Name, Description: c.Description, Type: c.Type, Capabilities: c.Capabilities, Tags: c.Tags})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("search: load agents: %w", err)
	}
	return docs, nil
}

// LoadQueries reads evaluation queries, one JSON object per line.
func LoadQueries(r io.Reader) ([]EvalQuery, error) {
	var qs []EvalQuery
	err := eachJSONLine(r, func(line []byte) error {
		var q EvalQuery
		if err := json.Unmarshal(line, &q); err != nil {
			return err
		}
		if q.Gold == "" {
			return errors.New("query without gold")
		}
		qs = append(qs, q)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("search: load queries: %w", err)
	}
	return qs, nil
}

func eachJSONLine(r io.Reader, fn func([]byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if len(strings.TrimSpace(string(line))) == 0 {
			continue
		}
		if err := fn(line); err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
	}
	return sc.Err()
}

// BM25Baseline is the plain reference ranker of the evaluation data: BM25
// (k1=1.2, b=0.75) over lowercase words with stopwords removed and no
// stemming, a document being description, capabilities and tags.
type BM25Baseline struct {
	names []string
	tfs   []map[string]int
	lens  []float64
	df    map[string]int
	avg   float64
}

// NewBM25Baseline indexes docs.
func NewBM25Baseline(docs []Doc) *BM25Baseline {
	b := &BM25Baseline{df: make(map[string]int)}
	var sum float64
	for _, d := range docs {
		words := baselineWords(d.Description + " " + strings.Join(d.Capabilities, " ") + " " + strings.Join(d.Tags, " "))
		tf := make(map[string]int)
		for _, w := range words {
			if tf[w] == 0 {
				b.df[w]++
			}
			tf[w]++
		}
		b.names = append(b.names, d.Name)
		b.tfs = append(b.tfs, tf)
		b.lens = append(b.lens, float64(len(words)))
		sum += float64(len(words))
	}
	if len(docs) > 0 {
		b.avg = sum / float64(len(docs))
	}
	return b
}

func baselineWords(text string) []string {
	var out []string
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r > 127)
	}) {
		if !isBaselineStopword(w) {
			out = append(out, w)
		}
	}
	return out
}

// Rank returns the names of all documents, best match for query first.
func (b *BM25Baseline) Rank(query string) []string {
	const k1, bb = 1.2, 0.75
	n := float64(len(b.names))
	scores := make([]float64, len(b.names))
	for _, w := range baselineWords(query) {
		df := float64(b.df[w])
		if df == 0 {
			continue
		}
		idf := math.Log(1 + (n-df+0.5)/(df+0.5))
		for i, tf := range b.tfs {
			if f := float64(tf[w]); f > 0 {
				scores[i] += idf * f * (k1 + 1) / (f + k1*(1-bb+bb*b.lens[i]/b.avg))
			}
		}
	}
	// Every document is ranked, unmatched ones last, as the reference does.
	idx := make([]int, len(scores))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(x, y int) int {
		if scores[x] != scores[y] {
			if scores[x] > scores[y] {
				return -1
			}
			return 1
		}
		return strings.Compare(b.names[x], b.names[y])
	})
	out := make([]string, len(idx))
	for i, j := range idx {
		out[i] = b.names[j]
	}
	return out
}
