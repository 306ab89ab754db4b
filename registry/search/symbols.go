package search

import (
	"regexp"
	"strings"
)

// A task may say its arithmetic in symbols ("What is 1/3 of 90?", "Compute
// 6 * 7"), which no card holds and the analyser drops; without a word left
// to judge a card by, such a task would match nobody. The symbols between
// numbers are read as the words cards use for them.

var (
	// operatorRE is an operator between two numbers ("6 * 7", "1/3");
	// group 2 is the operator.
	operatorRE = regexp.MustCompile(`(\d)\s*([-+*/×÷^])\s*(\d|\()`)
	// percentRE is a percentage ("15%").
	percentRE = regexp.MustCompile(`(\d)\s*%`)
	// ordinalRE is a number written as an ordinal ("the 10th power"): it
	// is read as the number, which judges no card, where "10th" was a word
	// no card holds and lowered every match.
	ordinalRE = regexp.MustCompile(`(?i)\b(\d+)(?:st|nd|rd|th)\b`)
)

var operatorWords = map[string]string{
	"+": "plus", "-": "minus", "*": "times", "×": "times", "/": "divided by", "÷": "divided by", "^": "power",
}

// withOperatorWords writes the arithmetic operators of a query as words:
// "1/3 of 90" reads "1 divided by 3 of 90", and its ordinals as numbers.
func withOperatorWords(text string) string {
	text = ordinalRE.ReplaceAllString(text, "$1")
	text = percentRE.ReplaceAllString(text, "$1 percent")
	// Twice: in "1+2+3" the middle number takes part in two matches, which
	// one pass cannot both replace.
	for range 2 {
		text = operatorRE.ReplaceAllStringFunc(text, func(m string) string {
			sub := operatorRE.FindStringSubmatch(m)
			return sub[1] + " " + operatorWords[sub[2]] + " " + strings.TrimSpace(sub[3])
		})
	}
	return text
}
