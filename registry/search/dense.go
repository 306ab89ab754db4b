package search

import (
	"container/heap"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"gonum.org/v1/gonum/blas/blas32"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/philippgille/chromem-go"
)

// vectors is the dense view: the card vectors live in chromem-go collections,
// which are the store of record and answer every nearest-neighbour query
// (QueryEmbedding, with where-filters on type and tags).
//
// chromem-go scores every document of a collection it is asked about, so the
// cards are spread over shards of at most maxShard cards, each its own
// collection. A new card goes to the shard whose centroid is nearest; a shard
// that grows past maxShard is split in two by 2-means. A query scores the
// centroids and asks the nearest shards, enough of them to cover probeDocs
// cards, in parallel, and merges their answers. Up to probeDocs cards in all
// (the development and test worlds, and every registry up to a thousand
// cards) every shard is asked, so the search is exact; above it the probe is
// an inverted-file approximation whose recall TestShardRecall measures.
//
// With a directory (WithPersistDir) chromem-go keeps the collections on disk,
// with a hash of the embedded text (and the embedder's identity) beside each
// vector, so a restarted index re-uses the vectors of a remote embedder
// instead of asking for them again.
type vectors struct {
	db     *chromem.DB
	dim    int
	shards []*shard
	seq    int       // the next collection number
	sum    []float64 // of the live vectors, for the mean card
	rows   int       // live vectors
	// disk holds the vectors found on disk at open that no Upsert has
	// claimed yet, by card name.
	disk map[string]diskVec
}

type diskVec struct {
	sh   *shard
	hash string
	vec  []float32
}

// shard is one chromem-go collection of cards.
type shard struct {
	coll  *chromem.Collection
	live  map[int32][]float32 // slots whose vector is in coll
	names map[int32]string
	sum   []float64 // of the live vectors
	cent  []float32 // their mean, kept with sum
	stale int       // documents of coll that no slot owns (on disk, unclaimed)
}

// collPrefix names the collections: collPrefix + dimension + "-" + number.
const collPrefix = "agents-"

// The shard sizes (variables so that tests can vary them).
var (
	// maxShard is the most cards one collection holds before it is split.
	maxShard = 256
	// probeDocs is how many cards a query asks chromem-go to score at least.
	probeDocs = 1024
)

// Metadata keys of a card's chromem-go document.
const (
	metaType   = "type"
	metaTagPre = "tag:" // + the lower-case tag, value "1"
	metaHash   = "hash" // of the text that was embedded (persisted stores)
)

// errNoEmbed is what a collection's embedding function says: the index
// always hands chromem-go its vectors.
var errNoEmbed = errors.New("search: the index supplies its own vectors")

func noEmbed(context.Context, string) ([]float32, error) { return nil, errNoEmbed }

// openVectors opens the store, in memory (dir == "") or persisted in dir.
func openVectors(dir string) (*vectors, error) {
	if dir == "" {
		return &vectors{db: chromem.NewDB(), disk: map[string]diskVec{}}, nil
	}
	db, err := chromem.NewPersistentDB(dir, false)
	if err != nil {
		return nil, fmt.Errorf("search: open %s: %w", dir, err)
	}
	v := &vectors{db: db, disk: map[string]diskVec{}}
	var names []string
	for name := range db.ListCollections() {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		var dim, n int
		if !strings.HasPrefix(name, collPrefix) {
			continue
		}
		if _, err := fmt.Sscanf(name[len(collPrefix):], "%d-%d", &dim, &n); err != nil || dim <= 0 {
			continue
		}
		if v.dim != 0 && dim != v.dim {
			// Another embedder's vectors: not ours to use.
			_ = db.DeleteCollection(name)
			continue
		}
		v.dim = dim
		v.seq = max(v.seq, n+1)
		sh := v.newShardNamed(db.GetCollection(name, noEmbed))
		if c := sh.coll.Count(); c > 0 {
			// chromem-go has no listing: a query for every document is one.
			probe := make([]float32, dim)
			probe[0] = 1
			res, err := sh.coll.QueryEmbedding(context.Background(), probe, c, nil, nil)
			if err != nil {
				return nil, fmt.Errorf("search: read %s: %w", name, err)
			}
			for _, r := range res {
				if old, dup := v.disk[r.ID]; dup {
					// Stopped between adding a card to one shard and
					// deleting it from another: keep one.
					if err := old.sh.coll.Delete(context.Background(), nil, nil, r.ID); err == nil {
						old.sh.stale--
					}
				}
				v.disk[r.ID] = diskVec{sh: sh, hash: r.Metadata[metaHash], vec: r.Embedding}
				sh.stale++
			}
		}
		v.shards = append(v.shards, sh)
	}
	return v, nil
}

func (v *vectors) newShardNamed(coll *chromem.Collection) *shard {
	return &shard{coll: coll, live: map[int32][]float32{}, names: map[int32]string{}}
}

func (v *vectors) newShard() (*shard, error) {
	coll, err := v.db.CreateCollection(fmt.Sprintf("%s%d-%d", collPrefix, v.dim, v.seq), nil, noEmbed)
	if err != nil {
		return nil, fmt.Errorf("search: create collection: %w", err)
	}
	v.seq++
	sh := v.newShardNamed(coll)
	v.shards = append(v.shards, sh)
	return sh, nil
}

// textHash identifies the text an embedder turned into a vector.
func textHash(embedder, text string) string {
	h := sha256.Sum256([]byte(embedder + "\x00" + text))
	return hex.EncodeToString(h[:16])
}

// cached returns the vector kept on disk for name if it was made from text
// with this hash.
func (v *vectors) cached(name, hash string) []float32 {
	if d, ok := v.disk[name]; ok && hash != "" && d.hash == hash {
		return d.vec
	}
	return nil
}

// docMeta is the metadata chromem-go filters a card by.
func docMeta(d Doc, hash string) map[string]string {
	m := make(map[string]string, 2+len(d.Tags))
	m[metaType] = d.Type
	for _, t := range d.Tags {
		m[metaTagPre+strings.ToLower(t)] = "1"
	}
	if hash != "" {
		m[metaHash] = hash
	}
	return m
}

// where is the chromem-go filter of a query's type and tags.
func where(typ string, tags []string) map[string]string {
	if typ == "" && len(tags) == 0 {
		return nil
	}
	m := make(map[string]string, 1+len(tags))
	if typ != "" {
		m[metaType] = typ
	}
	for _, t := range tags {
		m[metaTagPre+strings.ToLower(t)] = "1"
	}
	return m
}

// put stores the vector of slot id (card name) with its metadata, replacing
// the one it had; the vector must have v.dim elements.
func (v *vectors) put(ctx context.Context, id int32, name string, vec []float32, meta map[string]string, old *shard) (*shard, error) {
	if old != nil {
		if err := v.remove(ctx, id, old); err != nil {
			return nil, err
		}
	}
	if d, ok := v.disk[name]; ok {
		// Claimed (or replaced) by this Upsert.
		if err := d.sh.coll.Delete(ctx, nil, nil, name); err != nil {
			return nil, fmt.Errorf("search: upsert %q: %w", name, err)
		}
		d.sh.stale--
		delete(v.disk, name)
	}
	sh := v.nearest(vec)
	if sh == nil {
		var err error
		if sh, err = v.newShard(); err != nil {
			return nil, err
		}
	}
	if err := sh.coll.AddDocument(ctx, chromem.Document{ID: name, Embedding: vec, Metadata: meta}); err != nil {
		return nil, fmt.Errorf("search: upsert %q: %w", name, err)
	}
	sh.add(id, name, vec)
	v.count(vec, 1)
	if len(sh.live) > maxShard {
		if err := v.split(ctx, sh); err != nil {
			return nil, err
		}
		return v.shardOf(id), nil
	}
	return sh, nil
}

// remove deletes the vector of slot id from its shard.
func (v *vectors) remove(ctx context.Context, id int32, sh *shard) error {
	name := sh.names[id]
	if err := sh.coll.Delete(ctx, nil, nil, name); err != nil {
		return fmt.Errorf("search: delete %q: %w", name, err)
	}
	v.count(sh.live[id], -1)
	sh.drop(id)
	return nil
}

func (sh *shard) add(id int32, name string, vec []float32) {
	sh.live[id] = vec
	sh.names[id] = name
	if sh.sum == nil {
		sh.sum = make([]float64, len(vec))
		sh.cent = make([]float32, len(vec))
	}
	for i, x := range vec {
		sh.sum[i] += float64(x)
	}
	sh.centre()
}

// centre recomputes the mean of the live vectors.
func (sh *shard) centre() {
	inv := 1 / float64(max(1, len(sh.live)))
	for i, x := range sh.sum {
		sh.cent[i] = float32(x * inv)
	}
}

func (sh *shard) drop(id int32) {
	for i, x := range sh.live[id] {
		sh.sum[i] -= float64(x)
	}
	delete(sh.live, id)
	delete(sh.names, id)
	sh.centre()
}

func (v *vectors) count(vec []float32, sign float64) {
	if v.sum == nil {
		v.sum = make([]float64, len(vec))
	}
	for i, x := range vec {
		v.sum[i] += sign * float64(x)
	}
	v.rows += int(sign)
}

// shardOf finds the shard of slot id (after a split).
func (v *vectors) shardOf(id int32) *shard {
	for _, sh := range v.shards {
		if _, ok := sh.live[id]; ok {
			return sh
		}
	}
	return nil
}

// nearest returns the shard with room whose centroid is closest to vec, nil
// when there is none.
func (v *vectors) nearest(vec []float32) *shard {
	var best *shard
	bs := math.Inf(-1)
	for _, sh := range v.shards {
		if len(sh.live)+sh.stale >= 2*maxShard {
			continue
		}
		s := sh.affinity(vec)
		if len(sh.live) == 0 {
			s = -1 // an empty shard: only when nothing else fits
		}
		if best == nil || s > bs {
			best, bs = sh, s
		}
	}
	return best
}

// affinity is the dot product of vec with the shard's mean vector.
func (sh *shard) affinity(vec []float32) float64 {
	if len(sh.live) == 0 || sh.cent == nil {
		return 0
	}
	return float64(dot32(vec, sh.cent))
}

// split moves about half of sh's cards to a new shard: 2-means over the
// shard's vectors, seeded by the card farthest from the centroid and the
// card farthest from that one.
func (v *vectors) split(ctx context.Context, sh *shard) error {
	ids := make([]int32, 0, len(sh.live))
	for id := range sh.live {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	far := func(from []float32) []float32 {
		var best []float32
		bs := math.Inf(1)
		for _, id := range ids {
			if s := float64(dot32(from, sh.live[id])); s < bs {
				best, bs = sh.live[id], s
			}
		}
		return best
	}
	mean := make([]float32, v.dim)
	for i, x := range sh.sum {
		mean[i] = float32(x)
	}
	a := slices.Clone(far(mean))
	b := slices.Clone(far(a))
	side := make([]bool, len(ids)) // true: goes to b
	for range 6 {
		// Nearest centre in Euclidean distance: r.b - |b|²/2 against the same for a.
		ha, hb := dot32(a, a)/2, dot32(b, b)/2
		na, nb := make([]float32, v.dim), make([]float32, v.dim)
		var ca, cb int
		for i, id := range ids {
			r := sh.live[id]
			side[i] = dot32(r, b)-hb > dot32(r, a)-ha
			if side[i] {
				axpy(nb, 1, r)
				cb++
			} else {
				axpy(na, 1, r)
				ca++
			}
		}
		if ca == 0 || cb == 0 {
			// Identical vectors: split by slot.
			for i := range side {
				side[i] = i%2 == 1
			}
			break
		}
		for i := range na {
			na[i] /= float32(ca)
			nb[i] /= float32(cb)
		}
		a, b = na, nb
	}
	nsh, err := v.newShard()
	if err != nil {
		return err
	}
	docs := make([]chromem.Document, 0, len(ids)/2)
	for i, id := range ids {
		if !side[i] {
			continue
		}
		name := sh.names[id]
		d, err := sh.coll.GetByID(ctx, name)
		if err != nil {
			return fmt.Errorf("search: split: %w", err)
		}
		d.Embedding = sh.live[id]
		docs = append(docs, d)
	}
	for _, d := range docs {
		if err := nsh.coll.AddDocument(ctx, d); err != nil {
			return fmt.Errorf("search: split: %w", err)
		}
	}
	for i, id := range ids {
		if !side[i] {
			continue
		}
		name, vec := sh.names[id], sh.live[id]
		if err := sh.coll.Delete(ctx, nil, nil, name); err != nil {
			return fmt.Errorf("search: split: %w", err)
		}
		sh.drop(id)
		nsh.add(id, name, vec)
	}
	return nil
}

// mean returns the mean of the live vectors.
func (v *vectors) mean() []float32 {
	m := make([]float32, v.dim)
	if v.rows > 0 {
		for i, x := range v.sum {
			m[i] = float32(x / float64(v.rows))
		}
	}
	return m
}

// nearestCards asks chromem-go for the k cards closest to q (by dot product)
// among those passing the where-filter, from the shards nearest to q: all of
// them while they hold at most probeDocs cards. ids maps a card name to its
// slot; names it does not know (vectors on disk no card has claimed) are
// skipped.
func (v *vectors) nearestCards(ctx context.Context, q []float32, k int, wh map[string]string, ids map[string]int32) ([]scored, error) {
	type probe struct {
		sh *shard
		s  float64
	}
	ps := make([]probe, 0, len(v.shards))
	for _, sh := range v.shards {
		if len(sh.live) > 0 {
			ps = append(ps, probe{sh, sh.affinity(q)})
		}
	}
	slices.SortStableFunc(ps, func(a, b probe) int { return -cmpFloat(a.s, b.s) })
	covered := 0
	for i, p := range ps {
		if covered >= probeDocs && i >= 2 {
			ps = ps[:i]
			break
		}
		covered += len(p.sh.live)
	}
	out := make([][]chromem.Result, len(ps))
	errs := make([]error, len(ps))
	query := func(i int) {
		if n := min(k+ps[i].sh.stale, ps[i].sh.coll.Count()); n > 0 {
			out[i], errs[i] = ps[i].sh.coll.QueryEmbedding(ctx, q, n, wh, nil)
		}
	}
	// The shards are queried at once, the last one on this goroutine: a
	// small index (one shard) starts no goroutine of its own.
	var wg sync.WaitGroup
	for i := range len(ps) - 1 {
		wg.Go(func() { query(i) })
	}
	if len(ps) > 0 {
		query(len(ps) - 1)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("search: dense query: %w", err)
	}
	top := newTopK(k)
	for _, rs := range out {
		for _, r := range rs {
			if id, ok := ids[r.ID]; ok {
				top.push(id, float64(r.Similarity))
			}
		}
	}
	return top.sorted(), nil
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// centredScale is 1/|row - mean| for a unit row, which turns a dot product
// with a centred query into the cosine of the centred vectors.
func centredScale(row, mean []float32) float64 {
	var rm, mm float64
	for i, m := range mean {
		rm += float64(m) * float64(row[i])
		mm += float64(m) * float64(m)
	}
	return 1 / math.Sqrt(max(1e-6, 1-2*rm+mm))
}

func dot32(a, b []float32) float32 {
	n := len(a)
	return blas32.Dot(blas32.Vector{N: n, Inc: 1, Data: a}, blas32.Vector{N: n, Inc: 1, Data: b[:n]})
}

// scored is a slot with a score.
type scored struct {
	id    int32
	score float64
}

// topK keeps the k best-scoring slots seen so far in a min-heap, so that
// selecting from n scores costs O(n log k) and, more to the point, a slot is
// only examined further (Keep, a map lookup) when it would enter the top k.
type topK struct {
	k int
	h minHeap
}

func newTopK(k int) *topK { return &topK{k: k, h: make(minHeap, 0, k)} }

// admits reports whether a slot scoring s would enter the top k.
func (t *topK) admits(s float64) bool {
	return len(t.h) < t.k || s > t.h[0].score || s == t.h[0].score
}

func (t *topK) push(id int32, s float64) {
	if len(t.h) < t.k {
		heap.Push(&t.h, scored{id, s})
		return
	}
	if less(t.h[0], scored{id, s}) {
		t.h[0] = scored{id, s}
		heap.Fix(&t.h, 0)
	}
}

// sorted returns the kept slots, best first; ties go to the lower slot so
// results are deterministic.
func (t *topK) sorted() []scored {
	out := make([]scored, len(t.h))
	for i := len(out) - 1; i >= 0; i-- {
		out[i] = heap.Pop(&t.h).(scored)
	}
	return out
}

// less orders by score, then prefers the lower slot id as the better one.
func less(a, b scored) bool {
	if a.score != b.score {
		return a.score < b.score
	}
	return a.id > b.id
}

type minHeap []scored

func (h minHeap) Len() int           { return len(h) }
func (h minHeap) Less(i, j int) bool { return less(h[i], h[j]) }
func (h minHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *minHeap) Push(x any)        { *h = append(*h, x.(scored)) }
func (h *minHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
