package search

import (
	"strings"
	"sync"

	"github.com/ioa-nats/ioa/registry/lexicon"
)

// term is one content word of a text: its dictionary lemma (for word
// knowledge), its stem (for lexical matching), the row of its word vector
// (-1 when WordNet has none) and its IDF over WordNet.
type term struct {
	lemma, stem string
	vec         int32
	idf         float64
}

// analyzer splits text into terms. Lemmatising and stemming dominate the
// cost of indexing, and card and task vocabularies are small, so the analysis
// of each word is cached.
type analyzer struct {
	lex *lexicon.Lexicon

	mu    sync.RWMutex
	cache map[string]wordInfo
}

type wordInfo struct {
	t    term
	stop bool
}

// maxCachedWords bounds the cache, which arbitrary (fuzzed, hostile) input
// could otherwise grow without limit; past it, new words are analysed afresh.
const maxCachedWords = 1 << 18

var defaultAnalyzer = sync.OnceValue(func() *analyzer {
	return &analyzer{lex: lexicon.Default(), cache: make(map[string]wordInfo)}
})

// analyze splits text into content terms. Hyphenated and snake-case names
// ("cost-optimizer") become separate words.
func (a *analyzer) analyze(text string) []term {
	words := lexicon.Words(text)
	out := make([]term, 0, len(words))
	for _, w := range words {
		if info := a.word(w); !info.stop {
			out = append(out, info.t)
		}
	}
	return out
}

func (a *analyzer) word(w string) wordInfo {
	a.mu.RLock()
	info, ok := a.cache[w]
	a.mu.RUnlock()
	if ok {
		return info
	}
	// w may share memory with a large text; what is cached keeps its own.
	w = strings.Clone(w)
	if lexicon.IsStopword(w) || len(w) > 64 {
		info.stop = true
	} else {
		l := a.lex.Lemma(w)
		id, ok := a.lex.VectorID(l)
		if !ok {
			id = -1
		}
		info.t = term{lemma: l, stem: stem(l), vec: id, idf: a.lex.IDF(l)}
	}
	a.mu.Lock()
	if len(a.cache) < maxCachedWords {
		a.cache[w] = info
	}
	a.mu.Unlock()
	return info
}

// nameText turns an agent name like "cloud-cost-optimizer" into words.
func nameText(name string) string {
	return strings.NewReplacer("-", " ", "_", " ", ".", " ", "/", " ").Replace(name)
}
