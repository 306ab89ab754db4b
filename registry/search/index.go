package search

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/philippgille/chromem-go"

	"github.com/ioa-nats/ioa/registry/lexicon"
)

// Doc is the searchable part of an agent card.
type Doc struct {
	Name         string
	Description  string
	Type         string
	Capabilities []string
	Tags         []string
}

// Query asks for the agents that best fit a need.
type Query struct {
	// Texts are several angles of one need (e.g. the task and a rephrasing);
	// an agent's score is its mean score over them.
	Texts []string
	// Limit caps the number of hits; zero or less means DefaultLimit.
	Limit int
	// Keep, when set, drops every agent for which it returns false; Search
	// still returns up to Limit hits if that many agents pass.
	Keep func(name string) bool
}

// Hit is one ranked agent. Score is in [0,1], higher is better.
type Hit struct {
	Name  string
	Score float64
}

// DefaultLimit is the number of hits returned when Query.Limit is not set.
const DefaultLimit = 10

var (
	// ErrInvalidDoc is returned by Upsert for a document without a name.
	ErrInvalidDoc = errors.New("search: document has no name")
	// ErrNotFound is returned by Delete for an unknown name.
	ErrNotFound = errors.New("search: no such document")
	// ErrEmptyQuery is returned by Search when no query text has content.
	ErrEmptyQuery = errors.New("search: empty query")
)

// Option configures an Index.
type Option func(*options) error

type options struct {
	denseWeight     float64
	expansionWeight float64
	fieldWeights    [numFields]float64
}

func defaultOptions() options {
	return options{
		denseWeight:     0.5,
		expansionWeight: 0.5,
		fieldWeights:    [numFields]float64{fieldName: 1, fieldDesc: 1, fieldCaps: 1.5, fieldTags: 1.5},
	}
}

// WithDenseWeight sets the share, in [0,1], of the vector similarity in the
// fused score; the lexical score gets the rest. The default is 0.5.
func WithDenseWeight(w float64) Option {
	return func(o *options) error {
		if !(w >= 0 && w <= 1) {
			return fmt.Errorf("search: dense weight %v outside [0,1]", w)
		}
		o.denseWeight = w
		return nil
	}
}

// WithExpansionWeight sets how much, in [0,1], a WordNet relative of a query
// word counts relative to the word itself in lexical matching (0 disables
// expansion). The default is 0.5.
func WithExpansionWeight(w float64) Option {
	return func(o *options) error {
		if !(w >= 0 && w <= 1) {
			return fmt.Errorf("search: expansion weight %v outside [0,1]", w)
		}
		o.expansionWeight = w
		return nil
	}
}

// Index is a hybrid capability index: a chromem-go collection of normalised
// embeddings fused with a BM25F inverted index over stemmed card fields. It
// is safe for concurrent use.
type Index struct {
	embed Embedder
	lex   *lexicon.Lexicon
	opts  options

	mu     sync.RWMutex
	coll   *chromem.Collection
	text   *lexIndex
	slots  []slot // by slot id; name == "" when free
	free   []int32
	byName map[string]int32

	accPool sync.Pool // *[]float64 sized to len(slots)
}

type slot struct {
	name  string
	vec   []float32 // shared with the chromem document
	words []int32   // distinct lexicon vector ids of the card's words
}

// NewIndex returns an empty index that embeds with e (nil means
// LocalEmbedder()).
func NewIndex(e Embedder, opts ...Option) (*Index, error) {
	o := defaultOptions()
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if e == nil {
		e = LocalEmbedder()
	} else {
		e = normalized(e)
	}
	coll, err := chromem.NewDB().CreateCollection("agents", nil, chromem.EmbeddingFunc(e))
	if err != nil {
		return nil, fmt.Errorf("search: create collection: %w", err)
	}
	return &Index{
		embed:  e,
		lex:    lexicon.Default(),
		opts:   o,
		coll:   coll,
		text:   newLexIndex(o.fieldWeights),
		byName: make(map[string]int32),
	}, nil
}

// Len is the number of documents in the index.
func (ix *Index) Len() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return len(ix.byName)
}

// embedText is what the embedder sees of a card: capabilities and tags are
// repeated because they name the skill most directly.
func embedText(d Doc) string {
	caps, tags := strings.Join(d.Capabilities, ". "), strings.Join(d.Tags, ". ")
	return strings.Join([]string{nameText(d.Name), d.Description, caps, tags, caps, tags}, ". ")
}

func (ix *Index) stems(text string) []string {
	ts := analyze(ix.lex, text)
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.stem
	}
	return out
}

// Upsert adds d, replacing any document with the same Name.
func (ix *Index) Upsert(ctx context.Context, d Doc) error {
	if strings.TrimSpace(d.Name) == "" {
		return ErrInvalidDoc
	}
	vec, err := ix.embed(ctx, embedText(d))
	if err != nil {
		return embedErr(err)
	}
	if isZero(vec) {
		// A card with no content words: give it a vector of its own so the
		// cosine stays defined.
		addHashed(vec, d.Name, 1)
		normalize(vec)
	}
	var fields [numFields][]string
	fields[fieldName] = ix.stems(nameText(d.Name))
	fields[fieldDesc] = ix.stems(d.Description)
	fields[fieldCaps] = ix.stems(strings.Join(d.Capabilities, " . "))
	fields[fieldTags] = ix.stems(strings.Join(d.Tags, " . "))
	words := ix.vectorWords(embedText(d))

	ix.mu.Lock()
	defer ix.mu.Unlock()
	if err := ix.coll.AddDocument(ctx, chromem.Document{ID: d.Name, Embedding: vec}); err != nil {
		return fmt.Errorf("search: upsert %q: %w", d.Name, err)
	}
	id, ok := ix.byName[d.Name]
	if ok {
		ix.text.remove(id)
	} else if n := len(ix.free); n > 0 {
		id, ix.free = ix.free[n-1], ix.free[:n-1]
	} else {
		id = int32(len(ix.slots))
		ix.slots = append(ix.slots, slot{})
	}
	ix.slots[id] = slot{name: d.Name, vec: vec, words: words}
	ix.byName[d.Name] = id
	ix.text.add(id, fields)
	return nil
}

// Delete removes the document called name; it returns ErrNotFound if there is none.
func (ix *Index) Delete(ctx context.Context, name string) error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	id, ok := ix.byName[name]
	if !ok {
		return ErrNotFound
	}
	if err := ix.coll.Delete(ctx, nil, nil, name); err != nil {
		return fmt.Errorf("search: delete %q: %w", name, err)
	}
	ix.text.remove(id)
	ix.slots[id] = slot{}
	ix.free = append(ix.free, id)
	delete(ix.byName, name)
	return nil
}

func isZero(v []float32) bool {
	for _, x := range v {
		if x != 0 {
			return false
		}
	}
	return true
}

// denseFloorRank is the rank whose similarity maps to a dense score of 0: the
// vector side only says how much better than the 50th-nearest a card is,
// which keeps its scale comparable across embedders and corpora.
const denseFloorRank = 50

// Search ranks the documents for q.
func (ix *Index) Search(ctx context.Context, q Query) ([]Hit, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	type prepared struct {
		terms []queryTerm
		vec   []float32
		soft  []softTerm
	}
	var preps []prepared
	for _, t := range q.Texts {
		terms := ix.queryTerms(t)
		if len(terms) == 0 && strings.TrimSpace(t) == "" {
			continue
		}
		vec, err := ix.embed(ctx, t)
		if err != nil {
			return nil, embedErr(err)
		}
		preps = append(preps, prepared{terms: terms, vec: vec, soft: ix.softTerms(t)})
	}
	if len(preps) == 0 {
		return nil, ErrEmptyQuery
	}

	ix.mu.RLock()
	defer ix.mu.RUnlock()
	n := len(ix.byName)
	if n == 0 {
		return nil, nil
	}
	keep := func(id int32) bool { return q.Keep == nil || q.Keep(ix.slots[id].name) }

	total := make(map[int32]float64)
	acc := ix.getAcc()
	defer ix.putAcc(acc)
	for _, p := range preps {
		cands, err := ix.searchOne(ctx, p.terms, p.vec, limit, n, keep, *acc)
		if err != nil {
			return nil, err
		}
		ix.softRerank(cands, p.soft)
		for id, s := range cands {
			total[id] += s / float64(len(preps))
		}
	}

	hits := make([]Hit, 0, len(total))
	for id, s := range total {
		hits = append(hits, Hit{Name: ix.slots[id].name, Score: min(1, max(0, s))})
	}
	slices.SortFunc(hits, func(a, b Hit) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	if len(hits) > limit {
		hits = hits[:limit]
	}
	return hits, nil
}

// searchOne scores the candidates for one query text: the nearest vectors
// and the best lexical matches, each signal scaled to [0,1] before fusion.
func (ix *Index) searchOne(ctx context.Context, terms []queryTerm, vec []float32, limit, n int, keep func(int32) bool, acc []float64) (map[int32]float64, error) {
	wd := ix.opts.denseWeight
	touched := ix.text.score(terms, acc, nil)
	defer func() {
		for _, id := range touched {
			acc[id] = 0
		}
	}()
	var maxLex float64
	for _, id := range touched {
		maxLex = max(maxLex, acc[id])
	}
	lexNorm := func(id int32) float64 {
		if maxLex == 0 {
			return 0
		}
		return acc[id] / maxLex
	}
	want := max(4*limit, denseFloorRank)
	lexTop := make([]int32, 0, len(touched))
	for _, id := range touched {
		if keep(id) {
			lexTop = append(lexTop, id)
		}
	}
	slices.SortFunc(lexTop, func(a, b int32) int { return cmp.Compare(acc[b], acc[a]) })
	if len(lexTop) > want {
		lexTop = lexTop[:want]
	}

	scores := make(map[int32]float64, 2*want)
	var top, floor float64
	dense := func(sim float64) float64 {
		if top <= floor {
			if sim >= top {
				return 1
			}
			return 0
		}
		return min(1, max(0, (sim-floor)/(top-floor)))
	}
	denseOn := wd > 0 && !isZero(vec)
	if denseOn {
		for fetch := min(n, want); ; fetch = min(n, fetch*4) {
			res, err := ix.coll.QueryEmbedding(ctx, vec, fetch, nil, nil)
			if err != nil {
				return nil, fmt.Errorf("search: dense query: %w", err)
			}
			if len(res) == 0 {
				break
			}
			top = float64(res[0].Similarity)
			floor = float64(res[min(denseFloorRank, len(res))-1].Similarity)
			kept := 0
			for _, r := range res {
				id, ok := ix.byName[r.ID]
				if !ok || !keep(id) {
					continue
				}
				kept++
				scores[id] = wd*dense(float64(r.Similarity)) + (1-wd)*lexNorm(id)
			}
			if kept >= limit || fetch >= n {
				break
			}
		}
	}
	score := func(id int32) float64 {
		if !denseOn {
			return (1 - wd) * lexNorm(id)
		}
		return wd*dense(dot32(vec, ix.slots[id].vec)) + (1-wd)*lexNorm(id)
	}
	for _, id := range lexTop {
		if _, ok := scores[id]; !ok {
			scores[id] = score(id)
		}
	}
	// Too few candidates passed Keep: fall back to scanning for the rest.
	for id := 0; len(scores) < limit && id < len(ix.slots); id++ {
		if ix.slots[id].name == "" || !keep(int32(id)) {
			continue
		}
		if _, ok := scores[int32(id)]; !ok {
			scores[int32(id)] = score(int32(id))
		}
	}
	return scores, nil
}

func dot32(a, b []float32) float64 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return float64(s0 + s1 + s2 + s3)
}

func (ix *Index) getAcc() *[]float64 {
	p, _ := ix.accPool.Get().(*[]float64)
	if p == nil || len(*p) < len(ix.slots) {
		s := make([]float64, len(ix.slots))
		p = &s
	}
	return p
}

func (ix *Index) putAcc(p *[]float64) { ix.accPool.Put(p) }

// queryTerms turns a query text into weighted stems: the text's own words,
// plus their WordNet relatives at a reduced weight.
func (ix *Index) queryTerms(text string) []queryTerm {
	ts := analyze(ix.lex, text)
	weights := make(map[string]float64, len(ts))
	order := make([]string, 0, len(ts))
	add := func(s string, w float64) {
		old, ok := weights[s]
		if !ok {
			order = append(order, s)
		}
		weights[s] = max(old, w)
	}
	for _, t := range ts {
		add(t.stem, 1)
	}
	if ew := ix.opts.expansionWeight; ew > 0 {
		for _, t := range ts {
			for _, r := range ix.lex.Related(t.lemma) {
				add(stem(r.Word), ew*float64(r.Weight))
			}
		}
	}
	out := make([]queryTerm, len(order))
	for i, s := range order {
		out[i] = queryTerm{stem: s, weight: weights[s]}
	}
	return out
}
