package builtin

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/ioa-nats/ioa/agentkit"
)

// reportWordRE is what a task asking for a report says: a task given to
// the report writer by a loose match ("write a haiku about it") is refused
// rather than answered with a table that would pass for done.
var reportWordRE = regexp.MustCompile(`(?i)\b(report|summar(y|ies|i[sz]e)|sum\s+up|table|markdown|write[\s-]*up|overview|recap|results?)\b`)

// writeReport formats the results of the chat's earlier tasks as Markdown.
func writeReport(_ context.Context, t agentkit.Task) (agentkit.Result, error) {
	own, _, _ := strings.Cut(t.TaskDesc, "\n\n")
	if !reportWordRE.MatchString(own) && !reportWordRE.MatchString(t.TaskAbstract) {
		return agentkit.Result{}, fmt.Errorf("%q does not ask for a report: the report writer only writes a Markdown table of earlier results", firstLine(own))
	}
	if len(t.Earlier) == 0 {
		return agentkit.Result{}, fmt.Errorf("there are no earlier results to report on: the report writer puts the results of the goal's earlier tasks in a table " +
			`(ask for them first: "read notes.txt and summarize it", "convert 5 km to miles, then write a report")`)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Report\n\nGoal: %s\n\n| Task | By | Result |\n|---|---|---|\n", oneLine(t.Goal))
	for _, e := range t.Earlier {
		label := e.TaskAbstract
		if label == "" {
			label = e.TaskID
		}
		result := oneLine(e.Result)
		if e.Status != "completed" {
			result = "**" + e.Status + "**: " + result
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", oneLine(label), e.Assignee, result)
	}
	return agentkit.Result{Conclusion: b.String()}, nil
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	s = strings.ReplaceAll(s, "|", "/")
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}
