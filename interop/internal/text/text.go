// Package text holds the small text helpers the interop adapters share.
package text

import "strings"

// FirstSentence is s with its white space folded, cut after its first
// sentence and at 200 bytes: what becomes a capability or a tool summary.
func FirstSentence(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if i := strings.Index(s, ". "); i >= 0 {
		s = s[:i+1]
	}
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}
