package builtin

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Numbers said in words ("twenty plus five", "one hundred and five") and
// numbers with a scale word ("1.5 million") are written in digits before a
// task is read: "7% of 1.5 million" was read as 7% of 1.5 and reported done.

var numberWordValues = map[string]float64{
	"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
	"ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16,
	"seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50,
	"sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90,
}

var scaleValues = map[string]float64{"thousand": 1e3, "million": 1e6, "billion": 1e9}

// numberWordsRE is a run of number words, joined by spaces, hyphens or
// "and" ("one hundred and five", "twenty-five"), built from the words above.
// "One" before a fraction word stays a word: "one third of 90" is a
// fraction (wordOps).
var numberWordsRE = func() *regexp.Regexp {
	words := []string{"hundred"}
	for w := range numberWordValues {
		words = append(words, w)
	}
	for w := range scaleValues {
		words = append(words, w)
	}
	// Longest first, so that "seventeen" is not read as "seven".
	slices.SortFunc(words, func(a, b string) int { return len(b) - len(a) })
	w := "(?:" + strings.Join(words, "|") + ")"
	return regexp.MustCompile(`(?i)\b` + w + `(?:[\s-]+(?:and\s+)?` + w + `)*\b`)
}()

var fractionAfterRE = regexp.MustCompile(`(?i)^\s+(?:half|third|quarter|fifth)s?\b`)

// scaledRE is a number in digits with a scale word: "1.5 million".
var scaledRE = regexp.MustCompile(`(?i)\b(\d+(?:\.\d+)?)\s+(thousand|million|billion)\b`)

// digitsForWords writes numbers said in words, and numbers with a scale
// word, in digits.
func digitsForWords(text string) string {
	text = scaledRE.ReplaceAllStringFunc(text, func(m string) string {
		sub := scaledRE.FindStringSubmatch(m)
		v, err := strconv.ParseFloat(sub[1], 64)
		if err != nil {
			return m
		}
		return formatNumber(v * scaleValues[strings.ToLower(sub[2])])
	})
	out := []byte(nil)
	last := 0
	for _, loc := range numberWordsRE.FindAllStringIndex(text, -1) {
		words := strings.Fields(strings.NewReplacer("-", " ").Replace(strings.ToLower(text[loc[0]:loc[1]])))
		if len(words) == 1 && words[0] == "one" && fractionAfterRE.MatchString(text[loc[1]:]) {
			continue
		}
		if len(words) == 1 && (scaleValues[words[0]] > 0 || words[0] == "hundred") {
			continue // "a million thanks", "a hundred": no number on its own
		}
		out = append(out, text[last:loc[0]]...)
		out = append(out, strings.Join(readNumberWords(words), " ")...)
		last = loc[1]
	}
	return string(append(out, text[last:]...))
}

// readNumberWords reads number words as numbers: one, unless two numbers
// stand side by side ("five six" is 5 6, not 11).
func readNumberWords(words []string) []string {
	var nums []string
	total, current := 0.0, 0.0
	started, lastSmall, and := false, false, false
	flush := func() {
		if started {
			nums = append(nums, formatNumber(total+current))
		}
		if and {
			nums = append(nums, "and") // "five, six and seven" stays a list
		}
		total, current, started, lastSmall, and = 0, 0, false, false, false
	}
	for _, w := range words {
		switch {
		case w == "and":
			and = true
			continue
		case w == "hundred":
			current = max(current, 1) * 100
			lastSmall = false
		case scaleValues[w] > 0:
			total += max(current, 1) * scaleValues[w]
			current, lastSmall = 0, false
		default:
			v := numberWordValues[w]
			small := v < 20
			// A word of the tens after a unit, or a unit after a unit or
			// a teen, begins another number.
			if started && (lastSmall || v >= 20 && int(current)%100 != 0) {
				flush()
			}
			current += v
			lastSmall = small
		}
		started, and = true, false
	}
	flush()
	return nums
}
