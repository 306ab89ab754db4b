package search

import (
	"regexp"
	"strings"

	"github.com/ioa-nats/ioa/registry/lexicon"
)

// A task may give its data after a colon ("Count the words in: the quick
// brown fox ...", "Translate into French: good morning"). That data dilutes
// the match as quoted text does ("Count the words in: the quick brown fox
// jumps over the lazy dog" matched the text analyst at 0.22, under
// min_match, and "Count the words in" at 0.62). But what comes after a
// colon is as often the task itself ("Task 2: convert 5 km to miles",
// "Plan a trip budget: 3 nights at 120 euros"), so the colon's two readings
// are both searched and the one some card fits better is kept. A label
// ("Task 2", "Note", "Step 3") is no instruction: "Task 2" alone matched the
// coordinator, whose card speaks of tasks, better than the whole text
// matched the unit converter.

// instructionRE is a text's instruction before its first colon that is
// followed by a space (not "10:30" or "http://"), with something after it.
var instructionRE = regexp.MustCompile(`^\s*([^:\n]*[^:\s])\s*:\s+\S`)

// readings are the texts a query text is searched as: the text itself, its
// instruction when it has data after a colon, and, when it names files, the
// text with their names left out ("What's in fox.txt?" matched the file
// reader at 0.22: no card holds "fox", and a name's rare word weighs a lot;
// a name's words still count in the whole text, where a card may hold them:
// "Summarise budget.csv").
func readings(text string) []string {
	out := []string{text}
	// Most queries have neither a colon nor a dot: no regular expression
	// runs for them.
	if !strings.ContainsAny(text, ":.") {
		return out
	}
	if m := instructionRE.FindStringSubmatch(text); m != nil && contentWords(m[1]) >= 2 {
		out = append(out, m[1])
	}
	if fileNameRE.MatchString(text) {
		out = append(out, fileNameRE.ReplaceAllString(text, "file"))
	}
	return out
}

// contentWords counts the words of text that are neither function words nor
// numbers: an instruction has a verb and what it acts on, a label at most
// one of them.
func contentWords(text string) int {
	n := 0
	for _, w := range lexicon.Words(text) {
		if !lexicon.IsStopword(w) && strings.Trim(w, "0123456789") != "" {
			n++
		}
	}
	return n
}
