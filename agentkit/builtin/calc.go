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
// operators, with optional parentheses.
var exprRE = regexp.MustCompile(`[(\-]*` + numPat + `%?(?:\s*[-+*/x×÷^]\s*[(\-]*` + numPat + `%?\)*)+|` + numPat + `\s*%\s*of\s*` + numPat)

// calculate evaluates every expression of the task's own text ("compute
// 2 + 2 and 3 * 3" answers both: a task answered in part would pass for
// done), and fails on the first it cannot evaluate.
func calculate(_ context.Context, t agentkit.Task) (agentkit.Result, error) {
	exprs := findAll(exprRE, t)
	if len(exprs) == 0 {
		return agentkit.Result{}, fmt.Errorf("no arithmetic expression found in %q", firstLine(t.TaskDesc))
	}
	answers := make([]string, len(exprs))
	for i, m := range exprs {
		expr := strings.TrimSpace(m[0])
		v, err := evalExpr(expr)
		if err != nil {
			return agentkit.Result{}, fmt.Errorf("%s: %w", expr, err)
		}
		answers[i] = fmt.Sprintf("%s = %s", expr, formatNumber(v))
	}
	return agentkit.Result{Conclusion: strings.Join(answers, "; ")}, nil
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

func formatNumber(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// evalExpr evaluates + - * / ^ with parentheses by recursive descent; "x"
// and "×" multiply, "÷" divides, "a% of b" takes a percentage.
func evalExpr(s string) (float64, error) {
	s, err := plainNumbers(s)
	if err != nil {
		return 0, err
	}
	if a, b, ok := strings.Cut(s, "% of"); ok {
		x, err1 := strconv.ParseFloat(strings.TrimSpace(a), 64)
		y, err2 := strconv.ParseFloat(strings.TrimSpace(b), 64)
		if err1 != nil || err2 != nil {
			return 0, errors.New("bad percentage")
		}
		return x / 100 * y, nil
	}
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
		if w, err = p.product(); op == '+' {
			v += w
		} else {
			v -= w
		}
	}
	return v, err
}

func (p *parser) product() (float64, error) {
	v, err := p.power()
	for err == nil && (p.peek() == '*' || p.peek() == '/') {
		op := p.peek()
		p.i++
		var w float64
		if w, err = p.power(); op == '*' {
			v *= w
		} else {
			v /= w
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
	if p.peek() == '%' {
		p.i++
		v /= 100
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
