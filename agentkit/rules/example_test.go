package rules_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ioa-nats/ioa/agentkit/rules"
	"github.com/ioa-nats/ioa/internal/fuzzworker"
)

func ExampleSplit() {
	for _, c := range rules.Split("Get the weather in Rome; find a hotel, and then book it.") {
		fmt.Printf("%q dependent=%v\n", c.Text, c.Dependent)
	}
	// Output:
	// "Get the weather in Rome" dependent=false
	// "find a hotel" dependent=false
	// "book it" dependent=true
}

func FuzzSplit(f *testing.F) {
	fuzzworker.Capture(f)
	for _, s := range []string{"a; b", "1. x\n2. then y", "Do it. Then more!", ", and then ;;", "e.g. this", "Convert 5 km and compute 2 and 3 and write it", "Read and write and", "add x and : and add y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, goal string) {
		cs := rules.Split(goal)
		if len(cs) > 16 {
			t.Fatalf("%d clauses", len(cs))
		}
		for i, c := range cs {
			if strings.TrimSpace(c.Text) != c.Text || c.Text == "" || strings.Contains(c.Text, "\n") {
				t.Fatalf("clause %d %q is not trimmed text on one line", i, c.Text)
			}
		}
		if len(cs) > 0 && cs[0].Dependent {
			t.Fatal("the first clause depends on nothing")
		}
		// A plan built from the clauses reads back the same.
		var items []rules.Item
		for _, c := range cs {
			items = append(items, rules.Item{TaskID: "t1", Assignee: "a", Async: c.Dependent, Text: c.Text})
		}
		if got := rules.ParsePlan(rules.FormatPlan(items)); len(got) != len(items) {
			t.Fatalf("plan of %d items reads back as %d", len(items), len(got))
		}
	})
}
