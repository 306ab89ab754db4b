package builtin

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/ioa-nats/ioa/agentkit"
)

// exprRE finds an arithmetic expression in a task: numbers joined by
// operators, with optional parentheses, or a square root alone ("√144",
// which wordOps writes for "the square root of 144"), or a factorial ("7!",
// not the "5!" of "2.5!", hence the space before it). A number may name
// what it counts before a multiplication or division ("4 nights * 120").
var exprRE = regexp.MustCompile(operand + `(?:(?:` + countWord + `|\s*[-+*/x×÷^]|\s+mod\b)\s*` + operand + `)+|` +
	`[(\-]*` + numPat + percentOf + `+(?:\s*%)?\)*|` + `√\(?-?` + numPat + `\)?|` + `(?:^|\s)\d+!(?:\s*[-+*/x×÷^]\s*` + operand + `)*`)

// operand is a number with its signs, roots, parentheses, percent sign and
// factorial, or a chain of percentages of it ("10% of 50% of 200").
const operand = `[(\-√]*` + numPat + percentOf + `*(?:\s*%|!)?\)*`

// countWord is an operator after a word naming what the number before it
// counts, allowed only for "*", "x", "×", "/" or "÷" (with "+" or "-" it
// would join "3 * 4 and -5" into one expression); evalExpr leaves such
// words out.
const countWord = `\s+[a-zA-Z]{2,}(?:\s*[*/×÷]|\s+x)`

// wordRE is a word in an expression, which evalExpr leaves out.
var wordRE = regexp.MustCompile(`[a-zA-Z]{2,}`)

// percentOf continues a percentage with what it is taken of: "15% of 200",
// or with up to two words naming it and an article, "15% tip on 84.50",
// "8% sales tax on 250", "15% tip on a 60 dollar meal".
const percentOf = `(?:\s*%\s*(?:[a-zA-Z]{2,}\s+){0,2}(?:of|on)\s*(?:(?:a|an|the)\s+)?[(\-√]*` + numPat + `)`

// percentOfRE is "% of" in an expression: a percentage multiplies what
// follows ("10% of 50% of 200" is 0.1 * 0.5 * 200).
var percentOfRE = regexp.MustCompile(`%\s*(?:[a-zA-Z]{2,}\s+){0,2}(?:of|on)(?:\s+(?:a|an|the)\b)?\b`)

// wordOps write arithmetic said in words as the expression it means, so
// that "divide 100 by 8" is computed rather than reported as having no
// expression. Each is applied to the whole text, in this order.
var wordOps = func() []wordOp {
	n := `(-?` + numPat + `)`
	var ops []wordOp
	for _, o := range [][2]string{
		{n + `\s*(?:percent|per\s+cent)\b`, "$1%"},
		{`add\s+` + n + `\s*%(?:\s+[a-zA-Z]{2,})?\s+to\s+` + n, "$2 + $1%"},        // "add 15% VAT to 200"
		{`subtract\s+` + n + `\s*%(?:\s+[a-zA-Z]{2,})?\s+from\s+` + n, "$2 - $1%"}, // "subtract 20% from 50"
		{`increase\s+` + n + `\s+by\s+` + n + `\s*%`, "$1 + $2%"},                  // "increase 80 by 25%"
		{`decrease\s+` + n + `\s+by\s+` + n + `\s*%`, "$1 - $2%"},                  // "decrease 200 by 15%"
		{n + `\s*%\s+more\s+than\s+` + n, "$2 + $1%"},                              // "10% more than 50"
		{n + `\s*%\s+less\s+than\s+` + n, "$2 - $1%"},
		{`what\s+percent(?:age)?\s+of\s+` + n + `\s+is\s+` + n, "$2 / $1 * 100"}, // "what percentage of 80 is 20"
		{n + `\s*%\s+off\s+(?:of\s+)?` + n, "$2 - $1%"},                          // "20% off 80"
		{`factorial\s+of\s+(\d+)\b`, "$1!"},
		{`(\d+\s*/\s*\d+)\s+of\s+` + n, "$1 * $2"}, // "1/3 of 90"
		{`(?:a\s+)?half\s+of\s+` + n, "$1 / 2"},
		{`(?:a\s+|one\s+)?third\s+of\s+` + n, "$1 / 3"},
		{`(?:a\s+|one\s+)?quarter\s+of\s+` + n, "$1 / 4"},
		{`(?:the\s+)?remainder\s+(?:of|when)\s+` + n + `\s+(?:is\s+)?divided\s+by\s+` + n, "$1 mod $2"},
		{n + `\s+(?:modulo|mod)\s+` + n, "$1 mod $2"},
		// "split a 90 euro bill between 4", "split the bill of 120 euros among 3"
		{`split\s+(?:(?:a|the|our|my)\s+)?(?:[a-zA-Z]{2,}\s+){0,2}?(?:of\s+)?` + n + `(?:\s+[a-zA-Z]{2,}){0,2}\s+(?:between|among|by)\s+` + n, "$1 / $2"},
		{`(?:double|twice)\s+` + n, "2 * $1"},
		{`triple\s+` + n, "3 * $1"},
		{`halve\s+` + n, "$1 / 2"},
		{n + `(\s+[a-zA-Z]{2,})\s+at\s+` + n, "$1$2 * $3"},  // "3 nights at 90 euros"
		{n + `(\s+[a-zA-Z]{2,}s)\s+of\s+` + n, "$1$2 * $3"}, // "3 boxes of 12 eggs"
		// "the area of a rectangle 5 by 8", "a 4 m by 5 m room": "by" multiplies
		// only beside a shape ("reduce 100 by 20" is no product).
		{`((?:area|rectangle|room|floor|garden|plot|field|wall|board)\b[^\d]{0,40}?)` + n + `(\s*[a-zA-Z]{1,12})?\s+(?:by|x|×)\s+` + n, "$1$2 * $4"}, // the unit left out
		{n + `(\s*[a-zA-Z]{1,12})?\s+by\s+` + n + `((?:\s*[a-zA-Z]{1,12})?\s+(?:rectangle|room|floor|garden|plot|field|wall|board)\b)`, "$1 * $3$4"},
		{`(\d+)\s+factorial\b`, "$1!"},
		{`square\s+root\s+of\s+` + n, "√$1"},
		{n + `\s*\*\*\s*` + n, "$1^$2"}, // "2 ** 8"
		{`sqrt\s*\(\s*` + n + `\s*\)`, "√$1"},
		{`sqrt\s+` + n, "√$1"},
		{n + `\s+squared\b`, "$1^2"},
		{n + `\s+cubed\b`, "$1^3"},
		{n + `\s+(?:raised\s+)?to\s+the\s+power\s+(?:of\s+)?` + n, "$1^$2"},
		{n + `\s+(?:raised\s+)?to\s+the\s+(\d+)(?:st|nd|rd|th)(?:\s+power)?\b`, "$1^$2"},
		{`(?:add|sum\s+of|the\s+sum\s+of)\s+` + n + `\s+(?:and|to|plus)\s+` + n, "$1 + $2"},
		{`subtract\s+` + n + `\s+from\s+` + n, "$2 - $1"},
		{`(?:multiply|product\s+of)\s+` + n + `\s+(?:by|and|times|with)\s+` + n, "$1 * $2"},
		{`(` + numPat + `\s*\*\s*-?` + numPat + `)\s+(?:by|times)\s+` + n, "$1 * $2"}, // "multiply 3 by 4 by 5"
		// A comma groups what comes before it: "12 plus 30, divided by 6".
		{n + `\s+plus\s+` + n + `\s*,\s*(?:and\s+)?(?:then\s+)?divided\s+by\s+` + n, "($1 + $2) / $3"},
		{n + `\s+minus\s+` + n + `\s*,\s*(?:and\s+)?(?:then\s+)?divided\s+by\s+` + n, "($1 - $2) / $3"},
		{n + `\s+plus\s+` + n + `\s*,\s*(?:and\s+)?(?:then\s+)?(?:multiplied\s+by|times)\s+` + n, "($1 + $2) * $3"},
		{n + `\s+minus\s+` + n + `\s*,\s*(?:and\s+)?(?:then\s+)?(?:multiplied\s+by|times)\s+` + n, "($1 - $2) * $3"},
		{`divide\s+` + n + `\s+by\s+` + n, "$1 / $2"},
		{n + `(\s+[a-zA-Z]{2,})?\s+divided\s+by\s+` + n, "$1$2 / $3"},
		{n + `(\s+[a-zA-Z]{2,})?\s+(?:multiplied\s+by|times)\s+` + n, "$1$2 * $3"},
		{n + `\s+(?:euros?|dollars?|usd|eur)?\s*plus\s+` + n, "$1 + $2"},  // "50 euros minus 20%": a currency
		{n + `\s+(?:euros?|dollars?|usd|eur)?\s*minus\s+` + n, "$1 - $2"}, // is a number's, not a unit to convert
	} {
		ops = append(ops, wordOp{regexp.MustCompile(`(?i)\b` + o[0]), o[1]})
	}
	return ops
}()

type wordOp struct {
	re   *regexp.Regexp
	repl string
}

// listOpRE is an operation over a list of numbers said in words: "the
// average of 3, 5 and 10", "the sum of 1, 2, 3 and 4", "add 17, 25 and
// 38". The list's commas
// are followed by a space, which keeps them apart from "3,200".
var listOpRE = func() *regexp.Regexp {
	n := `-?` + numPat
	return regexp.MustCompile(`(?i)\b(?:(average|mean|sum|total|product)\s+of|(add|sum|total))\s+(` +
		n + `(?:\s*,\s+` + n + `)*(?:\s*,?\s+and\s+` + n + `))`)
}()

var listSepRE = regexp.MustCompile(`\s*,?\s+and\s+|\s*,\s+`)

// listOps writes each operation over a list as its expression: the
// average of 3, 5 and 10 is (3 + 5 + 10) / 3.
func listOps(text string) string {
	return listOpRE.ReplaceAllStringFunc(text, func(m string) string {
		sub := listOpRE.FindStringSubmatch(m)
		nums := listSepRE.Split(sub[3], -1)
		switch strings.ToLower(sub[1] + sub[2]) {
		case "average", "mean":
			return fmt.Sprintf("(%s) / %d", strings.Join(nums, " + "), len(nums))
		case "product":
			return strings.Join(nums, " * ")
		default:
			return strings.Join(nums, " + ")
		}
	})
}

// sciRE is a number in scientific notation ("1e3", "2.5E-4").
var sciRE = regexp.MustCompile(`\b\d+(?:\.\d+)?[eE][-+]?\d{1,3}\b`)

// plainScientific writes each number in scientific notation in full ("1e3"
// is 1000): read as it stands, "1e3 + 1" was the expression "3 + 1".
func plainScientific(text string) string {
	return sciRE.ReplaceAllStringFunc(text, func(m string) string {
		v, err := strconv.ParseFloat(m, 64)
		if err != nil || math.IsInf(v, 0) {
			return m
		}
		return formatNumber(v)
	})
}

func symbols(text string) string {
	text = listOps(plainScientific(digitsForWords(text)))
	for _, o := range wordOps {
		// Until nothing changes: "5 plus 5 plus 5" takes two passes, the
		// second joining the "+" the first wrote.
		for range 8 {
			next := o.re.ReplaceAllString(text, o.repl)
			if next == text {
				break
			}
			text = next
		}
	}
	return text
}

// roundRE asks for a rounded answer, to whole numbers or to a number of
// decimal places: "… and round it", "round 3.14159 to 2 decimals", or the
// places alone ("100 / 7 to 3 decimal places"; group 2).
var roundRE = regexp.MustCompile(`(?i)\bround(?:ed)?\b(?:.*?\bto\s+(\d{1,2})\s+(?:decimal\s+places?|decimals?|places?|digits?))?` +
	`|\b(?:to|with|in)\s+(\d{1,2})\s+(?:decimal\s+places?|decimals?|decimal\s+digits?)\b`)

// roundNumberRE is the number a task asks to round when it has no
// expression.
var roundNumberRE = regexp.MustCompile(`(?i)\bround\s+(-?` + numPat + `)`)

// roundTo says whether the task's own text asks for a rounded answer, and
// to how many decimal places. A rounded answer comes last, after its own
// "=", so that a later task's "it" takes it.
func roundTo(desc string) (places int, ok bool) {
	own, _, _ := strings.Cut(desc, "\n\n")
	m := roundRE.FindStringSubmatch(own)
	if m == nil {
		return 0, false
	}
	if n := m[1] + m[2]; n != "" {
		places, _ = strconv.Atoi(n)
	}
	return places, true
}

// roundAlone rounds the number a task names without an expression ("round
// 3.14159 to 2 decimals"), or the earlier answer it refers to ("round it").
func roundAlone(desc string, earlier []agentkit.TaskOutcome, places int) (string, bool, error) {
	own, _, _ := strings.Cut(desc, "\n\n")
	var note string
	if n, _, from, ok := earlierAnswer(earlier); ok && !roundNumberRE.MatchString(own) {
		own, note = backRefRE.ReplaceAllString(own, n), fromEarlier(n, from)
	}
	m := roundNumberRE.FindStringSubmatch(own)
	if m == nil {
		return "", false, nil
	}
	v, err := parseSigned(m[1])
	if err != nil {
		return "", false, err
	}
	return fmt.Sprintf("%s rounded = %s", m[1], strconv.FormatFloat(roundPlaces(v, places), 'f', places, 64)) + note, true, nil
}

func roundPlaces(v float64, places int) float64 {
	p := math.Pow(10, float64(places))
	return math.Round(v*p) / p
}

// oneOperandRE is an operation missing its first operand, which is the
// earlier answer: "… and subtract 10", "then add 5%", "then divide by 2".
var oneOperandRE = regexp.MustCompile(`(?i)^\W*(?:(?:and\s+)?then\s+)?(?:(subtract|add)\s+(-?` + numPat + `)(\s*%)?|(multiply|divide)\s+by\s+(-?` + numPat + `))\W*$`)

// implicitRef names the earlier answer an operation leaves out: "subtract
// 10" is "subtract 10 from it", "add 5%" is "it + 5%" (5% of it), "divide by
// 2" is "divide it by 2".
func implicitRef(own string) string {
	m := oneOperandRE.FindStringSubmatch(own)
	switch {
	case m == nil:
		return own
	case m[3] != "" && strings.EqualFold(m[1], "subtract"):
		return "it - " + m[2] + "%"
	case m[3] != "":
		return "it + " + m[2] + "%"
	case strings.EqualFold(m[1], "subtract"):
		return "subtract " + m[2] + " from it"
	case m[1] != "":
		return "add " + m[2] + " to it"
	default:
		return m[4] + " it by " + m[5]
	}
}

// calculate evaluates every expression of the task's own text ("compute
// 2 + 2 and 3 * 3" answers both: a task answered in part would pass for
// done), and fails on the first it cannot evaluate.
func calculate(ctx context.Context, t agentkit.Task) (agentkit.Result, error) {
	desc := t.TaskDesc
	if own, _, _ := strings.Cut(desc, "\n\n"); quantityAdded(own) != nil {
		// "subtract 3 pounds" from the earlier "22.05 lb": a sum of
		// quantities, each in its unit, as the unit converter adds them.
		return convertUnits(ctx, t)
	}
	t.TaskDesc, t.TaskAbstract = symbols(t.TaskDesc), symbols(t.TaskAbstract)
	if answer, ok, err := compare(t.TaskDesc); ok {
		return agentkit.Result{Conclusion: answer}, err
	}
	exprs := findAll(exprRE, t)
	var note string
	if len(exprs) == 0 { // "then divide it by 2"
		exprs, note = findWithEarlierAnswer(t, exprRE, func(own, n, _ string) string {
			return symbols(backRefRE.ReplaceAllString(implicitRef(own), n))
		})
	}
	if len(exprs) > 0 && note == "" {
		if left := unusedNumbers(t.TaskDesc, exprs); len(left) > 0 {
			return agentkit.Result{}, fmt.Errorf("%q: the calculator read %s and did not use %s; write the whole calculation as one expression (e.g. \"3 * (2 + 5)\")",
				firstLine(desc), quoteJoin(exprs), strings.Join(left, ", "))
		}
	}
	places, rounds := roundTo(desc)
	if len(exprs) == 0 && rounds { // "round 3.14159 to 2 decimals", "… and round it"
		if answer, ok, err := roundAlone(desc, t.Earlier, places); ok || err != nil {
			return agentkit.Result{Conclusion: answer}, err
		}
	}
	if len(exprs) == 0 && conversionRE.MatchString(firstLine(desc)) {
		return agentkit.Result{}, fmt.Errorf("%q asks for a conversion: the calculator converts no units or currencies "+
			`(it computes expressions like "19.5 * 4", "15%% of 200" or "divide 100 by 8")`, firstLine(desc))
	}
	if own, _, _ := strings.Cut(desc, "\n\n"); len(exprs) == 0 && backRefRE.MatchString(own) {
		if e, ok := lastCompleted(t.Earlier); ok {
			if _, _, _, found := earlierAnswer(t.Earlier); !found {
				// "Count the words in todo.txt, then double it": which count?
				return agentkit.Result{}, fmt.Errorf("%q works on an earlier result, and none is one answer (a number after \"=\") to take: %s gave %q; "+
					"name the number (\"double 7\")", firstLine(desc), e.TaskID, oneLine(e.Result))
			}
		}
	}
	if len(exprs) == 0 {
		return agentkit.Result{}, fmt.Errorf("no arithmetic expression found in %q "+
			`(it computes expressions like "19.5 * 4", "15%% of 200", "divide 100 by 8" or "the average of 3, 5 and 10")`, firstLine(desc))
	}
	var then []string // "… and halve it", when "it" is not an earlier answer
	if note == "" {
		then = thenOpRE.FindStringSubmatch(ownWithout(t.TaskDesc, exprs))
	}
	if then != nil && len(exprs) > 1 {
		return agentkit.Result{}, fmt.Errorf("%q: the calculator read %s and cannot tell which result to %s; ask for it as a step of its own",
			firstLine(desc), quoteJoin(exprs), strings.ToLower(then[1]))
	}
	answers := make([]string, len(exprs))
	for i, m := range exprs {
		expr := strings.TrimSpace(m[0])
		v, err := evalExpr(expr)
		if err != nil {
			return agentkit.Result{}, fmt.Errorf("%s: %w", expr, err)
		}
		answers[i] = fmt.Sprintf("%s = %s", expr, formatNumber(v))
		if then != nil { // "compute 7 * 8 and halve it"
			op := thenOps[strings.ToLower(then[1])]
			v = op.apply(v)
			answers[i] += fmt.Sprintf(", %s = %s", op.done, formatNumber(v))
		}
		if r := roundPlaces(v, places); rounds && r != v {
			answers[i] += ", rounded = " + strconv.FormatFloat(r, 'f', places, 64)
		}
	}
	return agentkit.Result{Conclusion: strings.Join(answers, "; ") + note}, nil
}

// compareSide is one side of a comparison: a number or an expression.
const compareSide = `[(\-√]*` + numPat + `\)*(?:\s*[-+*/x×÷^]\s*[(\-√]*` + numPat + `\)*)*`

// compareRE asks which of two numbers or expressions is the larger or the
// smaller: "what's bigger, 2^10 or 1000?" (groups: the word, the words
// before the first side, both sides).
var compareRE = regexp.MustCompile(`(?i)\b(bigger|larger|greater|higher|more|smaller|less|lower)\b([^0-9(√\-]*?)(` +
	compareSide + `)\s*,?\s+or\s+(` + compareSide + `)`)

// compare answers a comparison in the task's own text; ok is false when it
// asks for none. Read as expressions, "2^10 or 1000" gave "2^10 = 1024",
// which answers another question and passed for done.
func compare(desc string) (string, bool, error) {
	own, _, _ := strings.Cut(desc, "\n\n")
	m := compareRE.FindStringSubmatch(own)
	if m == nil || strings.Contains(strings.ToLower(m[2]), "than") {
		return "", false, nil // "is 5 more than 4 or 6" compares with something else
	}
	a, b := strings.TrimSpace(m[3]), strings.TrimSpace(m[4])
	va, err := evalExpr(a)
	if err != nil {
		return "", true, fmt.Errorf("%s: %w", a, err)
	}
	vb, err := evalExpr(b)
	if err != nil {
		return "", true, fmt.Errorf("%s: %w", b, err)
	}
	side := func(expr string, v float64) string {
		if n := formatNumber(v); n != expr {
			return expr + " = " + n
		}
		return expr
	}
	word := strings.ToLower(m[1])
	larger := word == "bigger" || word == "larger" || word == "greater" || word == "higher" || word == "more"
	switch {
	case va == vb:
		return fmt.Sprintf("%s and %s are equal", side(a, va), side(b, vb)), true, nil
	case (va > vb) == larger:
		return fmt.Sprintf("%s is %s than %s", side(a, va), word, side(b, vb)), true, nil
	default:
		return fmt.Sprintf("%s is %s than %s", side(b, vb), word, side(a, va)), true, nil
	}
}

// conversionRE is a task that asks to convert a quantity ("convert 100
// euros to dollars"), which a loose match may hand to the calculator.
var conversionRE = regexp.MustCompile(`(?i)\bconvert\b.*\d\s*[a-z$€£]+\s+(?:to|in|into)\s+[a-z$€£]+`)

// thenOpRE is an operation on the task's own result ("compute 7 * 8 and
// halve it"): left out, the answer would be the product, reported done.
var thenOpRE = regexp.MustCompile(`(?i)\b(double|halve|triple)\s+(?:it|that|this|the\s+result)\b`)

// thenOps are what thenOpRE's operations do to a result.
var thenOps = map[string]struct {
	done  string
	apply func(float64) float64
}{
	"double": {"doubled", func(v float64) float64 { return 2 * v }},
	"halve":  {"halved", func(v float64) float64 { return v / 2 }},
	"triple": {"tripled", func(v float64) float64 { return 3 * v }},
}

// operandRE is a number that an operation takes: one next to an operator
// or an operator word ("3 times", "by 5", "- 2", "20 percent"), not one
// that only sets the scene ("for 3 people", "in 2026", "a 3-day trip"),
// nor part of a word or name ("t1", "notes2.txt", "10th").
var operandRE = regexp.MustCompile(`(?i)(?:(?:\b(?:times|plus|minus|by|over|than)\s+|[-+*/×÷^]\s*)(` + numPat + `)\b` +
	`|(?:^|[^\w.,])(` + numPat + `)\s*(?:[+*/×÷^%!]|-[\s\d(]|\b(?:x|times|plus|minus|percent|per\s+cent|squared|cubed|factorial|divided|multiplied|to\s+the)\b))`)

// unusedNumbers are the numbers of the task's own text (desc, as symbols
// wrote it) that an operation would take but none of the expressions
// found in it does: "multiply 3 by 4 by 5" read as 3 * 4, or "3 times the
// sum of 2 and 5" read as 2 + 5, would be an answer to another question
// that passes for done.
func unusedNumbers(desc string, exprs [][]string) []string {
	var left []string
	for _, m := range operandRE.FindAllStringSubmatch(ownWithout(desc, exprs), -1) {
		left = append(left, m[1]+m[2])
	}
	return left
}

// ownWithout is the task's own text (desc's first paragraph) with what the
// matches done took blanked out, every copy of each (findAll keeps one):
// what is left is what the worker did not use.
func ownWithout(desc string, done [][]string) string {
	own, _, _ := strings.Cut(desc, "\n\n")
	for _, m := range done {
		own = strings.ReplaceAll(own, m[0], " ")
	}
	return own
}

func quoteJoin(exprs [][]string) string {
	q := make([]string, len(exprs))
	for i, m := range exprs {
		q[i] = strconv.Quote(strings.TrimSpace(m[0]))
	}
	return strings.Join(q, " and ")
}

// findAll returns re's distinct matches (with their groups) in the task's
// own text: its description's first paragraph (later ones carry earlier
// tasks' results, which are not this task's to redo), else its abstract.
func findAll(re *regexp.Regexp, t agentkit.Task) [][]string {
	for _, text := range []string{t.TaskDesc, t.TaskAbstract} {
		text, _, _ = strings.Cut(text, "\n\n")
		var out [][]string
		seen := map[string]bool{}
		for _, m := range re.FindAllStringSubmatch(text, -1) {
			if key := strings.ToLower(strings.TrimSpace(m[0])); !seen[key] {
				seen[key] = true
				out = append(out, m)
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	return nil
}

// formatNumber writes an integer in full and anything else to 12
// significant digits (100 / 3 is 33.3333333333, not 33.333333333333336).
func formatNumber(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 12, 64)
}

// evalExpr evaluates + - * / ^ and √ with parentheses by recursive
// descent; "x" and "×" multiply, "÷" divides, "mod" is the remainder, "a%"
// is a/100, "a% of b" takes a percentage and "n!" is a factorial.
func evalExpr(s string) (float64, error) {
	s, err := plainNumbers(s)
	if err != nil {
		return 0, err
	}
	s = percentOfRE.ReplaceAllString(s, "%*")
	s = modRE.ReplaceAllString(s, "@")
	s = wordRE.ReplaceAllString(s, "")
	r := strings.NewReplacer("x", "*", "×", "*", "÷", "/")
	p := &parser{s: strings.ReplaceAll(r.Replace(s), " ", "")}
	v, err := p.sum()
	if err == nil && p.i < len(p.s) {
		err = fmt.Errorf("unexpected %q", p.s[p.i:])
	}
	if err == nil && (math.IsInf(v, 0) || math.IsNaN(v)) {
		err = errors.New("the result is not a finite number (division by zero?)")
	}
	return v, err
}

// modRE is the remainder operator ("17 mod 5"), which evalExpr reads as
// "@" before it leaves out the words of an expression.
var modRE = regexp.MustCompile(`\bmod\b`)

// barePercentRE is a term that is a percentage of nothing named: "10%"
// in "50 - 10%".
var barePercentRE = regexp.MustCompile(`^\(*[\d.]+%\)*$`)

type parser struct {
	s     string
	i     int
	depth int
}

func (p *parser) peek() byte {
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *parser) sum() (float64, error) {
	v, err := p.product()
	for err == nil && (p.peek() == '+' || p.peek() == '-') {
		op := p.peek()
		p.i++
		var w float64
		start := p.i
		w, err = p.product()
		if barePercentRE.MatchString(p.s[start:p.i]) {
			w *= v // "50 + 10%" adds 10% of 50, as a calculator's % key does
		}
		if op == '+' {
			v += w
		} else {
			v -= w
		}
	}
	return v, err
}

func (p *parser) product() (float64, error) {
	v, err := p.power()
	for err == nil && (p.peek() == '*' || p.peek() == '/' || p.peek() == '@') {
		op := p.peek()
		p.i++
		var w float64
		w, err = p.power()
		switch op {
		case '*':
			v *= w
		case '/':
			v /= w
		default:
			v = math.Mod(v, w) // NaN for 0, refused as not finite
		}
	}
	return v, err
}

func (p *parser) power() (float64, error) {
	v, err := p.unary()
	if err == nil && p.peek() == '^' {
		p.i++
		var w float64
		w, err = p.power()
		v = math.Pow(v, w)
	}
	return v, err
}

func (p *parser) unary() (float64, error) {
	if strings.HasPrefix(p.s[p.i:], "√") {
		if p.depth++; p.depth > 50 {
			return 0, errors.New("too deeply nested")
		}
		p.i += len("√")
		v, err := p.unary()
		p.depth--
		if err == nil && v < 0 {
			err = fmt.Errorf("no real square root of %s", formatNumber(v))
		}
		return math.Sqrt(v), err
	}
	if p.peek() == '-' {
		p.i++
		v, err := p.unary()
		return -v, err
	}
	if p.peek() == '(' {
		if p.depth++; p.depth > 50 {
			return 0, errors.New("too deeply nested")
		}
		p.i++
		v, err := p.sum()
		if err != nil {
			return 0, err
		}
		if p.peek() != ')' {
			return 0, errors.New("missing )")
		}
		p.i++
		p.depth--
		return v, nil
	}
	start := p.i
	for p.i < len(p.s) && (p.s[p.i] >= '0' && p.s[p.i] <= '9' || p.s[p.i] == '.') {
		p.i++
	}
	if start == p.i {
		return 0, fmt.Errorf("expected a number at %q", p.s[start:])
	}
	v, err := strconv.ParseFloat(p.s[start:p.i], 64)
	if err != nil {
		return 0, fmt.Errorf("bad number %q", p.s[start:p.i])
	}
	switch p.peek() {
	case '%':
		p.i++
		v /= 100
	case '!':
		p.i++
		return factorial(v)
	}
	return v, nil
}

// maxFactorial is the largest n whose factorial is a finite float64.
const maxFactorial = 170

func factorial(n float64) (float64, error) {
	if n != math.Trunc(n) || n > maxFactorial {
		return 0, fmt.Errorf("factorial of %s: only whole numbers up to %d have one here", formatNumber(n), maxFactorial)
	}
	v := 1.0
	for k := 2.0; k <= n; k++ {
		v *= k
	}
	return v, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return s
}
