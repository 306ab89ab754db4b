package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/bus/auth"
	"github.com/ioa-nats/ioa/configs"
)

// Exit codes of the commands that follow a goal: scripts branch on how the
// goal ended.
const (
	exitConcluded   = 0
	exitUsage       = 1
	exitFailed      = 2
	exitCancelled   = 3
	exitTimedOut    = 4
	exitPartial     = 5
	exitInterrupted = 130
)

func newGoalCmd() *cobra.Command {
	var (
		team                  []string
		launcher, file        string
		approveBy, key        string
		maxTurns, maxDepth    int
		timeout               time.Duration
		asJSON, detach, quiet bool
	)
	cmd := &cobra.Command{
		Use:   `goal "text"`,
		Short: "Submit a goal and follow its team live until it ends",
		Long: `goal submits a goal to a running ioa (ioa serve) and follows it live: the
team that forms, every chat message, the tasks and their results, the nested
sub-teams and the conclusion.

The exit status says how the goal ended: 0 concluded with every part done
(outcome succeeded), 5 concluded with part of it done (partial), 2 failed
(or concluded having done none of it), 3 cancelled, 4 timed out, 1 for usage
or connection errors. Interrupting (Ctrl-C) stops
following; the goal goes on (ioa watch ID, ioa goals cancel ID).`,
		Example: `  ioa goal "Convert 5 km to miles"
  ioa goal "Multiply 12 x 7, then write a report" --team calculator,report-writer
  ioa goal "Plan a trip budget: 3 nights at 120 euros" --launcher coordinator --max-turns 10 --timeout 2m
  ioa goal --file goal.json --json | jq -r .conclusion
  id=$(ioa goal "Summarise the logs" --detach); ioa watch "$id"
  ioa goal "Nightly report" --detach --idempotency-key nightly-2026-12-02   # safe to run twice
  NATS_URL=nats://10.0.0.5:4222 ioa goal "Count the words of this sentence"`,
		RunE: func(cmd *cobra.Command, args []string) error {
			req, err := goalRequest(cmd, args, file)
			if err != nil {
				return err
			}
			f := cmd.Flags()
			if f.Changed("team") {
				req.Team = team
			}
			if f.Changed("launcher") {
				req.Launcher = launcher
			}
			if f.Changed("approve-by") {
				req.ApproveBy = approveBy
			}
			if f.Changed("max-turns") {
				req.MaxTurns = maxTurns
			}
			if f.Changed("max-depth") {
				req.MaxDepth = &maxDepth
			}
			if f.Changed("timeout") {
				req.Timeout = protocol.Duration(timeout)
			}
			if f.Changed("idempotency-key") {
				req.IdempotencyKey = key
			}
			if err := req.Validate(); err != nil {
				return errors.New(protocol.AsError(err).Message)
			}
			c, err := dialClient(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			if c.id.Role == auth.Observer {
				return fmt.Errorf("the credentials are %s's, an observer: they may watch goals but not submit them (use a client's: ioa agent add NAME --role client)", c.id.Name)
			}
			ctx := cmd.Context()
			if !detach && !c.streams() {
				return awaitGoal(ctx, cmd, c, req, asJSON, quiet)
			}
			var reply protocol.SubmitReply
			if err := c.submit(ctx, req, &reply); err != nil {
				return submitError(err)
			}
			out := cmd.OutOrStdout()
			noteLoweredTimeout(cmd.ErrOrStderr(), reply, req.Timeout.D())
			if detach {
				fmt.Fprintln(out, reply.GoalID)
				return nil
			}
			opt := renderOptionsFor(out)
			opt.Quiet = quiet
			w := out
			if asJSON {
				w = io.Discard
			}
			res, err := followGoal(ctx, c.nc, c.subj, reply.GoalID, w, opt)
			if err != nil {
				return followError(reply.GoalID, err)
			}
			if asJSON {
				if err := writeJSON(out, res); err != nil {
					return err
				}
			}
			return goalExit(res)
		},
	}
	configs.AddFlags(cmd.Flags())
	f := cmd.Flags()
	f.StringSliceVar(&team, "team", nil, "members of the team, comma-separated (skips discovery)")
	f.StringVar(&launcher, "launcher", "", "agent that forms the team and speaks first (default: the built-in coordinator)")
	f.StringVar(&approveBy, "approve-by", "", "a person (an agent of type human) who must approve the conclusion (ioa goals approve ID)")
	f.IntVar(&maxTurns, "max-turns", 0, "turn budget of the chat (default: the server's limit)")
	f.IntVar(&maxDepth, "max-depth", 0, "how deep tasks may team up in nested sub-teams (default: the server's limit)")
	f.DurationVar(&timeout, "timeout", 0, "time budget of the goal, e.g. 2m (default: the server's limit)")
	f.StringVar(&key, "idempotency-key", "", "name the submission: the same key sent again (by the same identity) names the same goal, never a second one")
	f.StringVarP(&file, "file", "f", "", `read the goal request from this file (- for stdin), a JSON object such as {"goal": "Convert 5 km to miles", "timeout": "2m"}; the goal is in it or the argument, not both`)
	f.BoolVar(&asJSON, "json", false, "print only the final GoalResult as JSON")
	f.BoolVarP(&detach, "detach", "d", false, "print the goal id and return without following")
	f.BoolVarP(&quiet, "quiet", "q", false, "print only the outcome, not the chat")
	cmd.MarkFlagsMutuallyExclusive("json", "detach")
	return cmd
}

// awaitGoal submits with wait:true and shows the result: an identity that
// may not read the runtime's streams (a client) cannot follow the chat live.
func awaitGoal(ctx context.Context, cmd *cobra.Command, c *clientConn, req protocol.GoalRequest, asJSON, quiet bool) error {
	out := cmd.OutOrStdout()
	opt := renderOptionsFor(out)
	opt.Quiet, opt.JSON = quiet, asJSON
	if !asJSON && !quiet {
		fmt.Fprintf(out, "%s\n", palette{opt.Color}.dim(fmt.Sprintf("submitted as %s (%s): waiting for the result; following the chat live needs admin or observer credentials", c.id.Name, c.id.Role)))
	}
	req.Wait = true
	if req.IdempotencyKey == "" {
		req.IdempotencyKey = rand.Text()
	}
	wait := req.Timeout.D()
	if wait <= 0 {
		wait = maxGoalWait
	}
	// The result comes when the goal ends; one lost on the way is asked for
	// again every 30 s (with the key, each copy is the same goal).
	var res protocol.GoalResult
	if err := c.requestAgain(ctx, c.goalSubject(bus.GoalSubmit), wait+clientRequestTimeout, 30*time.Second, req, &res); err != nil {
		return submitError(err)
	}
	if asJSON {
		if err := writeJSON(out, res); err != nil {
			return err
		}
	} else {
		newGoalRenderer(c.nc, c.subj, res.GoalID, out, opt).outcome(res)
	}
	return goalExit(res)
}

// noteLoweredTimeout says so when the server gave the goal less time than
// asked (it clamps a timeout to its limits.goal_timeout): the submit's reply
// carries the timeout in force. A reply without one (an older server) gets
// no note.
func noteLoweredTimeout(w io.Writer, reply protocol.SubmitReply, asked time.Duration) {
	if got, lowered := reply.Lowered(asked); lowered {
		fmt.Fprintf(w, "note: goal %s has %s, the server's limit (limits.goal_timeout), not the %s asked\n", reply.GoalID, got, asked)
	}
}

// maxGoalWait bounds waiting for a goal with no timeout of its own: the
// server ends every goal by its goal timeout (5 minutes by default).
const maxGoalWait = time.Hour

// submitError explains a refused submit in one line. The server refuses a
// goal that names an agent the registry does not know (not_found: the only
// one this command can get, as it names no parent goal) or lists as offline
// (conflict, as is a reused idempotency key) before it records anything;
// its message says which.
func submitError(err error) error {
	var pe *protocol.Error
	switch {
	case !errors.As(err, &pe):
	case errors.Is(err, protocol.ErrNotFound):
		return plainError{pe.Message + " (see: ioa agents ls)", err}
	case errors.Is(err, protocol.ErrConflict):
		return plainError{pe.Message, err}
	}
	return fmt.Errorf("submit: %w", err)
}

// goalExit maps how a goal ended to the exit status.
func goalExit(res protocol.GoalResult) error {
	code := map[string]int{
		protocol.GoalConcluded: exitConcluded, protocol.GoalFailed: exitFailed,
		protocol.GoalCancelled: exitCancelled, protocol.GoalTimedOut: exitTimedOut,
	}
	c, ok := code[res.Status]
	if !ok {
		return exitCode{exitUsage, fmt.Sprintf("goal %s ended with unknown status %q", res.GoalID, res.Status)}
	}
	// A goal that concluded is judged by its outcome (a server without
	// outcomes sends none: concluded is success there).
	if c == exitConcluded {
		switch res.Outcome {
		case protocol.OutcomePartial:
			return exitCode{exitPartial, fmt.Sprintf("goal %s concluded, partly done: %s", res.GoalID, res.Reason)}
		case protocol.OutcomeFailed:
			return exitCode{exitFailed, fmt.Sprintf("goal %s concluded having done nothing it asked: %s", res.GoalID, res.Reason)}
		}
		return nil
	}
	msg := fmt.Sprintf("goal %s %s", res.GoalID, strings.ReplaceAll(res.Status, "_", " "))
	if res.Reason != "" {
		msg += ": " + res.Reason
	}
	return exitCode{c, msg}
}

// followError explains why following stopped; an interrupt leaves the goal
// running.
func followError(goalID string, err error) error {
	if errors.Is(err, context.Canceled) {
		return exitCode{exitInterrupted, fmt.Sprintf("stopped following goal %s; it goes on (ioa watch %s, ioa goals cancel %s)", goalID, goalID, goalID)}
	}
	return fmt.Errorf("follow goal %s: %w", goalID, err)
}
