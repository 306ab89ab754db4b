package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/configs"
)

func newGoalsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "goals",
		Short: "List, show, cancel and approve goals",
		Example: `  ioa goals ls --status running
  ioa goals get gt9p58vfnxyks
  ioa goals cancel gt9p58vfnxyks
  ioa goals approve gt9p58vfnxyks --creds alice.creds`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newGoalsLsCmd(), newGoalsGetCmd(), newGoalsCancelCmd(), newGoalsApproveCmd())
	return cmd
}

func newGoalsLsCmd() *cobra.Command {
	var (
		status string
		limit  int
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List goals, newest first",
		Example: `  ioa goals ls
  ioa goals ls --status running
  ioa goals ls --status ended --limit 50 --json | jq -r '.goals[] | [.goal_id, .status] | @tsv'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch status {
			case "running", "ended", "all":
			default:
				return fmt.Errorf("--status %q is not running, ended or all", status)
			}
			if limit < 1 || limit > 1000 {
				return fmt.Errorf("--limit %d must be between 1 and 1000", limit)
			}
			c, err := dialClient(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			var reply protocol.GoalListReply
			if err := c.request(cmd.Context(), c.goalSubject(bus.GoalList), protocol.GoalListRequest{Status: status, Limit: limit}, &reply); err != nil {
				return fmt.Errorf("goal list: %w", err)
			}
			if reply.Goals == nil {
				reply.Goals = []protocol.GoalStatus{}
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return writeJSON(out, reply)
			}
			if len(reply.Goals) == 0 {
				fmt.Fprintf(out, "no goals (%s)\n", status)
				return nil
			}
			opt := renderOptionsFor(out)
			p := palette{opt.Color}
			tb := table{pal: p}
			tb.header("ID", "STATUS", "OUTCOME", "AGE", "TEAM", "GOAL")
			now := time.Now()
			for _, g := range reply.Goals {
				id := g.GoalID
				if g.ParentGoalID != "" {
					id += p.dim(" ↑" + g.ParentGoalID)
				}
				team := strings.Join(g.Team, ",")
				tb.add(id, statusText(p, g.Status, g.Outcome), outcomeText(p, g.Outcome), fmtAge(now.Sub(g.CreatedAt)), trimLine(team, 30),
					trimLine(firstLine(g.Goal), descWidth(opt, 60+visibleLen(id)+min(len(team), 30))))
			}
			return tb.write(out)
		},
	}
	configs.AddFlags(cmd.Flags())
	f := cmd.Flags()
	f.StringVar(&status, "status", "all", "which goals: running, ended or all")
	f.IntVarP(&limit, "limit", "n", 20, "how many goals at most (1 to 1000)")
	f.BoolVar(&asJSON, "json", false, "print the orchestrator's reply as JSON")
	return cmd
}

func newGoalsGetCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "get ID",
		Aliases: []string{"show"},
		Short:   "Show a goal: its status, team, sub-goals and result",
		Example: `  ioa goals get gt9p58vfnxyks
  ioa goals get gt9p58vfnxyks --json | jq .result.conclusion`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !protocol.ValidID(args[0]) {
				return fmt.Errorf("%q is not a goal id", args[0])
			}
			return show(cmd, asJSON, func(c *clientConn) string { return c.goalSubject(bus.GoalGet) },
				protocol.GoalIDRequest{GoalID: args[0]}, writeGoalStatus)
		},
	}
	configs.AddFlags(cmd.Flags())
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the GoalStatus as JSON")
	return cmd
}

func writeGoalStatus(w io.Writer, p palette, st protocol.GoalStatus) {
	tb := table{pal: p}
	row := func(k, v string) {
		if v != "" {
			tb.add(p.dim(k), v)
		}
	}
	row("goal:", p.bold(st.GoalID))
	row("status:", statusText(p, st.Status, st.Outcome))
	if st.Outcome != "" {
		row("outcome:", outcomeText(p, st.Outcome))
	}
	row("launcher:", st.Launcher)
	row("approve by:", approverText(p, st))
	row("team:", strings.Join(st.Team, ", "))
	row("chat:", st.CommID)
	if st.ParentGoalID != "" {
		parent := st.ParentGoalID
		if st.Parent != nil && st.Parent.TaskID != "" {
			parent += " (task " + st.Parent.TaskID + ")"
		}
		row("parent:", parent)
	}
	row("sub-goals:", strings.Join(st.Children, ", "))
	row("depth:", fmt.Sprintf("%d (may nest %d deeper)", st.Depth, st.MaxDepth))
	row("budget:", fmt.Sprintf("%s, %s", plural(st.MaxTurns, "turn"), st.Timeout))
	if !st.CreatedAt.IsZero() {
		row("created:", st.CreatedAt.Local().Format(time.DateTime)+p.dim(" ("+fmtAge(time.Since(st.CreatedAt))+" ago)"))
	}
	if res := st.Result; res != nil {
		row("reason:", res.Reason)
		row("usage:", summary(*res))
	}
	_ = tb.write(w)
	fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(st.Goal))
	if res := st.Result; res != nil && strings.TrimSpace(res.Conclusion) != "" {
		fmt.Fprintf(w, "\n%s\n", p.bold("conclusion:"))
		for l := range strings.SplitSeq(strings.TrimSpace(res.Conclusion), "\n") {
			fmt.Fprintf(w, "    %s\n", l)
		}
	}
}

// approverText is who must approve the goal's conclusion and, while the
// goal waits for them, how they answer.
func approverText(p palette, st protocol.GoalStatus) string {
	if st.ApproveBy == "" || st.Status != protocol.GoalAwaitingApproval {
		return st.ApproveBy
	}
	return st.ApproveBy + p.yellow(" (waiting: ioa goals approve "+st.GoalID+" --as "+st.ApproveBy+" [--reject] [--note ...])")
}

func newGoalsCancelCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a goal and its whole tree of sub-goals",
		Long: `cancel stops a goal that is running (or awaiting approval) and its whole tree
of sub-goals. A goal that has already ended is left as it ended: the command
says so and exits 0, as it does after cancelling.`,
		Example: `  ioa goals cancel gt9p58vfnxyks`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !protocol.ValidID(args[0]) {
				return fmt.Errorf("%q is not a goal id", args[0])
			}
			c, err := dialClient(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			req := protocol.GoalIDRequest{GoalID: args[0]}
			var st protocol.GoalStatus
			// Asked first: the cancel's reply alone does not tell a goal
			// it ended from one that had ended before.
			err = c.request(cmd.Context(), c.goalSubject(bus.GoalGet), req, &st)
			if err == nil && protocol.GoalEnded(st.Status) {
				fmt.Fprintf(cmd.OutOrStdout(), "goal %s had already ended (%s): nothing to cancel\n", st.GoalID, strings.ReplaceAll(st.Status, "_", " "))
				return nil
			}
			err = c.request(cmd.Context(), c.goalSubject(bus.GoalCancel), req, &st)
			if err != nil {
				if errors.Is(err, protocol.ErrNotFound) {
					return fmt.Errorf("no goal %s", args[0])
				}
				return fmt.Errorf("cancel %s: %w", args[0], err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "goal %s: %s\n", st.GoalID, strings.ReplaceAll(st.Status, "_", " "))
			return nil
		},
	}
	configs.AddFlags(cmd.Flags())
	return cmd
}

func newGoalsApproveCmd() *cobra.Command {
	var (
		reject bool
		note   string
		as     string
	)
	cmd := &cobra.Command{
		Use:   "approve ID",
		Short: "Approve (or --reject) the conclusion of a goal that waits for a person",
		Long: `A goal submitted with --approve-by NAME waits, once its team has concluded, for
that person's answer (status awaiting_approval). With the person's credentials
(ioa agent add NAME --role agent), the answer is theirs; with the admin
credentials, --as names the person it is given for (default: the one named).`,
		Example: `  ioa goals approve gt9p58vfnxyks --creds alice.creds
  ioa goals approve gt9p58vfnxyks --reject --note "wrong units"`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := protocol.ApproveRequest{GoalID: args[0], Approve: !reject, Note: note, By: as}
			if err := req.Validate(); err != nil {
				return err
			}
			c, err := dialClient(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			var st protocol.GoalStatus
			if err := c.request(cmd.Context(), c.goalSubject(bus.GoalApprove), req, &st); err != nil {
				return fmt.Errorf("approve %s: %w", args[0], err)
			}
			reason := ""
			if st.Result != nil {
				reason = " (" + st.Result.Reason + ")"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "goal %s: %s%s\n", st.GoalID, strings.ReplaceAll(st.Status, "_", " "), reason)
			return nil
		},
	}
	configs.AddFlags(cmd.Flags())
	cmd.Flags().BoolVar(&reject, "reject", false, "reject the conclusion: the goal fails")
	cmd.Flags().StringVar(&note, "note", "", "a note kept in the goal's result")
	cmd.Flags().StringVar(&as, "as", "", "with admin credentials: the person the answer is given for")
	return cmd
}

// statusText colours a status by how the goal went: a goal that concluded
// having done only part of its work, or none, is not green.
func statusText(p palette, s, outcome string) string {
	switch {
	case s == protocol.GoalConcluded && outcome == protocol.OutcomePartial:
		return p.yellow(s)
	case s == protocol.GoalConcluded && outcome == protocol.OutcomeFailed:
		return p.red(s)
	}
	switch s {
	case protocol.GoalConcluded:
		return p.green(s)
	case protocol.GoalFailed, protocol.GoalTimedOut:
		return p.red(s)
	case protocol.GoalCancelled:
		return p.yellow(s)
	}
	return p.cyan(s)
}

// outcomeText colours an outcome: green, yellow or red; "-" while running.
func outcomeText(p palette, o string) string {
	switch o {
	case protocol.OutcomeSucceeded:
		return p.green(o)
	case protocol.OutcomePartial:
		return p.yellow(o)
	case protocol.OutcomeFailed:
		return p.red(o)
	}
	return p.dim("-")
}

// fmtAge prints how long ago something happened, coarsely.
func fmtAge(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}
