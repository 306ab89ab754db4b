package search

import (
	"strings"

	"github.com/ioa-nats/ioa/registry/lexicon"
)

// term is one content word of a text: its surface form, its dictionary lemma
// (for word knowledge) and its stem (for lexical matching).
type term struct {
	lemma, stem string
}

// analyze splits text into content terms. Hyphenated and snake-case names
// ("cost-optimizer") become separate words.
func analyze(lex *lexicon.Lexicon, text string) []term {
	words := lexicon.Words(text)
	out := make([]term, 0, len(words))
	for _, w := range words {
		if lexicon.IsStopword(w) || len(w) > 64 {
			continue
		}
		l := lex.Lemma(w)
		out = append(out, term{lemma: l, stem: stem(l)})
	}
	return out
}

// nameText turns an agent name like "cloud-cost-optimizer" into words.
func nameText(name string) string {
	return strings.NewReplacer("-", " ", "_", " ", ".", " ", "/", " ").Replace(name)
}
