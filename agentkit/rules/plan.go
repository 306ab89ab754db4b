package rules

import (
	"fmt"
	"regexp"
	"strings"
)

// Item is one line of the launcher's plan: a clause, its task id, who does
// it, and whether it runs async (independent) or sync (after the others).
type Item struct {
	TaskID   string
	Async    bool
	Assignee string // empty: no registered agent can do it, so nobody is given it
	Text     string
}

var itemRE = regexp.MustCompile(`^([A-Za-z0-9_-]{1,64}) \[(async|sync|none)\] ([a-z0-9][a-z0-9_-]{0,63}|-): (.+)$`)

// FormatPlan writes a plan as the chat's updated_plan, one item a line:
// "t1 [async] weather: get the weather in Paris", and "t2 [none] -: write a
// haiku" for a part nobody is given. The launcher reads it back from its
// replica on later turns, so the plan survives a restart.
func FormatPlan(items []Item) string {
	lines := make([]string, len(items))
	for i, it := range items {
		mode, who := "sync", it.Assignee
		if it.Async {
			mode = "async"
		}
		if who == "" {
			mode, who = "none", "-"
		}
		lines[i] = fmt.Sprintf("%s [%s] %s: %s", it.TaskID, mode, who, it.Text)
	}
	return strings.Join(lines, "\n")
}

// ParsePlan reads a plan written by FormatPlan; lines in another form are
// skipped.
func ParsePlan(plan string) []Item {
	var items []Item
	for _, line := range strings.Split(plan, "\n") {
		m := itemRE.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		it := Item{TaskID: m[1], Async: m[2] == "async", Assignee: m[3], Text: m[4]}
		if m[2] == "none" || m[3] == "-" {
			it.Async, it.Assignee = false, ""
		}
		items = append(items, it)
	}
	return items
}
