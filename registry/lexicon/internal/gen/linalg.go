package main

import (
	"math"
	"math/rand/v2"
	"sync"
)

// csr is a square sparse matrix in compressed-row form.
type csr struct {
	n      int
	rowPtr []int64
	col    []int32
	val    []float32
}

// parallel runs fn over [0,n) split into chunks across workers.
func parallel(n, workers int, fn func(lo, hi int)) {
	var wg sync.WaitGroup
	chunk := (n + workers - 1) / workers
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		wg.Add(1)
		go func() { defer wg.Done(); fn(lo, hi) }()
	}
	wg.Wait()
}

// mul returns A*X for a row-major dense X with l columns.
func (a *csr) mul(x []float64, l, workers int) []float64 {
	y := make([]float64, a.n*l)
	parallel(a.n, workers, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			yi := y[i*l : (i+1)*l]
			for k := a.rowPtr[i]; k < a.rowPtr[i+1]; k++ {
				v := float64(a.val[k])
				xj := x[int(a.col[k])*l : int(a.col[k])*l+l]
				for c := range yi {
					yi[c] += v * xj[c]
				}
			}
		}
	})
	return y
}

// orthonormalize replaces the columns of the row-major m×l matrix x with an
// orthonormal basis of their span (classical Gram-Schmidt applied twice).
func orthonormalize(x []float64, m, l, workers int) {
	cols := make([][]float64, l)
	for c := range cols {
		cols[c] = make([]float64, m)
		for i := 0; i < m; i++ {
			cols[c][i] = x[i*l+c]
		}
	}
	r := make([]float64, l)
	for c := 0; c < l; c++ {
		v := cols[c]
		for pass := 0; pass < 2; pass++ {
			parallel(c, workers, func(lo, hi int) {
				for k := lo; k < hi; k++ {
					r[k] = dot(cols[k], v)
				}
			})
			parallel(m, workers, func(lo, hi int) {
				for k := 0; k < c; k++ {
					rk, q := r[k], cols[k]
					for i := lo; i < hi; i++ {
						v[i] -= rk * q[i]
					}
				}
			})
		}
		nrm := math.Sqrt(dot(v, v))
		if nrm < 1e-12 { // rank deficient: restart the column from noise
			rng := rand.New(rand.NewPCG(uint64(c), 7))
			for i := range v {
				v[i] = rng.NormFloat64() * 1e-3
			}
			c--
			continue
		}
		for i := range v {
			v[i] /= nrm
		}
	}
	for c := range cols {
		for i := 0; i < m; i++ {
			x[i*l+c] = cols[c][i]
		}
	}
}

func dot(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// jacobiEigen diagonalises the symmetric l×l matrix a (row-major, destroyed)
// and returns eigenvalues and eigenvectors (columns of v, row-major).
func jacobiEigen(a []float64, l int) ([]float64, []float64) {
	v := make([]float64, l*l)
	for i := 0; i < l; i++ {
		v[i*l+i] = 1
	}
	for sweep := 0; sweep < 50; sweep++ {
		var off float64
		for p := 0; p < l; p++ {
			for q := p + 1; q < l; q++ {
				off += a[p*l+q] * a[p*l+q]
			}
		}
		if off < 1e-22 {
			break
		}
		for p := 0; p < l; p++ {
			for q := p + 1; q < l; q++ {
				apq := a[p*l+q]
				if math.Abs(apq) < 1e-300 {
					continue
				}
				theta := (a[q*l+q] - a[p*l+p]) / (2 * apq)
				t := math.Copysign(1, theta) / (math.Abs(theta) + math.Sqrt(theta*theta+1))
				c := 1 / math.Sqrt(t*t+1)
				s := t * c
				for k := 0; k < l; k++ { // rotate columns p,q
					akp, akq := a[k*l+p], a[k*l+q]
					a[k*l+p] = c*akp - s*akq
					a[k*l+q] = s*akp + c*akq
				}
				for k := 0; k < l; k++ { // rotate rows p,q
					apk, aqk := a[p*l+k], a[q*l+k]
					a[p*l+k] = c*apk - s*aqk
					a[q*l+k] = s*apk + c*aqk
				}
				for k := 0; k < l; k++ {
					vkp, vkq := v[k*l+p], v[k*l+q]
					v[k*l+p] = c*vkp - s*vkq
					v[k*l+q] = s*vkp + c*vkq
				}
			}
		}
	}
	ev := make([]float64, l)
	for i := range ev {
		ev[i] = a[i*l+i]
	}
	return ev, v
}

// topEigen returns the k largest eigenpairs of the symmetric sparse a by
// randomized subspace iteration with oversampling to l columns.
func topEigen(a *csr, k, l, iters, workers int, logf func(string, ...any)) (vals []float64, vecs []float64) {
	m := a.n
	rng := rand.New(rand.NewPCG(1, 2))
	q := make([]float64, m*l)
	for i := range q {
		q[i] = rng.NormFloat64()
	}
	orthonormalize(q, m, l, workers)
	for it := 0; it < iters; it++ {
		q = a.mul(q, l, workers)
		orthonormalize(q, m, l, workers)
		logf("power iteration %d done", it+1)
	}
	y := a.mul(q, l, workers)
	c := make([]float64, l*l) // Q^T A Q, accumulated as a sum of row outer products
	var mu sync.Mutex
	parallel(m, workers, func(lo, hi int) {
		part := make([]float64, l*l)
		for i := lo; i < hi; i++ {
			qi, yi := q[i*l:(i+1)*l], y[i*l:(i+1)*l]
			for r, qv := range qi {
				row := part[r*l : (r+1)*l]
				for s, yv := range yi {
					row[s] += qv * yv
				}
			}
		}
		mu.Lock()
		for j := range c {
			c[j] += part[j]
		}
		mu.Unlock()
	})
	for r := 0; r < l; r++ { // symmetrise rounding noise
		for s := r + 1; s < l; s++ {
			avg := (c[r*l+s] + c[s*l+r]) / 2
			c[r*l+s], c[s*l+r] = avg, avg
		}
	}
	ev, ew := jacobiEigen(c, l)
	order := make([]int, l)
	for i := range order {
		order[i] = i
	}
	// sort by eigenvalue, largest first
	for i := 1; i < l; i++ {
		for j := i; j > 0 && ev[order[j]] > ev[order[j-1]]; j-- {
			order[j], order[j-1] = order[j-1], order[j]
		}
	}
	vals = make([]float64, k)
	ewk := make([]float64, l*k)
	for out := 0; out < k; out++ {
		vals[out] = ev[order[out]]
		for r := 0; r < l; r++ {
			ewk[r*k+out] = ew[r*l+order[out]]
		}
	}
	vecs = make([]float64, m*k)
	parallel(m, workers, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			vi := vecs[i*k : (i+1)*k]
			for r := 0; r < l; r++ {
				qv := q[i*l+r]
				row := ewk[r*k : (r+1)*k]
				for out := range vi {
					vi[out] += qv * row[out]
				}
			}
		}
	})
	return vals, vecs
}
