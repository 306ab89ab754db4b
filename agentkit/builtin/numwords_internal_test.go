package builtin

import "testing"

func TestDigitsForWords(t *testing.T) {
	for in, want := range map[string]string{
		"what is twenty plus five":           "what is 20 plus 5",
		"one hundred and five times two":     "105 times 2",
		"twenty-five divided by five":        "25 divided by 5",
		"7% of 1.5 million":                  "7% of 1500000",
		"three thousand four hundred twelve": "3412",
		"one third of ninety":                "one third of 90",
		"a million thanks":                   "a million thanks",
		"add five six and seven":             "add 5 6 and 7",
		"twenty one":                         "21",
		"Someone wrote nine":                 "Someone wrote 9",
		"ninety nine":                        "99",
	} {
		if got := digitsForWords(in); got != want {
			t.Errorf("digitsForWords(%q) = %q, want %q", in, got, want)
		}
	}
}
