package search

// stem is M.F. Porter's 1980 suffix-stripping algorithm for lowercase ASCII
// words. It conflates "optimize", "optimizer" and "optimization", which the
// dictionary lemmatiser alone does not. Non-ASCII words are returned as is.
func stem(w string) string {
	if len(w) <= 2 {
		return w
	}
	for i := 0; i < len(w); i++ {
		if w[i] < 'a' || w[i] > 'z' {
			return w
		}
	}
	s := &stemmer{b: []byte(w)}
	s.step1ab()
	s.step1c()
	s.step2()
	s.step3()
	s.step4()
	s.step5()
	return string(s.b)
}

type stemmer struct {
	b []byte
	j int // end of the stem under test (exclusive) after ends() matched
}

func (s *stemmer) cons(i int) bool {
	switch s.b[i] {
	case 'a', 'e', 'i', 'o', 'u':
		return false
	case 'y':
		return i == 0 || !s.cons(i-1)
	}
	return true
}

// m counts vowel-consonant sequences in b[:j].
func (s *stemmer) m() int {
	n, i := 0, 0
	for i < s.j && s.cons(i) {
		i++
	}
	for i < s.j {
		for i < s.j && !s.cons(i) {
			i++
		}
		if i >= s.j {
			break
		}
		n++
		for i < s.j && s.cons(i) {
			i++
		}
	}
	return n
}

func (s *stemmer) vowelInStem() bool {
	for i := 0; i < s.j; i++ {
		if !s.cons(i) {
			return true
		}
	}
	return false
}

func (s *stemmer) doubleC(i int) bool {
	return i >= 1 && s.b[i] == s.b[i-1] && s.cons(i)
}

// cvc reports consonant-vowel-consonant ending at i, the last not w, x or y.
func (s *stemmer) cvc(i int) bool {
	if i < 2 || !s.cons(i) || s.cons(i-1) || !s.cons(i-2) {
		return false
	}
	c := s.b[i]
	return c != 'w' && c != 'x' && c != 'y'
}

func (s *stemmer) ends(suf string) bool {
	if len(suf) > len(s.b) || string(s.b[len(s.b)-len(suf):]) != suf {
		return false
	}
	s.j = len(s.b) - len(suf)
	return true
}

func (s *stemmer) setTo(r string) { s.b = append(s.b[:s.j], r...) }

func (s *stemmer) r(r string) {
	if s.m() > 0 {
		s.setTo(r)
	}
}

func (s *stemmer) step1ab() {
	if s.b[len(s.b)-1] == 's' {
		switch {
		case s.ends("sses"):
			s.b = s.b[:len(s.b)-2]
		case s.ends("ies"):
			s.setTo("i")
		case len(s.b) >= 2 && s.b[len(s.b)-2] != 's':
			s.b = s.b[:len(s.b)-1]
		}
	}
	if s.ends("eed") {
		if s.m() > 0 {
			s.b = s.b[:len(s.b)-1]
		}
		return
	}
	if (s.ends("ed") || s.ends("ing")) && s.vowelInStem() {
		s.b = s.b[:s.j]
		s.j = len(s.b)
		switch {
		case s.ends("at"):
			s.setTo("ate")
		case s.ends("bl"):
			s.setTo("ble")
		case s.ends("iz"):
			s.setTo("ize")
		case s.doubleC(len(s.b) - 1):
			if c := s.b[len(s.b)-1]; c != 'l' && c != 's' && c != 'z' {
				s.b = s.b[:len(s.b)-1]
			}
		default:
			s.j = len(s.b)
			if s.m() == 1 && s.cvc(len(s.b)-1) {
				s.b = append(s.b, 'e')
			}
		}
	}
}

func (s *stemmer) step1c() {
	if s.ends("y") && s.vowelInStem() {
		s.b[len(s.b)-1] = 'i'
	}
}

var step2Rules = [][2]string{
	{"ational", "ate"}, {"tional", "tion"}, {"enci", "ence"}, {"anci", "ance"}, {"izer", "ize"},
	{"bli", "ble"}, {"alli", "al"}, {"entli", "ent"}, {"eli", "e"}, {"ousli", "ous"},
	{"ization", "ize"}, {"ation", "ate"}, {"ator", "ate"}, {"alism", "al"}, {"iveness", "ive"},
	{"fulness", "ful"}, {"ousness", "ous"}, {"aliti", "al"}, {"iviti", "ive"}, {"biliti", "ble"},
	{"logi", "log"},
}

var step3Rules = [][2]string{
	{"icate", "ic"}, {"ative", ""}, {"alize", "al"}, {"iciti", "ic"}, {"ical", "ic"}, {"ful", ""}, {"ness", ""},
}

func (s *stemmer) applyRules(rules [][2]string) {
	for _, r := range rules {
		if s.ends(r[0]) {
			s.r(r[1])
			return
		}
	}
}

func (s *stemmer) step2() { s.applyRules(step2Rules) }
func (s *stemmer) step3() { s.applyRules(step3Rules) }

var step4Suffixes = []string{
	"al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement", "ment", "ent",
	"ion", "ou", "ism", "ate", "iti", "ous", "ive", "ize",
}

func (s *stemmer) step4() {
	for _, suf := range step4Suffixes {
		if !s.ends(suf) {
			continue
		}
		if suf == "ion" && (s.j == 0 || (s.b[s.j-1] != 's' && s.b[s.j-1] != 't')) {
			return
		}
		if s.m() > 1 {
			s.b = s.b[:s.j]
		}
		return
	}
}

func (s *stemmer) step5() {
	s.j = len(s.b)
	if s.b[len(s.b)-1] == 'e' {
		s.j = len(s.b) - 1
		if a := s.m(); a > 1 || (a == 1 && !s.cvc(len(s.b)-2)) {
			s.b = s.b[:len(s.b)-1]
		}
	}
	s.j = len(s.b)
	if s.m() > 1 && s.doubleC(len(s.b)-1) && s.b[len(s.b)-1] == 'l' {
		s.b = s.b[:len(s.b)-1]
	}
}
