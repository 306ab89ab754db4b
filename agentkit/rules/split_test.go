package rules_test

import (
	"reflect"
	"slices"
	"testing"

	"github.com/ioa-nats/ioa/agentkit/rules"
)

func TestSplit(t *testing.T) {
	type C = rules.Clause
	tests := []struct {
		name string
		goal string
		want []C
	}{
		{"single", "Write a haiku about NATS.", []C{{"Write a haiku about NATS", false}}},
		{"empty", "  \n ", nil},
		{"and stays whole", "Buy salt and pepper", []C{{"Buy salt and pepper", false}}},
		{"and between two requests", "Convert 30 celsius to fahrenheit and compute 12 * 12",
			[]C{{"Convert 30 celsius to fahrenheit", false}, {"compute 12 * 12", false}}},
		{"and between three requests", "Plan a 3-day trip to Lisbon and convert 120 km to miles and compute 2 + 2 and 3",
			[]C{{"Plan a 3-day trip to Lisbon", false}, {"convert 120 km to miles", false}, {"compute 2 + 2 and 3", false}}},
		{"and before a request on the results", "Find the population of Lyon and write a short report",
			[]C{{"Find the population of Lyon", false}, {"write a short report", true}}},
		{"and before a back reference", "Read notes.txt and count its words",
			[]C{{"Read notes.txt", false}, {"count its words", true}}},
		{"and between two verbs", "Read and write files", []C{{"Read and write files", false}}},
		{"and after a verb", "Show me how to read and write files", []C{{"Show me how to read and write files", false}}},
		{"and between two questions", "What is 15% of 240 and how many words are in notes.txt?",
			[]C{{"What is 15% of 240", false}, {"how many words are in notes.txt", false}}},
		{"and inside a question", "What is salt and pepper?", []C{{"What is salt and pepper", false}}},
		{"and in a titled task", "Prepare a packing budget: convert 20 kg to pounds and compute 3 * 45",
			[]C{{"Prepare a packing budget: convert 20 kg to pounds and compute 3 * 45", false}}},
		{"and before a lone verb", "Compute 2 + 2 and check", []C{{"Compute 2 + 2 and check", false}}},
		{"and before halving the result", "Compute 7 * 8 and halve it",
			[]C{{"Compute 7 * 8", false}, {"halve it", true}}},
		{"comma and", "Get the weather in Paris, and find a restaurant there",
			[]C{{"Get the weather in Paris", false}, {"find a restaurant there", false}}},
		{"comma between two requests", "Convert 5 km to miles, compute 3 * 3 and write a report",
			[]C{{"Convert 5 km to miles", false}, {"compute 3 * 3", false}, {"write a report", true}}},
		{"comma in a list", "Add 17, 25 and 38", []C{{"Add 17, 25 and 38", false}}},
		{"comma before no request", "Compute 2 + 2, please", []C{{"Compute 2 + 2, please", false}}},
		{"semicolons", "Get the weather; look up the population; then write a summary of them.",
			[]C{{"Get the weather", false}, {"look up the population", false}, {"write a summary of them", true}}},
		{"and then", "Fetch the report and then translate it to French",
			[]C{{"Fetch the report", false}, {"translate it to French", true}}},
		{"then without it", "Fetch the report, then email the team",
			[]C{{"Fetch the report", false}, {"email the team", true}}},
		{"sentences", "Find the population of Paris. Then summarize the result! Is it big?",
			[]C{{"Find the population of Paris", false}, {"summarize the result", true}, {"Is it big", true}}},
		{"abbreviation", "Name three fruits, e.g. apples.", []C{{"Name three fruits, e.g. apples", false}}},
		{"bullets", "- get the weather\n* find hotels\n3. after that, book the cheapest one",
			[]C{{"get the weather", false}, {"find hotels", false}, {"book the cheapest one", true}}},
		{"numbered", "1) collect data\n2) plot it", []C{{"collect data", false}, {"plot it", true}}},
		{"word containing then", "Strengthen the wall", []C{{"Strengthen the wall", false}}},
		{"first is never dependent", "Then use it", []C{{"use it", false}}},
		{"an operation without its first operand", "Multiply 12.5 by 4 and subtract 10. Divide by 2",
			[]C{{"Multiply 12.5 by 4", false}, {"subtract 10", true}, {"Divide by 2", true}}},
		{"a quantity added to an earlier one", "Convert 3 miles to km and add 2 km",
			[]C{{"Convert 3 miles to km", false}, {"add 2 km", true}}},
		{"a percentage taken off an earlier result", "Compute 12 * 12 and subtract 10%",
			[]C{{"Compute 12 * 12", false}, {"subtract 10%", true}}},
		{"an operation with both", "Multiply 12.5 by 4 and subtract 3 from 10",
			[]C{{"Multiply 12.5 by 4", false}, {"subtract 3 from 10", false}}},
		{"using", "Compute the total. Using the result, write an invoice",
			[]C{{"Compute the total", false}, {"Using the result, write an invoice", true}}},
		{"a question about the numbers stated before it", "I have 3 boxes of 12 eggs. How many eggs in total?",
			[]C{{"I have 3 boxes of 12 eggs. How many eggs in total", false}}},
		{"a question with numbers of its own", "There are 24 hours in a day. Convert 3 days to hours. How many is that?",
			[]C{{"There are 24 hours in a day", false}, {"Convert 3 days to hours", false}, {"How many is that", false}}},
		{"a question after a statement without numbers", "Paris is big. What is its population?",
			[]C{{"Paris is big", false}, {"What is its population", true}}},
		{"data after a colon, in sentences", "Count the words in: The cat sat. The dog ran. Then summarize it.",
			[]C{{"Count the words in: The cat sat. The dog ran", false}, {"summarize it", true}}},
		{"a request after a colon's data", "Count the words in: The cat sat. Convert 5 km to miles.",
			[]C{{"Count the words in: The cat sat", false}, {"Convert 5 km to miles", false}}},
		{"a label's colon", "Task 2: the cat sat. The dog ran.",
			[]C{{"Task 2: the cat sat", false}, {"The dog ran", false}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := rules.Split(tt.goal)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Split(%q)\n got %+v\nwant %+v", tt.goal, got, tt.want)
			}
		})
	}
}

func TestSplitCapsClauses(t *testing.T) {
	goal := ""
	for range 30 {
		goal += "do a thing; "
	}
	if got := rules.Split(goal); len(got) != 16 {
		t.Fatalf("got %d clauses, want 16", len(got))
	}
}

func TestSteps(t *testing.T) {
	for _, tc := range []struct {
		task string
		want []string
	}{
		{"Prepare a packing budget: convert 20 kg to pounds and compute 3 * 45",
			[]string{"convert 20 kg to pounds", "compute 3 * 45"}},
		{"buy salt and pepper", []string{"buy salt and pepper"}},
		{"get the weather in Oslo, and then write the report about it",
			[]string{"get the weather in Oslo", "write the report about it"}},
		{"one step only", []string{"one step only"}},
		{"Title: ", []string{"Title"}},
	} {
		if got := rules.Steps(tc.task); !slices.Equal(got, tc.want) {
			t.Errorf("Steps(%q) = %q, want %q", tc.task, got, tc.want)
		}
	}
}
