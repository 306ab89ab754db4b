// Package morph holds the text rules shared by the lexicon generator and the
// lexicon at run time, so that both split and lemmatise words identically.
package morph

import (
	"strings"
	"unicode"
)

// Words splits text into lowercase runs of letters and digits. Apostrophes
// inside a word are dropped ("user's" -> "users") so possessives stay one token.
func Words(text string) []string {
	if out, ok := asciiWords(text); ok {
		return out
	}
	var out []string
	var b strings.Builder
	flush := func() {
		if b.Len() > 0 {
			out = append(out, b.String())
			b.Reset()
		}
	}
	for _, r := range text {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(unicode.ToLower(r))
		case r == '\'' || r == '’':
			// keep the word going
		default:
			flush()
		}
	}
	flush()
	return out
}

// asciiWords is Words for the common case of ASCII text without
// apostrophes: lowercase words are substrings of text, so only words with
// capitals are copied. It reports false when text needs the general path.
func asciiWords(text string) ([]string, bool) {
	out := make([]string, 0, len(text)/6+1)
	start, upper := -1, false
	flush := func(end int) {
		if start >= 0 {
			w := text[start:end]
			if upper {
				w = strings.ToLower(w)
			}
			out = append(out, w)
			start, upper = -1, false
		}
	}
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case c >= 'a' && c <= 'z' || c >= '0' && c <= '9':
		case c >= 'A' && c <= 'Z':
			upper = true
		case c == '\'' || c >= 0x80:
			return nil, false
		default:
			flush(i)
			continue
		}
		if start < 0 {
			start = i
		}
	}
	flush(len(text))
	return out, true
}

// IsStopword reports whether w is a function word that carries no capability.
func IsStopword(w string) bool {
	_, ok := stopwords[w]
	return ok
}

var stopwords = func() map[string]struct{} {
	m := make(map[string]struct{})
	for _, w := range strings.Fields(`a about above after again against all also am an and any are
	as at be because been before being below between both but by can could did do does doing
	done down during each either etc few for from further get gets got had has have having he her
	here hers herself him himself his how i if in into is it its itself just me might more most
	must my myself no nor not now of off on once only or other our ours ourselves out over own
	per please same shall she should so some such than that the their theirs them themselves then
	there these they this those through to too under until up upon us very via was we were what
	when where which while who whom why will with within without would you your yours yourself
	yourselves s t d ll m re ve let lets one ones
	whats thats theres heres whos hows wheres whens whys`) {
		m[w] = struct{}{}
	}
	return m
}()

// POS is a bit set of WordNet parts of speech.
type POS uint8

// Parts of speech, as bits so one lemma can carry several.
const (
	Noun POS = 1 << iota
	Verb
	Adj
	Adv
)

type rule struct {
	pos          POS
	suffix, repl string
}

// Morphy's detachment rules (WordNet morphy(7)).
var rules = []rule{
	{Noun, "s", ""}, {Noun, "ses", "s"}, {Noun, "xes", "x"}, {Noun, "zes", "z"},
	{Noun, "ches", "ch"}, {Noun, "shes", "sh"}, {Noun, "men", "man"}, {Noun, "ies", "y"},
	{Verb, "s", ""}, {Verb, "ies", "y"}, {Verb, "es", "e"}, {Verb, "es", ""},
	{Verb, "ed", "e"}, {Verb, "ed", ""}, {Verb, "ing", "e"}, {Verb, "ing", ""},
	{Adj, "er", ""}, {Adj, "est", ""}, {Adj, "er", "e"}, {Adj, "est", "e"},
}

// Lemma returns the base form of w the way WordNet's morphy does: w itself if
// it is a lemma, else an irregular form from exc, else the first suffix rule
// whose result is a lemma. isLemma reports the parts of speech of a lemma.
// When nothing applies, w is returned unchanged.
func Lemma(w string, isLemma func(string) POS, exc func(string) (string, bool)) string {
	if isLemma(w) != 0 {
		return w
	}
	if base, ok := exc(w); ok {
		return base
	}
	for _, r := range rules {
		if len(w) <= len(r.suffix)+1 || !strings.HasSuffix(w, r.suffix) {
			continue
		}
		cand := w[:len(w)-len(r.suffix)] + r.repl
		if isLemma(cand)&r.pos != 0 {
			return cand
		}
	}
	return w
}
