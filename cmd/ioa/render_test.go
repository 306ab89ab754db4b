package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/ioa-nats/ioa/bus"
)

// A message's content is shown up to maxContentLines lines; a longer one
// ends with how many lines were left out.
func TestBlockKeepsAPlanAndCutsLongerContent(t *testing.T) {
	plan := "Plan:\nt1 [async] a: one\nt2 [async] b: two\nt3 [async] c: three\nt4 [async] d: four\nt5 [async] e: five\nt6 [sync] f: six\nStarting the independent tasks: t1, t2, t3, t4, t5."
	var out bytes.Buffer
	r := newGoalRenderer(nil, bus.Subjects{}, "g1", &out, renderOptions{})
	r.block(r.goals["g1"], "  ", plan)
	if got := out.String(); strings.Contains(got, "more lines") || !strings.Contains(got, "Starting the independent tasks") {
		t.Errorf("a plan of six parts with its first step was cut:\n%s", got)
	}

	out.Reset()
	var long []string
	for i := range 12 {
		long = append(long, fmt.Sprintf("line %d", i+1))
	}
	r.block(r.goals["g1"], "  ", strings.Join(long, "\n"))
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	if len(lines) != maxContentLines || !strings.Contains(lines[len(lines)-1], "… 5 more lines") || !strings.Contains(lines[len(lines)-2], "line 7") {
		t.Errorf("12 lines shown as:\n%s", out.String())
	}
}

func TestJoinItemsKeepsItemsWithCommasApart(t *testing.T) {
	if got := joinItems([]string{"arithmetic", "calculator"}); got != "arithmetic, calculator" {
		t.Errorf("plain items: %q", got)
	}
	if got := joinItems([]string{"arithmetic", "round, double or halve a number"}); got != "arithmetic; round, double or halve a number" {
		t.Errorf("an item with a comma: %q", got)
	}
}
