package rules

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxClauses bounds a plan; a goal longer than this is not split further.
const maxClauses = 16

// Clause is one part of a goal.
type Clause struct {
	Text string
	// Dependent is set when the clause builds on earlier ones: it follows
	// "then" or "after that", refers back ("it", "them", "the result"), or
	// is an operation missing its first operand ("subtract 10").
	Dependent bool
}

var (
	bulletRE = regexp.MustCompile(`^\s*(?:[-*•+]|\(?\d{1,3}[.)]|\(?[a-z][)])\s+`)
	// A sentence ends at . ! or ? followed by space and a capital or digit,
	// so that "e.g. this" stays whole.
	sentenceRE = regexp.MustCompile(`[.!?]+\s+[\p{Lu}\d"']`)
	// Connectors between clauses of one sentence; group 1 is set for the
	// ones that make the next clause depend on the earlier ones.
	connectorRE = regexp.MustCompile(`(?i)\s*(?:;\s*(?:and\s+)?|,\s*and\s+|,\s*)?\b(and\s+then|then|after\s+that,?|afterwards,?)\s+` +
		`|\s*;\s*(?:and\s+)?|,\s*and\s+`)
	leadRE     = regexp.MustCompile(`(?i)^(?:(?:and\s+)?then|after\s+that,?|afterwards,?|finally,?|and)\s+`)
	depStartRE = regexp.MustCompile(`(?i)^(?:then|after\s+that|afterwards|finally|using|with\s+the\s+results?|based\s+on)\b`)
	// oneOperandRE is an operation missing its first operand, which must
	// then be an earlier result: "… and subtract 10", "add 2 km", "add 5%",
	// "divide by 2".
	oneOperandRE = regexp.MustCompile(`(?i)^(?:subtract|add)\s+-?\d[\d.,]*(?:\s*%|\s*°?[a-z]+)?$|^(?:multiply|divide)\s+by\s+-?\d[\d.,]*$`)
	backRefRE    = regexp.MustCompile(`(?i)\b(?:it|its|them|their|the\s+results?|those\s+results?|these\s+results?)\b`)
)

// Split breaks a goal into clauses: lines, bullets and numbered items,
// sentences, and within a sentence at "; ", ", and ", "then", "and then",
// "after that", and at a bare " and " between two requests (splitAnd).
func Split(goal string) []Clause {
	var out []Clause
	for _, line := range strings.Split(goal, "\n") {
		line = bulletRE.ReplaceAllString(line, "")
		for _, sent := range joinData(sentences(line)) {
			out = appendClauses(out, sent)
		}
	}
	if len(out) > maxClauses {
		rest := make([]string, 0, len(out)-maxClauses+1)
		for _, c := range out[maxClauses-1:] {
			rest = append(rest, c.Text)
		}
		out = append(out[:maxClauses-1], Clause{Text: strings.Join(rest, "; "), Dependent: out[maxClauses-1].Dependent})
	}
	if len(out) > 0 {
		out[0].Dependent = false
	}
	return out
}

func sentences(line string) []string {
	var out []string
	for {
		loc := sentenceRE.FindStringIndex(line)
		if loc == nil {
			return append(out, line)
		}
		// Keep the capital that starts the next sentence.
		_, size := utf8.DecodeLastRuneInString(line[:loc[1]])
		out = append(out, line[:loc[1]-size])
		line = line[loc[1]-size:]
	}
}

// joinData keeps a sentence with the one before it when it is that one's
// data rather than a request of its own:
//   - a question with no number, after a statement with numbers: "I have 3
//     boxes of 12 eggs. How many eggs in total?" is one task (the question
//     alone has nothing to compute; the statement alone asks nothing);
//   - a sentence that is no request, after an instruction whose data follows
//     a colon: "Count the words in: The cat sat. The dog ran." is one task.
//
// A sentence with numbers of its own ("There are 24 hours in a day. Convert
// 3 days to hours.") or that starts with a request stays apart.
func joinData(sents []string) []string {
	out := sents[:0:0]
	for _, s := range sents {
		if n := len(out); n > 0 && (asksAbout(out[n-1], s) || continuesData(out[n-1], s)) {
			out[n-1] += s
			continue
		}
		out = append(out, s)
	}
	return out
}

// asksAbout says whether question q asks about the numbers that statement
// stated gives and q has none of.
func asksAbout(stated, q string) bool {
	return !strings.HasSuffix(strings.TrimSpace(stated), "?") && !verbs[firstWord(stated)] && !depStartRE.MatchString(strings.TrimSpace(stated)) &&
		strings.ContainsFunc(stated, unicode.IsDigit) && !strings.ContainsFunc(q, unicode.IsDigit) &&
		questionWords[firstWord(q)] && strings.HasSuffix(strings.TrimSpace(q), "?")
}

// continuesData says whether sentence s goes on with the data an
// instruction gave after its colon ("Summarise: …") in the text before it.
func continuesData(before, s string) bool {
	head, _, ok := strings.Cut(before, ": ")
	if !ok || strings.ContainsAny(head, ".!?") || !verbs[firstWord(head)] || questionWords[firstWord(head)] {
		return false
	}
	s = strings.TrimSpace(s)
	return !verbs[firstWord(s)] && !depStartRE.MatchString(s) && !leadRE.MatchString(s)
}

// questionWords start a question.
var questionWords = wordSet(`how what what's which who where when why`)

func appendClauses(out []Clause, sent string) []Clause {
	dependent := false
	rest := sent
	for {
		loc := connectorRE.FindStringSubmatchIndex(rest)
		var part string
		if loc == nil {
			part = rest
		} else {
			part = rest[:loc[0]]
		}
		for i, p := range splitAnd(part) {
			if c, ok := clause(p, dependent); ok {
				if i > 0 && consumers[firstWord(c.Text)] {
					c.Dependent = true
				}
				out = append(out, c)
			}
		}
		if loc == nil {
			return out
		}
		dependent = loc[2] >= 0
		rest = rest[loc[1]:]
	}
}

func clause(s string, dependent bool) (Clause, bool) {
	s = strings.TrimFunc(s, func(r rune) bool { return unicode.IsSpace(r) || strings.ContainsRune(".,;:!?", r) })
	if depStartRE.MatchString(s) {
		dependent = true
	}
	s = leadRE.ReplaceAllString(s, "")
	if !strings.ContainsFunc(s, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) {
		return Clause{}, false
	}
	if backRefRE.MatchString(s) || oneOperandRE.MatchString(s) {
		dependent = true
	}
	return Clause{Text: s, Dependent: dependent}, true
}

// verbs are the words that start a request (a verb, or a question word): a
// bare " and " splits a clause only where one stands on both sides of it.
// The list is closed on purpose; a rules policy must not guess ("buy salt
// and pepper" is one request, "convert 30 C to F and compute 12 * 12" two).
var verbs = wordSet(`how what which who where when why add analyse analyze approve ask book build buy calculate check choose
	collect compare compute convert count create describe design divide double download draft draw email estimate
	evaluate explain extract fetch find format generate get give halve identify list look make measure multiply
	outline pick plan plot prepare proofread rank read recommend research review rewrite schedule search
	send show solve sort subtract suggest summarise summarize tell test translate triple upload verify write`)

// consumers are the verbs whose request, after "and", works on what the
// request before it produced ("find the population and write a report").
var consumers = wordSet(`approve check compare email explain format proofread rank review
	rewrite send summarise summarize translate verify write`)

func wordSet(words string) map[string]bool {
	set := map[string]bool{}
	for _, w := range strings.Fields(words) {
		set[w] = true
	}
	return set
}

func firstWord(s string) string {
	f, _, _ := strings.Cut(strings.TrimSpace(s), " ")
	return strings.ToLower(f)
}

func lastWord(s string) string {
	s = strings.TrimSpace(s)
	return strings.ToLower(s[strings.LastIndexByte(s, ' ')+1:])
}

// splitAnd splits a clause at each bare " and " or ", " that joins two
// requests: both sides start with a verb (and the left one does not end in
// one, as "read and write files" does) and have two words or more
// ("convert 5 km to miles, compute 3 * 3"; not "add 17, 25 and 38"). A
// clause with a title ("Packing budget: convert ... and compute ...")
// stays whole: it is one task whose steps a nested team shares (Steps).
func splitAnd(s string) []string {
	if strings.Contains(s, ": ") || !verbs[firstWord(s)] {
		return []string{s}
	}
	var out []string
	start := 0
	for i := 0; ; {
		j, sep := nextJoin(s[i:])
		if j < 0 {
			break
		}
		left, right := s[start:i+j], s[i+j+len(sep):]
		i += j + len(sep)
		if len(strings.Fields(left)) < 2 || verbs[lastWord(left)] ||
			!verbs[firstWord(right)] || len(strings.Fields(right)) < 2 {
			continue
		}
		out = append(out, left)
		start = i
	}
	return append(out, s[start:])
}

// nextJoin finds the first " and " or ", " in s: its index (-1 if none)
// and which it is.
func nextJoin(s string) (int, string) {
	and, comma := strings.Index(s, " and "), strings.Index(s, ", ")
	if comma >= 0 && (and < 0 || comma < and) {
		return comma, ", "
	}
	return and, " and "
}

// Steps breaks a task into the steps a nested team would share: the text
// after a "Title: " if there is one, split as Split does and, in addition,
// at a bare " and " between two parts of three words or more ("convert 20
// kg to pounds and compute 3 * 45", but not "salt and pepper").
func Steps(task string) []string {
	if _, tail, ok := strings.Cut(task, ": "); ok && strings.TrimSpace(tail) != "" {
		task = tail
	}
	var out []string
	for _, c := range Split(task) {
		parts := strings.Split(c.Text, " and ")
		ok := len(parts) > 1
		for _, p := range parts {
			if len(strings.Fields(p)) < 3 {
				ok = false
			}
		}
		if !ok {
			out = append(out, c.Text)
			continue
		}
		for _, p := range parts {
			out = append(out, strings.TrimSpace(p))
		}
	}
	return out
}
