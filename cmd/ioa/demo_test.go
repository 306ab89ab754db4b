package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ioa-nats/ioa/agentkit/protocol"
)

// TestDemo runs `ioa demo` as a user would and checks the collaboration it
// shows and the conclusion it reaches.
func TestDemo(t *testing.T) {
	t.Setenv("IOA_LOG_LEVEL", "")
	var out bytes.Buffer
	root := newRootCmd()
	root.SetArgs([]string{"demo", "--data-dir", t.TempDir()})
	root.SetOut(&out)
	root.SetErr(&out)
	if err := root.ExecuteContext(t.Context()); err != nil {
		t.Fatalf("ioa demo: %v\n%s", err, out.String())
	}
	text := out.String()
	for _, want := range []string{
		"● team: coordinator,",                 // discovery formed a team
		"async_task_assign",                    // independent clauses in parallel
		"pause  [pause_and_trigger]",           // waiting on the nested task
		"teams up: sub-goal",                   // the trip planner's nested team
		"sync_task_assign",                     // the dependent report
		"✔ concluded",                          // the outcome
		"42 km = 26.10 miles", "19.5 * 4 = 78", // real work, no model
		"20 kg = 44.09 lb", "3 * 45 = 135", // done by the nested team
		"notes.txt: 43 words", "| Task | By | Result |", // file reading and the report
	} {
		if !strings.Contains(text, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", text)
	}
}

func TestDemoJSON(t *testing.T) {
	var out bytes.Buffer
	root := newRootCmd()
	root.SetArgs([]string{"demo", "--json", "--data-dir", t.TempDir(), "--goal", "Convert 10 miles to km. Then write a Markdown report of the results."})
	root.SetOut(&out)
	if err := root.ExecuteContext(t.Context()); err != nil {
		t.Fatalf("ioa demo --json: %v", err)
	}
	var res protocol.GoalResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("output is not a GoalResult: %v\n%s", err, out.String())
	}
	if res.Status != protocol.GoalConcluded || !strings.Contains(res.Conclusion, "10 miles = 16.09 km") {
		t.Fatalf("result = %+v", res)
	}
}
