package protocol

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// GoalOutcome says how much of a goal was done, from its status and, when
// it had one, its chat's final state: succeeded when every task completed
// and no part was left undone, failed when nothing was done (no task
// completed; or the goal did not conclude and had no chat), partial
// otherwise. A task that had not finished when the chat ended counts as not
// done, as does a part the launcher gave to nobody (Chat.Undone) or meant
// for an agent but never assigned (Chat.NotStarted). nested
// holds the results of the nested teams that did tasks, by task id: a task
// completed by a nested team that did only part of it (outcome partial) is
// done in part, so the goal is partial too. The reason names the parts not
// done; undone lists their texts.
func GoalOutcome(status string, c *Chat, nested map[string]*GoalResult) (outcome, reason string, undone []string) {
	var done, inPart, total int
	var notes []string
	if c != nil {
		for _, t := range c.Tasks {
			total++
			if t.Status == TaskCompleted {
				if sub := nested[t.TaskID]; sub != nil && sub.Outcome == OutcomePartial {
					inPart++
					undone = append(undone, sub.Undone...)
					notes = append(notes, fmt.Sprintf("%s (%s) done in part by nested goal %s: %s", t.TaskID, t.Assignee, sub.GoalID, sub.Reason))
					continue
				}
				done++
				continue
			}
			what := t.TaskAbstract
			if what == "" {
				what = t.TaskDesc
			}
			undone = append(undone, what)
			result := firstLine(t.Result)
			switch {
			case t.Status == TaskFailed && result != "":
				notes = append(notes, fmt.Sprintf("%s (%s) failed: %s", t.TaskID, t.Assignee, result))
			case t.Status == TaskFailed:
				notes = append(notes, fmt.Sprintf("%s (%s) failed", t.TaskID, t.Assignee))
			default:
				notes = append(notes, fmt.Sprintf("%s (%s) did not finish", t.TaskID, t.Assignee))
			}
		}
		for _, u := range c.Undone {
			total++
			undone = append(undone, u)
			notes = append(notes, fmt.Sprintf("no registered agent can do %q", u))
		}
		for _, u := range c.NotStarted {
			total++
			undone = append(undone, u)
			notes = append(notes, fmt.Sprintf("%q was not started before the chat ended", u))
		}
	}
	switch {
	case status == GoalConcluded && len(notes) == 0:
		return OutcomeSucceeded, "", nil
	case done+inPart == 0:
		outcome = OutcomeFailed
	default:
		outcome = OutcomePartial
	}
	if total == 0 {
		return outcome, "", nil // a goal that did not conclude: its status reason says why
	}
	reason = fmt.Sprintf("%d of %d parts done", done, total)
	if inPart > 0 {
		reason += fmt.Sprintf(" (%d more in part)", inPart)
	}
	if len(notes) > 0 {
		reason += "; " + strings.Join(notes, "; ")
	}
	return outcome, reason, undone
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 200 {
		i := 200
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		s = s[:i] + "…"
	}
	return s
}
