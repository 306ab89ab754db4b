package morph

import (
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/ioa-nats/ioa/internal/fuzzworker"
)

// slowWords is the general path of Words, which the ASCII fast path must match.
func slowWords(text string) []string {
	var out []string
	var b strings.Builder
	for _, r := range text {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(unicode.ToLower(r))
		case r == '\'' || r == '’':
		default:
			if b.Len() > 0 {
				out = append(out, b.String())
				b.Reset()
			}
		}
	}
	if b.Len() > 0 {
		out = append(out, b.String())
	}
	return out
}

func FuzzWordsFastPath(f *testing.F) {
	fuzzworker.Capture(f)
	for _, s := range []string{"Turns questions into SQL queries.", "cost-optimizer_v2", "user's", "Ünïcode ÄB", "", "  a  "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, want := Words(s), slowWords(s)
		if len(got) != 0 || len(want) != 0 {
			if !slices.Equal(got, want) {
				t.Fatalf("Words(%q) = %q, want %q", s, got, want)
			}
		}
	})
}
