package protocol

import (
	"regexp"
	"testing"

	"github.com/ioa-nats/ioa/internal/fuzzworker"
)

// The byte-by-byte checks accept exactly what the documented patterns do.
func FuzzNamesMatchTheirPatterns(f *testing.F) {
	fuzzworker.Capture(f)
	nameRE := regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)
	idRE := regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	for _, s := range []string{"", "a", "-a", "_a", "A", "a-b_c", "g7huhgdgjqxjy", "a b", "é", "a\n",
		"0123456789012345678901234567890123456789012345678901234567890123", "01234567890123456789012345678901234567890123456789012345678901234"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := ValidName(s), nameRE.MatchString(s); got != want {
			t.Errorf("ValidName(%q) = %v, the pattern says %v", s, got, want)
		}
		if got, want := ValidID(s), idRE.MatchString(s); got != want {
			t.Errorf("ValidID(%q) = %v, the pattern says %v", s, got, want)
		}
	})
}
