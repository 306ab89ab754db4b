package search

import (
	"container/heap"
	"math"
	"runtime"
	"sync"
)

// denseStore keeps the card vectors in contiguous chunks indexed by slot.
// The chromem-go collection holds the same slices as its documents' embeddings,
// so it stays the store of record at no extra memory, while the nearest-neighbour
// scan runs over contiguous rows with no map iteration and no per-query
// allocation of a result per document.
type denseStore struct {
	dim    int
	chunks [][]float32 // each denseChunk rows of dim
	sum    []float64   // of the rows in use, for the mean card
	rows   int         // rows in use
}

const denseChunk = 1024

// row returns the vector of slot id; the store must already hold it.
func (s *denseStore) row(id int32) []float32 {
	c := s.chunks[int(id)/denseChunk]
	o := (int(id) % denseChunk) * s.dim
	return c[o : o+s.dim : o+s.dim]
}

// set copies v into the row of slot id, growing the store, and returns the row.
func (s *denseStore) set(id int32, v []float32) []float32 {
	for int(id)/denseChunk >= len(s.chunks) {
		s.chunks = append(s.chunks, make([]float32, denseChunk*s.dim))
	}
	r := s.row(id)
	copy(r, v)
	return r
}

// use counts row v into the mean card; drop takes it out again.
func (s *denseStore) use(v []float32) {
	if s.sum == nil {
		s.sum = make([]float64, len(v))
	}
	for i, x := range v {
		s.sum[i] += float64(x)
	}
	s.rows++
}

func (s *denseStore) drop(v []float32) {
	for i, x := range v {
		s.sum[i] -= float64(x)
	}
	s.rows--
}

// mean returns the mean of the rows in use.
func (s *denseStore) mean() []float32 {
	m := make([]float32, s.dim)
	if s.rows > 0 {
		for i, x := range s.sum {
			m[i] = float32(x / float64(s.rows))
		}
	}
	return m
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

// similarities writes the dot product of q with the first len(out) rows into
// out. Above a few thousand rows the work is split across the available
// cores; the goroutines end before it returns.
func (s *denseStore) similarities(q []float32, out []float32) {
	n := len(out)
	workers := min(runtime.GOMAXPROCS(0), n/8192)
	if workers <= 1 {
		s.simRange(q, out, 0, n)
		return
	}
	var wg sync.WaitGroup
	per := (n + workers - 1) / workers
	per = (per + denseChunk - 1) / denseChunk * denseChunk
	for lo := 0; lo < n; lo += per {
		hi := min(lo+per, n)
		wg.Go(func() { s.simRange(q, out, lo, hi) })
	}
	wg.Wait()
}

func (s *denseStore) simRange(q, out []float32, lo, hi int) {
	d := s.dim
	for c := lo / denseChunk; c*denseChunk < hi; c++ {
		base := c * denseChunk
		chunk := s.chunks[c]
		for i := max(lo, base); i < min(hi, base+denseChunk); i++ {
			o := (i - base) * d
			out[i] = dot32(q, chunk[o:o+d])
		}
	}
}

func dot32(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	i := 0
	for ; i+8 <= len(a); i += 8 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
		s4 += a[i+4] * b[i+4]
		s5 += a[i+5] * b[i+5]
		s6 += a[i+6] * b[i+6]
		s7 += a[i+7] * b[i+7]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3) + (s4 + s5) + (s6 + s7)
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
