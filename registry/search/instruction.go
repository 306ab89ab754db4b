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

// readings are the texts a query text is searched as: the text itself, and
// its instruction when it has data after a colon.
func readings(text string) []string {
	m := instructionRE.FindStringSubmatch(text)
	if m == nil || contentWords(m[1]) < 2 {
		return []string{text}
	}
	return []string{text, m[1]}
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
