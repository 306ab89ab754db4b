package builtin

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/ioa-nats/ioa/agentkit"
)

type unit struct {
	name  string
	kind  string
	toSI  func(float64) float64
	frSI  func(float64) float64
	names []string
}

func linear(f float64) (func(float64) float64, func(float64) float64) {
	return func(v float64) float64 { return v * f }, func(v float64) float64 { return v / f }
}

var units = func() map[string]unit {
	var list []unit
	add := func(name, kind string, f float64, names ...string) {
		to, fr := linear(f)
		list = append(list, unit{name, kind, to, fr, append(names, name)})
	}
	add("km", "length", 1000, "kilometre", "kilometres", "kilometer", "kilometers")
	add("m", "length", 1, "metre", "metres", "meter", "meters")
	add("cm", "length", 0.01, "centimetre", "centimetres", "centimeter", "centimeters")
	add("miles", "length", 1609.344, "mile", "mi")
	add("ft", "length", 0.3048, "foot", "feet")
	add("in", "length", 0.0254, "inch", "inches")
	add("yd", "length", 0.9144, "yard", "yards")
	add("mm", "length", 0.001, "millimetre", "millimetres", "millimeter", "millimeters")
	add("tonnes", "mass", 1000, "tonne") // metric: a "ton" may be a short one
	add("kg", "mass", 1, "kilogram", "kilograms", "kilo", "kilos")
	add("g", "mass", 0.001, "gram", "grams")
	add("lb", "mass", 0.45359237, "lbs", "pound", "pounds")
	add("oz", "mass", 0.028349523125, "ounce", "ounces")
	add("l", "volume", 1, "litre", "litres", "liter", "liters")
	add("ml", "volume", 0.001, "millilitre", "millilitres", "milliliter", "milliliters")
	add("cups", "volume", 0.2365882365, "cup") // a US cup
	add("gallons", "volume", 3.785411784, "gallon", "gal")
	add("km/h", "speed", 1/3.6, "kph", "kmh")
	add("mph", "speed", 0.44704, "miles per hour")
	add("m/s", "speed", 1, "mps")
	add("seconds", "time", 1, "second", "sec", "secs", "s")
	add("minutes", "time", 60, "minute", "min", "mins")
	add("hours", "time", 3600, "hour", "hr", "hrs", "h")
	add("days", "time", 86400, "day")
	add("weeks", "time", 7*86400, "week")
	list = append(list,
		unit{"°C", "temperature", func(v float64) float64 { return v }, func(v float64) float64 { return v }, []string{"°C", "c", "celsius", "degrees celsius"}},
		unit{"°F", "temperature", func(v float64) float64 { return (v - 32) * 5 / 9 }, func(v float64) float64 { return v*9/5 + 32 }, []string{"°F", "f", "fahrenheit", "degrees fahrenheit"}},
		unit{"K", "temperature", func(v float64) float64 { return v - 273.15 }, func(v float64) float64 { return v + 273.15 }, []string{"K", "k", "kelvin", "kelvins", "degrees kelvin"}},
	)
	m := map[string]unit{}
	for _, u := range list {
		for _, n := range u.names {
			m[strings.ToLower(n)] = u
		}
	}
	return m
}()

// unitPat is a unit as written after a number: "km", "°C", "miles per
// hour", "degrees celsius".
const unitPat = `°?[a-z/]+(?:\s+per\s+hour)?(?:\s+(?:celsius|fahrenheit|kelvin))?`

// convRE is a conversion: "<number> <unit> to <unit>", or a sum of
// quantities converted at once ("5 km plus 3 miles in km"): group 1 is the
// quantities added before the last one, groups 2 and 3 the last one, group 4
// the unit to convert to.
var convRE = regexp.MustCompile(`(?i)((?:-?` + numPat + `\s*` + unitPat + `\s*` + addOp + `?\s*)*)` +
	`(-?` + numPat + `)\s*(` + unitPat + `)\s+(?:to|in|into)\s+(°?[a-z/]+(?:\s+per\s+hour)?)`)

// addOp joins quantities that are added or subtracted; quantities written
// side by side ("5 feet 10 inches") are added too.
const addOp = `(?:\+|\bplus\b|\bminus\b|-)`

// termRE is one quantity of a sum with the sign before it.
var termRE = regexp.MustCompile(`(?i)(` + addOp + `)?\s*(-?` + numPat + `)\s*(` + unitPat + `)`)

// howManyRE is a conversion asked as a question: "how many miles is 42
// km" is "42 km to miles", as is "how many seconds are (there) in 3 hours".
var howManyRE = regexp.MustCompile(`(?i)\bhow\s+many\s+(°?[a-z/]+(?:\s+per\s+hour)?)\s+(?:(?:is|are|make|makes)(?:\s+(?:there\s+)?in)?|in)\s+((?:-?` + numPat + `|an?\s|one\s)\s*°?[a-z/]+(?:\s+per\s+hour)?)`)

// oneRE is "a", "an" or "one" standing for the number 1 before a unit ("how
// many hours are in a week").
var oneRE = regexp.MustCompile(`(?i)^(?:an?|one)\s+`)

// convertUnits converts every "<number> <unit> to <unit>" (or "how many
// <unit> is <number> <unit>", or a sum of quantities "to <unit>") of the
// task's own text (all of them: a task answered in part would pass for
// done), and fails on the first between kinds of unit that do not convert.
func convertUnits(_ context.Context, t agentkit.Task) (agentkit.Result, error) {
	desc := t.TaskDesc
	t.TaskDesc, t.TaskAbstract = conversions(t.TaskDesc), conversions(t.TaskAbstract)
	found := findAll(convRE, t)
	convs := slices.DeleteFunc(slices.Clone(found), notUnits) // "add 1 mile to it" is none
	var note string
	if len(convs) == 0 { // "then convert it from km to miles", "then to kelvin"
		convs, note = findWithEarlierAnswer(t, convRE, func(own, n, unit string) string {
			if m := quantityAdded(own); m != nil && unit != "" { // "and add 2 km"
				op := " plus "
				if strings.EqualFold(m[1], "subtract") {
					op = " minus "
				}
				return n + " " + unit + op + m[2] + " in " + unit
			}
			if targetOnlyRE.MatchString(own) && unit != "" {
				return targetOnlyRE.ReplaceAllString(own, n+" "+unit+" $1")
			}
			return unitBackRefRE.ReplaceAllString(own, n+" $1")
		})
		convs = slices.DeleteFunc(convs, notUnits)
	}
	// Answers have 2 decimals, or as many as the task asks for ("… and
	// round to 1 decimal").
	places := 2
	if p, ok := roundTo(desc); ok {
		places = p
	}
	var answers []string
	var done [][]string
	for _, m := range convs {
		to := units[strings.ToLower(m[4])]
		answer, err := convert(m[1]+m[2]+" "+m[3], to, places)
		if err != nil {
			return agentkit.Result{}, err
		}
		answers, done = append(answers, answer), append(done, usedPart(m, to))
	}
	if len(answers) == 0 {
		if name := unknownUnit(found); name != "" {
			return agentkit.Result{}, fmt.Errorf("%q: the unit converter does not know the unit %q; it converts %s", firstLine(desc), name, knownUnits)
		}
		return agentkit.Result{}, fmt.Errorf("no conversion like \"5 km to miles\" found in %q", firstLine(desc))
	}
	if note == "" {
		if left := unusedQuantities(t.TaskDesc, done); len(left) > 0 {
			return agentkit.Result{}, fmt.Errorf("%q: the unit converter read %s and did not use %s; name each quantity with its unit and the unit to convert it to",
				firstLine(desc), quoteJoin(done), strings.Join(left, ", "))
		}
		// "a report of 12 * 3 and 100 fahrenheit in celsius": the
		// calculation is left undone, and the task with it.
		if left := unusedNumbers(t.TaskDesc, done); len(left) > 0 {
			return agentkit.Result{}, fmt.Errorf("%q: the unit converter converted %s and does not compute with %s; ask for the calculation on its own",
				firstLine(desc), quoteJoin(done), strings.Join(left, ", "))
		}
	}
	return agentkit.Result{Conclusion: strings.Join(answers, "; ") + note}, nil
}

// usedPart is the conversion m as far as it was converted: in "12 * 3 and
// 100 fahrenheit in celsius" the match begins at "3 and", a number whose
// "unit" sumTerms leaves out, and that number is not used.
func usedPart(m []string, to unit) []string {
	used := sumTerms(m[1]+m[2]+" "+m[3], to)
	if len(used) == 0 {
		return m
	}
	i := strings.Index(m[0], strings.TrimSpace(used[0][0]))
	if i <= 0 {
		return m
	}
	m = slices.Clone(m)
	m[0] = m[0][i:]
	return m
}

// notUnits says a match of convRE names a unit it does not know on either
// side ("1 mile to it").
// unknownUnit is the first unit of the conversions found that the
// converter does not know ("5 parsecs to km"), or "" when it knows them all.
func unknownUnit(found [][]string) string {
	for _, m := range found {
		from, to := unitsKnown(m)
		if !from {
			return m[3]
		}
		if !to && !pronounRE.MatchString(m[4]) {
			return m[4]
		}
	}
	return ""
}

// pronounRE is a word that stands for an earlier answer ("add 1 mile to
// it"), not a unit.
var pronounRE = regexp.MustCompile(`(?i)^(?:it|that|this|them|those|these|the)$`)

// knownUnits lists the units the converter knows, by kind, for its errors.
var knownUnits = func() string {
	byKind := map[string][]string{}
	var kinds []string
	for _, u := range units {
		if !slices.Contains(byKind[u.kind], u.name) {
			if byKind[u.kind] == nil {
				kinds = append(kinds, u.kind)
			}
			byKind[u.kind] = append(byKind[u.kind], u.name)
		}
	}
	slices.Sort(kinds)
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		slices.Sort(byKind[k])
		parts[i] = k + " (" + strings.Join(byKind[k], ", ") + ")"
	}
	return strings.Join(parts, "; ")
}()

func notUnits(m []string) bool {
	from, to := unitsKnown(m)
	return !to || !from
}

// unitsKnown says whether the converter knows a conversion's unit to
// convert from (m[3]) and to (m[4]).
func unitsKnown(m []string) (from, to bool) {
	_, from = lookUnit(m[3])
	_, to = units[strings.ToLower(m[4])]
	return from, to
}

// unusedQuantities are the quantities of the task's own text (as
// conversions wrote it) of a kind it converts that none of the conversions
// done takes: "5 km and 3 km to miles" read as 3 km alone would pass for
// done. A quantity of another kind sets the scene ("for a 3 day trip,
// convert 500 km to miles"), as does a number without a unit.
func unusedQuantities(desc string, done [][]string) []string {
	kinds := map[string]bool{}
	for _, m := range done {
		to, _ := lookUnit(m[4])
		kinds[to.kind] = true
	}
	var left []string
	for _, m := range termRE.FindAllStringSubmatch(ownWithout(desc, done), -1) {
		if u, ok := lookUnit(m[3]); ok && kinds[u.kind] {
			left = append(left, m[2]+" "+m[3])
		}
	}
	return left
}

// quantity is a number with its unit ("5 km", "-3 °C").
const quantity = `-?` + numPat + `\s*` + unitPat

// listToRE is a list of quantities converted to one unit: "5 km and 3 km
// to miles", "1 kg, 2 kg and 500 g in pounds" (group 1 the list, group 2
// "to <unit>").
var listToRE = regexp.MustCompile(`(?i)(` + quantity + `(?:\s*,\s+` + quantity + `)*\s*,?\s+and\s+` + quantity + `)\s+((?:to|in|into)\s+°?[a-z/]+(?:\s+per\s+hour)?)`)

// toListRE is a quantity converted to several units: "10 kg to pounds and
// ounces" (group 1 the quantity, 2 "to", 3 the units).
var toListRE = regexp.MustCompile(`(?i)(` + quantity + `)\s+(to|in|into)\s+(°?[a-z/]+(?:\s*,\s+°?[a-z/]+)*\s*,?\s+and\s+°?[a-z/]+)\b`)

// ofWhatRE is a quantity that says what it measures before the unit to
// convert it to: "200 km of driving in miles" is "200 km in miles".
var ofWhatRE = regexp.MustCompile(`(?i)(` + quantity + `)\s+of\s+[a-z]{3,}\s+((?:to|in|into)\s+°?[a-z/]+)`)

// unitFirstRE names the unit before the quantity: "convert to miles: 42
// km" (group 1 the unit, group 2 the quantity).
var unitFirstRE = regexp.MustCompile(`(?i)\b(?:to|into|in)\s+(°?[a-z/]+(?:\s+per\s+hour)?)\s*:\s*(` + quantity + `)`)

// sumAfterRE adds a quantity after the conversion of another: "45 minutes
// in hours plus 2 hours" is "45 minutes plus 2 hours in hours" (groups: the
// first quantity, its target unit, the operator, the second quantity).
var sumAfterRE = regexp.MustCompile(`(?i)(` + quantity + `)\s+(?:to|in|into)\s+(°?[a-z/]+)\s+(plus|minus)\s+(` + quantity + `)`)

// compoundRE is a quantity said in two units joined by "and" ("2 hours and
// 30 minutes"): groups are the two numbers and units.
var compoundRE = regexp.MustCompile(`(?i)(-?` + numPat + `)\s*(` + unitPat + `)\s+and\s+(-?` + numPat + `)\s*(` + unitPat + `)`)

// compounds writes a quantity said in a larger and a smaller unit of one
// kind as their sum ("2 hours and 30 minutes" is 2 hours plus 30 minutes),
// which a list of two quantities ("5 km and 3 km") never is.
// The last two of a longer list ("1 kg, 2 kg and 500 g") stay a list.
func compounds(text string) string {
	var out strings.Builder
	last := 0
	for _, loc := range compoundRE.FindAllStringSubmatchIndex(text, -1) {
		sub := func(i int) string { return text[loc[2*i]:loc[2*i+1]] }
		a, okA := lookUnit(sub(2))
		b, okB := lookUnit(sub(4))
		inList := strings.HasSuffix(strings.TrimSpace(text[:loc[0]]), ",")
		if !okA || !okB || a.kind != b.kind || a.kind == "temperature" || a.toSI(1) <= b.toSI(1) || inList {
			continue
		}
		out.WriteString(text[last:loc[0]])
		out.WriteString(sub(1) + " " + sub(2) + " plus " + sub(3) + " " + sub(4))
		last = loc[1]
	}
	out.WriteString(text[last:])
	return out.String()
}

// conversions writes a task's conversions one by one: the unit named first
// ("convert to miles: 42 km"), a sum after a conversion ("45 minutes in
// hours plus 2 hours"), a question ("how many miles is 42 km" is "42 km to
// miles"), what a quantity measures left out
// ("200 km of driving in miles"), a list of quantities ("5 km and 3 km
// to miles" is "5 km to miles; 3 km to miles") and a list of units ("10 kg
// to pounds and ounces" is "10 kg to pounds; 10 kg to ounces", when each is
// a unit: in "5 km to miles and 20 kg to pounds" "and" begins another).
func conversions(text string) string {
	text = compounds(digitsForWords(text))
	text = unitFirstRE.ReplaceAllString(text, "$2 to $1")
	text = sumAfterRE.ReplaceAllString(text, "$1 $3 $4 in $2")
	text = howManyRE.ReplaceAllStringFunc(text, func(m string) string {
		sub := howManyRE.FindStringSubmatch(m)
		return oneRE.ReplaceAllString(sub[2], "1 ") + " to " + sub[1]
	})
	text = ofWhatRE.ReplaceAllString(text, "$1 $2")
	text = listToRE.ReplaceAllStringFunc(text, func(m string) string {
		sub := listToRE.FindStringSubmatch(m)
		qs := listSepRE.Split(sub[1], -1)
		for i, q := range qs {
			qs[i] = q + " " + sub[2]
		}
		return strings.Join(qs, "; ")
	})
	return toListRE.ReplaceAllStringFunc(text, func(m string) string {
		sub := toListRE.FindStringSubmatch(m)
		us := listSepRE.Split(sub[3], -1)
		out := make([]string, len(us))
		for i, u := range us {
			if _, ok := lookUnit(u); !ok {
				return m
			}
			out[i] = sub[1] + " " + sub[2] + " " + u
		}
		return strings.Join(out, "; ")
	})
}

// lookUnit finds a unit by any of its names ("km", "Kilometres", "degrees
// Celsius").
func lookUnit(name string) (unit, bool) {
	u, ok := units[strings.TrimPrefix(strings.ToLower(name), "degrees ")]
	return u, ok
}

// sumTerms are the quantities of a sum, each with its sign. Quantities side
// by side are one only when they are of the converted kind: in "2 days 5
// km to miles" the sum is 5 km. One joined by an operator is always part of
// it (convert refuses it if it does not fit).
func sumTerms(quantities string, to unit) [][]string {
	terms := termRE.FindAllStringSubmatch(quantities, -1)
	for i := len(terms) - 1; i > 0; i-- {
		if terms[i][1] != "" {
			continue
		}
		if prev, ok := lookUnit(terms[i-1][3]); !ok || prev.kind != to.kind {
			return terms[i:]
		}
	}
	return terms
}

// convert converts one quantity, or the sum of several ("5 km plus 3
// miles"), to the unit to: "5 km + 3 miles = 9.83 km".
func convert(quantities string, to unit, places int) (string, error) {
	sum, terms, err := convertSum(quantities, to)
	if err != nil {
		return "", err
	}
	out := strconv.FormatFloat(sum, 'f', places, 64)
	return fmt.Sprintf("%s = %s %s", strings.Join(terms, " "), out, to.label(sum)), nil
}

// convertSum is the value of the quantities in the unit to, unrounded, and
// the quantities as the answer writes them.
func convertSum(quantities string, to unit) (float64, []string, error) {
	var sum float64
	var terms []string
	for i, m := range sumTerms(quantities, to) {
		from, ok := lookUnit(m[3])
		if !ok {
			return 0, nil, fmt.Errorf("cannot add %s %s: %q is not a unit it knows", m[2], m[3], m[3])
		}
		if from.kind != to.kind {
			return 0, nil, fmt.Errorf("cannot convert %s (%s) to %s (%s)", from.name, from.kind, to.name, to.kind)
		}
		op, num := strings.ToLower(m[1]), m[2]
		if i == 0 && op != "" { // the first quantity's sign, not a subtraction
			if op == "-" || op == "minus" {
				num = "-" + num
			}
			op = ""
		}
		if i > 0 && from.kind == "temperature" {
			return 0, nil, fmt.Errorf("cannot add temperatures (%s)", strings.TrimSpace(quantities))
		}
		v, err := parseSigned(num)
		if err != nil {
			return 0, nil, err
		}
		si := from.toSI(v)
		if from.kind == "temperature" && si < -273.15 {
			return 0, nil, fmt.Errorf("%s %s is below absolute zero", num, from.name)
		}
		switch {
		case op == "-" || op == "minus":
			sum -= to.frSI(si)
			terms = append(terms, "- "+num+" "+from.label(v))
		case i == 0:
			sum += to.frSI(si)
			terms = append(terms, num+" "+from.label(v))
		default:
			sum += to.frSI(si)
			terms = append(terms, "+ "+num+" "+from.label(v))
		}
	}
	return sum, terms, nil
}

// label is the unit's name after the number v: "1 mile", "2 miles". Only
// names that are words ending in s have a singular; symbols ("km", "lb",
// "°C") do not change.
func (u unit) label(v float64) string {
	if math.Abs(v) == 1 && len(u.name) > 3 && strings.HasSuffix(u.name, "s") {
		return strings.TrimSuffix(u.name, "s")
	}
	return u.name
}
