package search

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"time"

	"github.com/philippgille/chromem-go"

	"github.com/ioa-nats/ioa/registry/lexicon"
)

// Embedder turns text into a vector. chromem-go's EmbeddingFunc has the same
// shape, so either can be converted to the other.
type Embedder func(ctx context.Context, text string) ([]float32, error)

// ErrEmptyEmbedding is returned when an embedder yields a zero-length vector.
var ErrEmptyEmbedding = errors.New("search: empty embedding")

// LocalEmbedder returns the default embedder: a weighted average of WordNet
// word vectors (see package lexicon), so it needs no network and no model.
// Words WordNet lacks ("kubernetes", "sql") get a pseudo-random vector of
// their own, so identical rare words still meet in vector space. The result
// is L2-normalised; a text with no content words yields the zero vector.
func LocalEmbedder() Embedder {
	a := defaultAnalyzer()
	return func(ctx context.Context, text string) ([]float32, error) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		v := make([]float32, a.lex.Dim())
		known := addTerms(a.lex, v, a.analyze(text), 1)
		finishLocal(a.lex, v, known)
		return v, nil
	}
}

// oovWeight scales the random vectors of unknown words relative to WordNet
// vectors: an unknown word is usually a specific name and worth matching.
const oovWeight = 1.0

// addTerms adds the IDF-weighted vectors of terms, times weight, to v and
// returns the weight that went to WordNet vectors.
func addTerms(lex *lexicon.Lexicon, v []float32, terms []term, weight float32) float32 {
	var known float32
	for _, t := range terms {
		w := weight * float32(t.idf)
		if t.vec >= 0 {
			axpy(v, w, lex.Vector(t.vec))
			known += w
		} else {
			addHashed(v, t.stem, w*oovWeight)
		}
	}
	return known
}

// finishLocal removes the common component every WordNet vector shares, in
// proportion to the weight that came from WordNet, and normalises v.
func finishLocal(lex *lexicon.Lexicon, v []float32, known float32) {
	if known > 0 {
		axpy(v, -known, lex.Mean())
	}
	normalize(v)
}

func axpy(dst []float32, a float32, x []float32) {
	x = x[:len(dst)]
	for i := range dst {
		dst[i] += a * x[i]
	}
}

// addHashed adds weight times a deterministic random unit vector of word.
func addHashed(v []float32, word string, weight float32) {
	h := fnv.New64a()
	h.Write([]byte(word))
	x := h.Sum64() | 1
	amp := weight / float32(math.Sqrt(float64(len(v))))
	for i := range v {
		x ^= x << 13 // xorshift64
		x ^= x >> 7
		x ^= x << 17
		if x&1 == 0 {
			v[i] += amp
		} else {
			v[i] -= amp
		}
	}
}

func normalize(v []float32) {
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	if n == 0 {
		return
	}
	inv := float32(1 / math.Sqrt(n))
	for i := range v {
		v[i] *= inv
	}
}

// normalized wraps e so that its vectors have unit length, which the index's
// cosine scores assume.
func normalized(e Embedder) Embedder {
	return func(ctx context.Context, text string) ([]float32, error) {
		v, err := e(ctx, text)
		if err != nil {
			return nil, err
		}
		if len(v) == 0 {
			return nil, ErrEmptyEmbedding
		}
		out := make([]float32, len(v))
		copy(out, v)
		normalize(out)
		return out, nil
	}
}

// OpenAIEmbedder calls an OpenAI-compatible /v1/embeddings endpoint (baseURL
// like "https://api.openai.com/v1") and normalises the result. A call that
// takes longer than RemoteTimeout fails.
func OpenAIEmbedder(baseURL, apiKey, model string) Embedder {
	return normalized(timed(Embedder(chromem.NewEmbeddingFuncOpenAICompat(baseURL, apiKey, model, nil))))
}

// OllamaEmbedder calls an Ollama server's embedding API (baseURL empty means
// the local default) and normalises the result. A call that takes longer
// than RemoteTimeout fails.
func OllamaEmbedder(baseURL, model string) Embedder {
	return normalized(timed(Embedder(chromem.NewEmbeddingFuncOllama(model, baseURL))))
}

// RemoteTimeout bounds one call to a remote embedder.
const RemoteTimeout = 30 * time.Second

func timed(e Embedder) Embedder {
	return func(ctx context.Context, text string) ([]float32, error) {
		ctx, cancel := context.WithTimeout(ctx, RemoteTimeout)
		defer cancel()
		return e(ctx, text)
	}
}

func embedErr(err error) error { return fmt.Errorf("search: embed: %w", err) }
