package search

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
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
	// Type, when set, keeps only the cards of that type.
	Type string
	// Tags, when set, keeps only the cards that have every one of them
	// (compared without regard to case).
	Tags []string
	// Keep, when set, drops every agent for which it returns false; Search
	// still returns up to Limit hits if that many agents pass.
	Keep func(name string) bool
}

// Hit is one ranked agent. Score is in [0,1], higher is better.
type Hit struct {
	Name  string
	Score float64
	// Match says, on an absolute scale in [0,1], how well the card covers
	// the task: the soft word-by-word match of task and card (each task word
	// against its closest card word and back, weighted by how specific the
	// words are). Score only ranks the cards of one query (the best is
	// always near 1); Match can be compared with a threshold to decide that
	// no card fits at all.
	Match float64
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
	// ErrDimension is returned when an embedder's vectors change length.
	ErrDimension = errors.New("search: embedding dimension mismatch")
)

// Option configures an Index.
type Option func(*options) error

type options struct {
	denseWeight     float64
	expansionWeight float64
	fieldWeights    [numFields]float64
	persistDir      string
	embedderID      string
}

func defaultOptions() options {
	return options{
		denseWeight:     0.6,
		expansionWeight: 0.5,
		fieldWeights:    [numFields]float64{fieldName: 1, fieldDesc: 1, fieldCaps: 1.5, fieldTags: 1.5, fieldLearned: learnedLexWeight},
	}
}

// WithDenseWeight sets the share, in [0,1], of the vector similarity in the
// fused score; the lexical score gets the rest. The default is 0.6.
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

// WithPersistDir keeps the card vectors on disk in dir (chromem-go's
// persistent store), so that a restarted index re-uses the vectors of an
// external embedder instead of asking for them again. embedderID names the
// embedder (kind, address, model): a vector is re-used only for the same
// card text and the same embedderID. The built-in embedder's vectors are
// cheap to recompute, so with it the option keeps nothing on disk.
func WithPersistDir(dir, embedderID string) Option {
	return func(o *options) error {
		if strings.TrimSpace(dir) == "" {
			return errors.New("search: persist dir is empty")
		}
		o.persistDir, o.embedderID = dir, embedderID
		return nil
	}
}

// Index is a hybrid capability index: card vectors in chromem-go
// collections fused with a BM25F inverted index over stemmed card fields. It
// is safe for concurrent use.
type Index struct {
	embed Embedder
	local bool // embed is the built-in LocalEmbedder, fed analysed fields
	an    *analyzer
	opts  options

	mu  sync.RWMutex
	vec *vectors // the dense view, in chromem-go
	// learned holds the tasks each agent concluded (SetOutcomes), which
	// extend its card.
	learned map[string][]string
	text    *lexIndex
	slots   []slot // by slot id; name == "" when free
	free    []int32
	byName  map[string]int32

	bufs sync.Pool // *searchBufs
}

type slot struct {
	name  string
	doc   Doc // as given to Upsert
	typ   string
	tags  []string  // lower case
	vec   []float32 // the card's vector, as chromem-go holds it
	sh    *shard    // the collection holding it
	words []int32   // distinct lexicon vector ids of the card's words
	widf  []float32 // by word: its WordNet IDF
	wterm []int32   // by word: its lexical term, whose postings count the cards using it
	own   int       // words[:own] are the card's own; the rest were learned (SetOutcomes)
}

// searchBufs are per-search scratch arrays indexed by slot.
type searchBufs struct {
	soft    softBufs
	acc     []float64
	touched []int32 // the slots acc holds a score for; kept to reuse its array
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
	local := e == nil
	if local {
		e = LocalEmbedder()
	} else {
		e = normalized(e)
	}
	dir := o.persistDir
	if local {
		dir = ""
	}
	vs, err := openVectors(dir)
	if err != nil {
		return nil, err
	}
	// The lexicon's vector tables are built now, not in the first Upsert
	// or Search (hundreds of milliseconds, in a registry's reply path).
	an := defaultAnalyzer()
	an.lex.Warm()
	return &Index{
		embed:   e,
		local:   local,
		an:      an,
		opts:    o,
		vec:     vs,
		learned: map[string][]string{},
		text:    newLexIndex(o.fieldWeights),
		byName:  make(map[string]int32),
	}, nil
}

// Len is the number of documents in the index.
func (ix *Index) Len() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return len(ix.byName)
}

// embedText is what an external embedder sees of a card: capabilities and
// tags are repeated because they name the skill most directly; the tasks the
// agent concluded follow.
func embedText(d Doc, learned []string) string {
	caps, tags := strings.Join(d.Capabilities, ". "), strings.Join(d.Tags, ". ")
	parts := []string{nameText(d.Name), d.Description, caps, tags, caps, tags}
	return strings.Join(append(parts, learned...), ". ")
}

// embedFieldWeights are the weights of the card fields in the local
// embedding, as embedText weights them for an external embedder.
var embedFieldWeights = [numFields]float32{fieldName: 1, fieldDesc: 1, fieldCaps: 2, fieldTags: 2, fieldLearned: learnedDenseWeight}

// docVector embeds a card: the local embedder works from the analysed
// fields, so each card is analysed once.
func (ix *Index) docVector(ctx context.Context, d Doc, learned []string, fields *[numFields][]term, hash string) ([]float32, error) {
	if !ix.local {
		if hash != "" {
			ix.mu.RLock()
			v := ix.vec.cached(d.Name, hash)
			ix.mu.RUnlock()
			if v != nil {
				return v, nil
			}
		}
		return ix.embed(ctx, embedText(d, learned))
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	lex := ix.an.lex
	v := make([]float32, lex.Dim())
	// Each field is embedded on its own and the unit field vectors are
	// mixed, so that a long description does not drown the capabilities.
	fv := make([]float32, lex.Dim())
	for f, ts := range fields {
		clear(fv)
		finishLocal(lex, fv, addTerms(lex, fv, ts, 1))
		axpy(v, embedFieldWeights[f], fv)
	}
	normalize(v)
	return v, nil
}

// Upsert adds d, replacing any document with the same Name.
func (ix *Index) Upsert(ctx context.Context, d Doc) error {
	if strings.TrimSpace(d.Name) == "" {
		return ErrInvalidDoc
	}
	ix.mu.RLock()
	learned := ix.learned[d.Name]
	ix.mu.RUnlock()
	var fields [numFields][]term
	fields[fieldName] = ix.an.analyze(nameText(d.Name))
	fields[fieldDesc] = ix.an.analyze(d.Description)
	fields[fieldLearned] = ix.an.analyze(strings.Join(learned, " . "))
	fields[fieldCaps] = ix.an.analyze(strings.Join(d.Capabilities, " . "))
	fields[fieldTags] = ix.an.analyze(strings.Join(d.Tags, " . "))
	var hash string
	if ix.opts.persistDir != "" && !ix.local {
		hash = textHash(ix.opts.embedderID, embedText(d, learned))
	}
	vec, err := ix.docVector(ctx, d, learned, &fields, hash)
	if err != nil {
		return embedErr(err)
	}
	if isZero(vec) {
		// A card with no content words: give it a vector of its own so the
		// cosine stays defined.
		addHashed(vec, d.Name, 1)
		normalize(vec)
	}
	words, wstems, widf, own := vectorWords(&fields)

	ix.mu.Lock()
	defer ix.mu.Unlock()
	if !slices.Equal(learned, ix.learned[d.Name]) {
		// SetOutcomes ran meanwhile and upserts the card again.
		return nil
	}
	if ix.vec.dim == 0 {
		ix.vec.dim = len(vec)
	} else if len(vec) != ix.vec.dim {
		return fmt.Errorf("search: upsert %q: %w: %d dimensions, the index has %d", d.Name, ErrDimension, len(vec), ix.vec.dim)
	}
	id, ok := ix.byName[d.Name]
	var old *shard
	if ok {
		old = ix.slots[id].sh
	} else if n := len(ix.free); n > 0 {
		id, ix.free = ix.free[n-1], ix.free[:n-1]
	} else {
		id = int32(len(ix.slots))
		ix.slots = append(ix.slots, slot{})
	}
	nshards := len(ix.vec.shards)
	sh, err := ix.vec.put(ctx, id, d.Name, vec, docMeta(d, hash), old)
	if err != nil {
		if ok {
			// The old vector may be gone: drop the card rather than keep
			// it half indexed.
			ix.deleteLocked(ctx, id)
		} else {
			ix.free = append(ix.free, id)
		}
		return err
	}
	if ok {
		ix.text.remove(id)
	}
	ix.byName[d.Name] = id
	ix.text.add(id, &fields)
	wterm := make([]int32, len(wstems))
	for i, s := range wstems {
		wterm[i] = ix.text.terms[s]
	}
	tags := make([]string, len(d.Tags))
	for i, t := range d.Tags {
		tags[i] = strings.ToLower(t)
	}
	ix.slots[id] = slot{name: d.Name, doc: d, typ: d.Type, tags: tags, vec: vec, sh: sh, words: words, widf: widf, wterm: wterm, own: own}
	// A split moves cards to the shard it creates, the last one.
	for _, nsh := range ix.vec.shards[nshards:] {
		for id := range nsh.live {
			ix.slots[id].sh = nsh
		}
	}
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
	return ix.deleteLocked(ctx, id)
}

func (ix *Index) deleteLocked(ctx context.Context, id int32) error {
	s := ix.slots[id]
	var err error
	if s.sh != nil {
		if _, live := s.sh.live[id]; live {
			err = ix.vec.remove(ctx, id, s.sh)
		}
	}
	if _, ok := ix.byName[s.name]; ok {
		ix.text.remove(id)
	}
	ix.slots[id] = slot{}
	ix.free = append(ix.free, id)
	delete(ix.byName, s.name)
	return err
}

// Prune deletes from disk the vectors of cards that no Upsert has claimed
// since the index was opened (cards removed while it was down). Call it once
// the index has been given every current card.
func (ix *Index) Prune(ctx context.Context) error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	var errs []error
	for name, d := range ix.vec.disk {
		if err := d.sh.coll.Delete(ctx, nil, nil, name); err != nil {
			errs = append(errs, err)
			continue
		}
		d.sh.stale--
		delete(ix.vec.disk, name)
	}
	return errors.Join(errs...)
}

func isZero(v []float32) bool {
	for _, x := range v {
		if x != 0 {
			return false
		}
	}
	return true
}

// minPool is the least number of candidates each view contributes to fusion.
const minPool = 50

// prepared is one analysed query text.
type prepared struct {
	ts    []term // the text's own terms
	terms []queryTerm
	vec   []float32 // nil for the local embedder until the index is locked
	soft  []softTerm
	oov   []oovTerm
}

func (ix *Index) prepare(ctx context.Context, text string) (prepared, bool, error) {
	query := text
	text = withOperatorWords(withFileWord(withoutQuotedText(query)))
	ts := ix.an.analyze(text)
	if len(ts) == 0 && quotedRE.MatchString(query) { // all quote: the quote is all there is
		text = withOperatorWords(withFileWord(query))
		ts = ix.an.analyze(text)
	}
	terms := ix.queryTerms(ts)
	if len(terms) == 0 && strings.TrimSpace(text) == "" {
		return prepared{}, false, nil
	}
	var vec []float32
	if ix.local {
		// The local query vector weighs words by how well they tell the
		// cards apart, which needs the index: it is built in searchOne.
		if err := ctx.Err(); err != nil {
			return prepared{}, false, embedErr(err)
		}
	} else {
		var err error
		if vec, err = ix.embed(ctx, text); err != nil {
			return prepared{}, false, embedErr(err)
		}
	}
	return prepared{ts: ts, terms: terms, vec: vec}, true, nil
}

// Search ranks the documents for q.
func (ix *Index) Search(ctx context.Context, q Query) ([]Hit, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	var preps [][]prepared // each text's readings
	for _, t := range q.Texts {
		var rs []prepared
		for _, r := range readings(t) {
			p, ok, err := ix.prepare(ctx, r)
			if err != nil {
				return nil, err
			}
			if ok {
				rs = append(rs, p)
			}
		}
		if len(rs) > 0 {
			preps = append(preps, rs)
		}
	}
	if len(preps) == 0 {
		return nil, ErrEmptyQuery
	}

	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if len(ix.byName) == 0 {
		return nil, nil
	}
	// Keep may be slow (it takes the registry's lock); ask it once per slot.
	kept := make(map[int32]bool)
	var tags []string
	for _, t := range q.Tags {
		if t = strings.TrimSpace(t); t != "" {
			tags = append(tags, t)
		}
	}
	q.Tags = tags
	keep := func(id int32) bool {
		s := &ix.slots[id]
		if s.name == "" || (q.Type != "" && s.typ != q.Type) {
			return false
		}
		for _, t := range q.Tags {
			if !slices.Contains(s.tags, strings.ToLower(t)) {
				return false
			}
		}
		if q.Keep == nil {
			return true
		}
		k, ok := kept[id]
		if !ok {
			k = q.Keep(ix.slots[id].name)
			kept[id] = k
		}
		return k
	}

	total := make(map[int32]float64)
	match := make(map[int32]float64)
	bufs := ix.getBufs()
	defer ix.bufs.Put(bufs)
	for _, rs := range preps {
		// Of a text's readings, the one some card fits best counts (the
		// whole text on a tie).
		var cands map[int32]signals
		best := -1.0
		for _, p := range rs {
			cs, err := ix.searchOne(ctx, p, limit, where(q.Type, q.Tags), keep, bufs)
			if err != nil {
				return nil, err
			}
			if m := topMatch(cs); m > best {
				cands, best = cs, m
			}
		}
		for id, s := range cands {
			total[id] += s.score / float64(len(preps))
			match[id] += s.match / float64(len(preps))
		}
	}

	hits := make([]Hit, 0, len(total))
	for id, s := range total {
		hits = append(hits, Hit{Name: ix.slots[id].name, Score: min(1, max(0, s)), Match: min(1, max(0, match[id]))})
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

// cand is a candidate card with its raw signals for one query text.
type cand struct {
	id               int32
	dense, lex, soft float64
	match            float64 // the absolute match (softScores)
	scale            float64 // 1/|card - mean card|, for the centred cosine
}

// searchOne gathers the candidates for one query text, the nearest vectors
// and the best lexical matches, and fuses their signals into a score in [0,1].
func (ix *Index) searchOne(ctx context.Context, p prepared, limit int, wh map[string]string, keep func(int32) bool, bufs *searchBufs) (map[int32]signals, error) {
	wd := ix.opts.denseWeight
	n := len(ix.slots)
	want := max(4*limit, minPool)
	p.soft = ix.softTerms(p.ts)
	p.oov = ix.oovTerms(p.ts)
	if ix.local {
		p.vec = ix.queryVector(p.ts)
	}

	acc := bufs.acc[:n]
	touched := ix.text.score(p.terms, acc, bufs.touched[:0])
	defer func() {
		for _, id := range touched {
			acc[id] = 0
		}
		bufs.touched = touched
	}()
	lexTop := newTopK(want)
	for _, id := range touched {
		if s := acc[id]; lexTop.admits(s) && keep(id) {
			lexTop.push(id, s)
		}
	}

	seen := make(map[int32]bool, 2*want)
	var ids []int32
	addCand := func(id int32) {
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	denseOn := wd > 0 && !isZero(p.vec)
	var mean, centred []float32
	if denseOn {
		if len(p.vec) != ix.vec.dim {
			return nil, fmt.Errorf("search: query: %w: %d dimensions, the index has %d", ErrDimension, len(p.vec), ix.vec.dim)
		}
		// Centring: with the mean card subtracted from the query, a card
		// that is merely close to every card (a hub) no longer comes first
		// for tasks it does not fit.
		mean = ix.vec.mean()
		centred = slices.Clone(p.vec)
		axpy(centred, -1, mean)
		if !isZero(centred) {
			// chromem-go ranks by the dot product with the centred query;
			// Keep (online, not excluded) is applied to its answer, so it
			// is asked for a margin more.
			near, err := ix.vec.nearestCards(ctx, centred, 2*want, wh, ix.byName)
			if err != nil {
				return nil, err
			}
			k := 0
			for _, c := range near {
				if k < want && keep(c.id) {
					addCand(c.id)
					k++
				}
			}
		}
	}
	for _, c := range lexTop.sorted() {
		addCand(c.id)
	}
	// Too few candidates passed Keep: fall back to scanning for the rest.
	for id := int32(0); len(ids) < limit && int(id) < n; id++ {
		if keep(id) {
			addCand(id)
		}
	}
	cs := make([]cand, len(ids))
	for i, id := range ids {
		cs[i] = cand{id: id, lex: acc[id]}
		if denseOn {
			row := ix.slots[id].vec
			cs[i].scale = centredScale(row, mean)
			cs[i].dense = float64(dot32(centred, row)) * cs[i].scale
		}
	}
	ix.addSoft(cs, p.soft, p.oov, denseOn, &bufs.soft)
	fused := ix.fuse(cs, denseOn)
	// Pseudo-relevance feedback: the best cards of the first pass pull the
	// query vector towards the vocabulary of the domain it is about, which
	// helps tasks that describe a situation rather than name a skill.
	if denseOn && len(cs) > prfDocs {
		order := slices.Clone(cs)
		slices.SortFunc(order, func(a, b cand) int { return cmp.Compare(fused[b.id], fused[a.id]) })
		// All in centred space: the query and the feedback cards less the
		// mean card, scored by cosine with the centred cards.
		q := slices.Clone(centred)
		for _, c := range order[:prfDocs] {
			axpy(q, float32(prfAlpha/float64(prfDocs)), ix.slots[c.id].vec)
		}
		axpy(q, -float32(prfAlpha), mean)
		qm := float64(dot32(q, mean))
		for i := range cs {
			cs[i].dense = (float64(dot32(q, ix.slots[cs[i].id].vec)) - qm) * cs[i].scale
		}
		fused = ix.fuse(cs, denseOn)
	}
	out := make(map[int32]signals, len(cs))
	for _, c := range cs {
		// A text with no word to judge a card by (stop words, numbers:
		// "What is of?", "1/3") matches no card: 1 here handed such a
		// clause to whichever agent ranked first, a person included.
		out[c.id] = signals{score: fused[c.id], match: c.match}
	}
	return out, nil
}

// signals are what a query text says of one candidate: its fused rank
// score and its absolute match.
type signals struct{ score, match float64 }

// topMatch is the best absolute match among cs (0 for none).
func topMatch(cs map[int32]signals) float64 {
	best := 0.0
	for _, s := range cs {
		best = max(best, s.match)
	}
	return best
}

const (
	prfAlpha = 1.0 // weight of the feedback cards' mean against the query
	prfDocs  = 3   // how many first-pass cards give feedback
)

// maxSoftPool bounds the candidates that get a soft-match score, so that a
// large Limit does not make every search pay for word-by-word matching; the
// rest, already ranked below them by the two views, get the lowest soft score.
const maxSoftPool = 100

func (ix *Index) addSoft(cs []cand, qs []softTerm, oov []oovTerm, denseOn bool, sb *softBufs) {
	ids := make([]int32, len(cs))
	for i, c := range cs {
		ids[i] = c.id
	}
	if len(cs) > maxSoftPool {
		first := ix.fuse(cs, denseOn) // soft is still zero everywhere
		slices.SortStableFunc(ids, func(a, b int32) int { return cmp.Compare(first[b], first[a]) })
		ids = ids[:maxSoftPool]
	}
	soft := make(map[int32]float64, len(ids))
	low := math.Inf(1)
	scores, matches := ix.softScores(ids, qs, oov, sb)
	match := make(map[int32]float64, len(ids))
	for i, s := range scores {
		soft[ids[i]] = s
		match[ids[i]] = matches[i]
		low = min(low, s)
	}
	for i := range cs {
		if s, ok := soft[cs[i].id]; ok {
			cs[i].soft, cs[i].match = s, match[cs[i].id]
		} else {
			cs[i].soft = low
		}
	}
}

// fuse turns the raw signals of the candidates into one score in [0,1]. Each
// signal is standardised over the candidates (z-score), which puts cosines,
// BM25 sums and soft matches on one scale whatever the embedder or corpus,
// and uses their spread rather than only their extremes.
func (ix *Index) fuse(cs []cand, denseOn bool) map[int32]float64 {
	wd := ix.opts.denseWeight
	if !denseOn {
		wd = 0
	}
	get := [3]func(c *cand) float64{
		func(c *cand) float64 { return c.dense },
		func(c *cand) float64 { return c.lex },
		func(c *cand) float64 { return c.soft },
	}
	w := [3]float64{(1 - softWeight) * wd, (1 - softWeight) * (1 - wd), softWeight}
	tot := make([]float64, len(cs))
	for k := range get {
		var m, sq float64
		for i := range cs {
			m += get[k](&cs[i])
		}
		m /= float64(len(cs))
		for i := range cs {
			d := get[k](&cs[i]) - m
			sq += d * d
		}
		sd := math.Sqrt(sq / float64(len(cs)))
		if sd == 0 {
			continue
		}
		for i := range cs {
			tot[i] += w[k] * (get[k](&cs[i]) - m) / sd
		}
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, t := range tot {
		lo, hi = min(lo, t), max(hi, t)
	}
	out := make(map[int32]float64, len(cs))
	for i := range cs {
		x := 1.0
		if hi > lo {
			x = (tot[i] - lo) / (hi - lo)
		}
		out[cs[i].id] = x
	}
	return out
}

func (ix *Index) getBufs() *searchBufs {
	n := len(ix.slots)
	b, _ := ix.bufs.Get().(*searchBufs)
	if b == nil {
		b = &searchBufs{}
	}
	if len(b.acc) < n {
		b.acc = make([]float64, n+n/4)
	}
	return b
}

// queryTerms turns the terms of a query into weighted stems: the text's own
// words, plus their WordNet relatives at a reduced weight.
func (ix *Index) queryTerms(ts []term) []queryTerm {
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
			for _, r := range ix.an.lex.Related(t.lemma) {
				if info := ix.an.word(r.Word); !info.stop {
					add(info.t.stem, ew*float64(r.Weight))
				}
			}
		}
	}
	out := make([]queryTerm, len(order))
	for i, s := range order {
		out[i] = queryTerm{stem: s, weight: weights[s]}
	}
	return out
}
