package builtin

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"

	"github.com/ioa-nats/ioa/agentkit"
)

// A task may work on an earlier task's answer: "Convert 10 miles to km,
// then divide it by 2". The rules policy gives it the earlier results; the
// workers take the last answer for the word that refers to it.

// refWords are the words that stand for an earlier task's answer.
const refWords = `(?:the\s+result|that\s+result|the\s+answer|that\s+many|that\s+much|it|that|this)`

// backRefRE is such a word in a calculation: "divide it by 2".
var backRefRE = regexp.MustCompile(`(?i)\b` + refWords + `\b`)

// answerRE is an answer in a result: the number after an "=", and the unit
// after it if there is one ("= 37.78 °C").
var answerRE = regexp.MustCompile(`=\s*(-?` + numPat + `)(?:[ \t]*(°?[a-zA-Z/]+))?`)

// earlierAnswer is the answer of the last earlier task that completed with
// one (the last number after an "=" in its result) and that task's id.
func earlierAnswer(earlier []agentkit.TaskOutcome) (n, unit, taskID string, ok bool) {
	for _, e := range slices.Backward(earlier) {
		if e.Status != "completed" {
			continue
		}
		if ms := answerRE.FindAllStringSubmatch(e.Result, -1); len(ms) > 0 {
			last := ms[len(ms)-1]
			return exactAnswer(e.Result, last[1], last[2]), last[2], e.TaskID, true
		}
	}
	return "", "", "", false
}

// lastCompleted is the last earlier task that completed.
func lastCompleted(earlier []agentkit.TaskOutcome) (agentkit.TaskOutcome, bool) {
	for _, e := range slices.Backward(earlier) {
		if e.Status == "completed" {
			return e, true
		}
	}
	return agentkit.TaskOutcome{}, false
}

// convResultRE is a conversion's answer in a result, "5 km + 3 miles =
// 9.83 km": group 1 the quantities, 2 the number, 3 its unit.
var convResultRE = regexp.MustCompile(`(?i)((?:-?` + numPat + `\s*` + unitPat + `\s*` + addOp + `?\s*)+)=\s*(-?` + numPat + `)[ \t]*(°?[a-zA-Z/]+)`)

// exactAnswer is the answer n (of unit) that an earlier result printed, or,
// when that result is a conversion, its value unrounded, computed again
// from the quantities: a conversion chained on "10 km = 6.21 miles" gave
// 32788.80 ft for 10 km, 20 ft short.
func exactAnswer(result, n, unit string) string {
	ms := convResultRE.FindAllStringSubmatch(result, -1)
	if len(ms) == 0 || unit == "" {
		return n
	}
	last := ms[len(ms)-1]
	to, ok := lookUnit(unit)
	if !ok || last[2] != n || !strings.EqualFold(last[3], unit) {
		return n
	}
	v, _, err := convertSum(last[1], to)
	printed, perr := parseSigned(n)
	if err != nil || perr != nil {
		return n
	}
	// Only a value that rounds to the printed one is that answer ("about
	// 10 km = 7 miles" is no conversion of this converter's).
	places := 0
	if _, frac, ok := strings.Cut(n, "."); ok {
		places = len(frac)
	}
	if math.Abs(v-printed) > 0.5*math.Pow(10, -float64(places))+1e-9 {
		return n
	}
	return formatNumber(v)
}

// unitBackRefRE is an earlier task's answer named by a word before its unit:
// "convert it from km to miles".
var unitBackRefRE = regexp.MustCompile(`(?i)\b` + refWords + `\s+(?:from\s+)?(°?[a-z/]+\s+(?:to|in|into)\s)`)

// targetOnlyRE is a conversion that names only the unit to convert to, the
// earlier answer's unit being the one to convert from: "then to kelvin",
// "convert it to miles".
var targetOnlyRE = regexp.MustCompile(`(?i)^\W*(?:(?:and\s+)?then\s+)?(?:convert\s+)?(?:` + refWords + `\s+)?((?:to|in|into)\s+°?[a-z/]+(?:\s+per\s+hour)?)\W*$`)

// addQuantityRE adds a quantity to the earlier answer, or takes one from
// it: "and add 2 km", "subtract 500 m from it". Group 1 is the operation,
// 2 the quantity.
var addQuantityRE = regexp.MustCompile(`(?i)^\W*(?:(?:and\s+)?then\s+)?(add|subtract)\s+(` + quantity + `)(?:\s+(?:to|from)\s+` + refWords + `)?\W*$`)

// quantityAdded is addQuantityRE's match of own when its quantity is in a
// unit the converter knows ("add 2 km", not "add 3 apples" nor "subtract
// 10 percent").
func quantityAdded(own string) []string {
	m := addQuantityRE.FindStringSubmatch(own)
	if m == nil {
		return nil
	}
	if q := termRE.FindStringSubmatch(m[2]); q == nil {
		return nil
	} else if _, ok := lookUnit(q[3]); !ok {
		return nil
	}
	return m
}

// findWithEarlierAnswer finds re's matches in the task's own text once
// rewrite has put the last earlier answer (its number, and its unit when
// it has one) in it, and a note saying where that number came from;
// nothing when there is no earlier answer or the text still has no match.
func findWithEarlierAnswer(t agentkit.Task, re *regexp.Regexp, rewrite func(own, n, unit string) string) ([][]string, string) {
	n, unit, from, ok := earlierAnswer(t.Earlier)
	if !ok {
		return nil, ""
	}
	own, rest, _ := strings.Cut(t.TaskDesc, "\n\n")
	t.TaskDesc, t.TaskAbstract = rewrite(own, n, unit)+"\n\n"+rest, ""
	found := findAll(re, t)
	if len(found) == 0 {
		return nil, ""
	}
	return found, fromEarlier(n, from)
}

// fromEarlier is the note a result carries when it worked on the answer n
// of the earlier task taskID.
func fromEarlier(n, taskID string) string {
	return fmt.Sprintf(" (%s: the result of %s)", n, taskID)
}
