package builtin

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// numPat is a number as people write it in a task: digits with "." or ","
// between groups ("3,200", "1,234.5", "2,5"); parseNumber says which it is.
const numPat = `\d+(?:[.,]\d+)*`

var (
	numRE       = regexp.MustCompile(numPat)
	thousandsRE = regexp.MustCompile(`^\d{1,3}(?:,\d{3})+(?:\.\d+)?$`)
	decimalRE   = regexp.MustCompile(`^\d+(?:[.,]\d+)?$`)
)

// parseNumber reads a number written with thousands separators ("3,200",
// "1,234.5") or a decimal point or comma ("2.5", "2,5"). A comma before
// exactly three digits groups thousands: "3,200" is 3200, never 3.2. A form
// that is neither ("1.234,5", "1,2,3") is refused rather than guessed: a
// number misread gives an answer that looks right and is not.
func parseNumber(s string) (float64, error) {
	switch {
	case thousandsRE.MatchString(s):
		s = strings.ReplaceAll(s, ",", "")
	case decimalRE.MatchString(s):
		s = strings.Replace(s, ",", ".", 1)
	default:
		return 0, fmt.Errorf("cannot read the number %q (write it as 1234.5 or 1,234.5)", s)
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("cannot read the number %q", s)
	}
	return v, nil
}

// plainNumbers rewrites every number of s as parseNumber reads it, with a
// decimal point and no separators, so that an expression parser need not
// know how people group digits.
func plainNumbers(s string) (string, error) {
	var err error
	out := numRE.ReplaceAllStringFunc(s, func(n string) string {
		v, e := parseNumber(n)
		if e != nil {
			err = e
			return n
		}
		return strconv.FormatFloat(v, 'f', -1, 64)
	})
	return out, err
}

// parseSigned is parseNumber for a number that may start with "-" (an odd
// number of them makes it negative).
func parseSigned(s string) (float64, error) {
	v, err := parseNumber(strings.TrimLeft(s, "-"))
	if strings.Count(s, "-")%2 == 1 {
		v = -v
	}
	return v, err
}
