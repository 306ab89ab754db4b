package search

import (
	"regexp"
	"strings"
)

// A task quotes the text it works on ("ROT13 the text \"Hello agents\"",
// "Encode 'Hello NATS' with ROT13"). The quoted words are its data, not a
// skill, as file names are: in a query they only dilute the match ("ROT13
// the text \"Hello agents\"" matched the ROT13 agent at 0.26, at min_match,
// and "ROT13 the text" at 0.52).

// quotedRE is a quoted span: in double or typographic quotes, or in single
// quotes that open after a space and close before one (so that the
// apostrophes of "what's" or "don't" quote nothing).
var quotedRE = regexp.MustCompile(`"[^"\n]*"|“[^”\n]*”|‘[^’\n]*’|(?:^|\s)'[^'\n]+'(?:[\s.,;:!?)]|$)`)

// withoutQuotedText leaves the quoted spans out of a query (Index.prepare
// keeps them when nothing else is left to judge a card by: "\"summarise
// this\"" is all quote).
func withoutQuotedText(text string) string {
	return quotedRE.ReplaceAllStringFunc(text, func(m string) string {
		return strings.Repeat(" ", len(m)) // the spaces around a span stay
	})
}
