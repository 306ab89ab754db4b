package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ioa-nats/ioa/registry/lexicon/internal/morph"
)

// synset is one WordNet synset as the generator needs it.
type synset struct {
	pos   morph.POS
	words []string // lemmas, lowercase, multiword joined with '_'
	ptrs  []pointer
	gloss string
}

type pointer struct {
	sym    string
	target string // key of the target synset
	src    int    // 1-based source word for lexical pointers, 0 for semantic ones
}

type wordnet struct {
	synsets map[string]*synset           // key: pos letter + offset
	senses  map[string]map[byte][]string // lemma -> pos letter -> synset keys, most frequent first
	exc     map[string]string            // inflected form -> base
	lemmas  map[string]morph.POS
}

var posFiles = []struct {
	name   string
	letter byte
	pos    morph.POS
}{{"noun", 'n', morph.Noun}, {"verb", 'v', morph.Verb}, {"adj", 'a', morph.Adj}, {"adv", 'r', morph.Adv}}

func loadWordNet(dir string) (*wordnet, error) {
	wn := &wordnet{
		synsets: make(map[string]*synset),
		senses:  make(map[string]map[byte][]string),
		exc:     make(map[string]string),
		lemmas:  make(map[string]morph.POS),
	}
	for _, pf := range posFiles {
		if err := wn.readData(filepath.Join(dir, "data."+pf.name), pf.letter, pf.pos); err != nil {
			return nil, err
		}
		if err := wn.readIndex(filepath.Join(dir, "index."+pf.name), pf.letter, pf.pos); err != nil {
			return nil, err
		}
		// Exception lists are optional: the npm package lacks them.
		if err := wn.readExc(filepath.Join(dir, pf.name+".exc")); err != nil && !os.IsNotExist(err) {
			return nil, err
		}
	}
	return wn, nil
}

func normPos(c byte) byte {
	if c == 's' {
		return 'a'
	}
	return c
}

func eachLine(path string, fn func(string) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == ' ' {
			continue // licence header
		}
		if err := fn(line); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return sc.Err()
}

func (wn *wordnet) readData(path string, letter byte, pos morph.POS) error {
	return eachLine(path, func(line string) error {
		body, gloss, _ := strings.Cut(line, " | ")
		f := strings.Fields(body)
		if len(f) < 4 {
			return fmt.Errorf("short line %q", line)
		}
		s := &synset{pos: pos, gloss: gloss}
		wcnt, err := strconv.ParseInt(f[3], 16, 32)
		if err != nil {
			return err
		}
		i := 4
		for range wcnt {
			w := strings.ToLower(f[i])
			if p := strings.IndexByte(w, '('); p > 0 { // adjective markers like "(a)"
				w = w[:p]
			}
			s.words = append(s.words, w)
			i += 2
		}
		pcnt, err := strconv.Atoi(f[i])
		if err != nil {
			return err
		}
		i++
		for range pcnt {
			st := f[i+3]
			src, _ := strconv.ParseInt(st[:2], 16, 32)
			s.ptrs = append(s.ptrs, pointer{sym: f[i], target: string(normPos(f[i+2][0])) + f[i+1], src: int(src)})
			i += 4
		}
		wn.synsets[string(letter)+f[0]] = s
		return nil
	})
}

func (wn *wordnet) readIndex(path string, letter byte, pos morph.POS) error {
	return eachLine(path, func(line string) error {
		f := strings.Fields(line)
		lemma := f[0]
		scnt, _ := strconv.Atoi(f[2])
		pcnt, _ := strconv.Atoi(f[3])
		offs := f[4+pcnt+2:]
		if len(offs) > scnt {
			offs = offs[:scnt]
		}
		m := wn.senses[lemma]
		if m == nil {
			m = make(map[byte][]string)
			wn.senses[lemma] = m
		}
		for _, o := range offs {
			m[letter] = append(m[letter], string(letter)+o)
		}
		wn.lemmas[lemma] |= pos
		return nil
	})
}

func (wn *wordnet) readExc(path string) error {
	return eachLine(path, func(line string) error {
		f := strings.Fields(line)
		if len(f) >= 2 && !strings.Contains(f[0], "_") {
			if _, dup := wn.exc[f[0]]; !dup {
				wn.exc[f[0]] = f[1]
			}
		}
		return nil
	})
}

func (wn *wordnet) lemma(w string) string {
	return morph.Lemma(w,
		func(s string) morph.POS { return wn.lemmas[s] },
		func(s string) (string, bool) { b, ok := wn.exc[s]; return b, ok })
}

// glossWords returns the content words of a gloss, lemmatised.
func (wn *wordnet) glossWords(gloss string) []string {
	var out []string
	for _, w := range morph.Words(gloss) {
		if morph.IsStopword(w) || len(w) < 2 || isNumber(w) {
			continue
		}
		out = append(out, wn.lemma(w))
	}
	return out
}

func isNumber(w string) bool {
	for _, r := range w {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// lemmaWords splits a lemma like "physical_entity" into its content words.
func lemmaWords(l string) []string {
	var out []string
	for _, w := range morph.Words(strings.ReplaceAll(l, "_", " ")) {
		if !morph.IsStopword(w) && len(w) > 1 {
			out = append(out, w)
		}
	}
	return out
}
