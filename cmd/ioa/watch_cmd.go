package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/configs"
)

func newWatchCmd() *cobra.Command {
	var asJSON, quiet bool
	cmd := &cobra.Command{
		Use:   "watch [goal-id | chat-id]",
		Short: "Follow a goal or a chat from its start, or every chat live",
		Long: `watch follows what agents do.

With a goal id it replays the goal from its start and follows it until it
ends, like ioa goal does, and exits with the same status: 0 concluded with
every part done, 5 concluded with part of it done, 2 failed (or concluded
having done none of it), 3 cancelled, 4 timed out. With a chat id it prints
the chat's log from the start and follows it until the chat ends. With no
argument it follows every chat and every goal's ending live, until
interrupted. Interrupting (Ctrl-C) exits 0; usage and connection errors
exit 1.

Watching reads the runtime's streams, which needs admin or observer
credentials (ioa agent add NAME --role observer): with a client's or an
agent's it refuses at once (exit 1). A client sees a goal of its own with
ioa goals get ID.`,
		Example: `  ioa watch                      # every chat and goal, live
  ioa watch gt9p58vfnxyks        # one goal, from its start to its end
  ioa watch c6tfqgo982m6y        # one chat log
  ioa watch --json | jq .        # events as JSON lines
  ioa watch --creds obs.creds    # as an observer of a secure ioa`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 && !protocol.ValidID(args[0]) {
				return fmt.Errorf("%q is not a goal or chat id", args[0])
			}
			c, err := dialClient(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			if !c.streams() {
				return cannotWatch(c, args)
			}
			ctx := cmd.Context()
			out := cmd.OutOrStdout()
			opt := renderOptionsFor(out)
			opt.JSON, opt.Quiet = asJSON, quiet
			if len(args) == 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "watching every chat and goal on %s (Ctrl-C to stop)\n", c.url)
				return watchAll(ctx, c, out, opt)
			}
			id := args[0]
			var st protocol.GoalStatus
			gerr := c.request(ctx, c.goalSubject(bus.GoalGet), protocol.GoalIDRequest{GoalID: id}, &st)
			if gerr == nil {
				res, err := followGoal(ctx, c.nc, c.subj, id, out, opt)
				if err != nil {
					if errors.Is(err, context.Canceled) {
						return nil
					}
					return fmt.Errorf("follow goal %s: %w", id, err)
				}
				return goalExit(res)
			}
			err = followChat(ctx, c, id, out, opt)
			switch {
			case errors.Is(err, errNoChat) && errors.Is(gerr, protocol.ErrNotFound):
				return fmt.Errorf("no goal or chat with id %s", id)
			case errors.Is(err, errNoChat):
				return fmt.Errorf("no chat %s, and goal.get failed: %w", id, gerr)
			case errors.Is(err, context.Canceled):
				return nil
			}
			return err
		},
	}
	configs.AddFlags(cmd.Flags())
	cmd.Flags().BoolVar(&asJSON, "json", false, "print events and messages as JSON lines")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "for a goal: print only its outcome")
	return cmd
}

var errNoChat = errors.New("no such chat")

// cannotWatch explains at once why an identity that may not read the
// runtime's streams cannot watch: reading them would only time out, and a
// live subscription would show nothing.
func cannotWatch(c *clientConn, args []string) error {
	id := "ID"
	if len(args) == 1 {
		id = args[0]
	}
	return fmt.Errorf("the credentials are %s's, %s %s: watching needs admin or observer credentials (ioa agent add NAME --role observer); the result of a goal of yours: ioa goals get %s",
		c.id.Name, article(string(c.id.Role)), c.id.Role, id)
}

// article is "an" before a vowel, else "a".
func article(word string) string {
	if word != "" && strings.ContainsRune("aeiou", rune(word[0])) {
		return "an"
	}
	return "a"
}

// followChat prints a chat's log from the start until the chat ends.
func followChat(ctx context.Context, c *clientConn, commID string, w io.Writer, opt renderOptions) error {
	subject, err := c.subj.Chat(commID)
	if err != nil {
		return err
	}
	js, err := jetstream.New(c.nc)
	if err != nil {
		return err
	}
	stream, err := openStream(ctx, js, bus.StreamChats)
	if err != nil {
		return err
	}
	if _, err := stream.GetLastMsgForSubject(ctx, subject); errors.Is(err, jetstream.ErrMsgNotFound) {
		return errNoChat
	} else if err != nil {
		return fmt.Errorf("chat %s: %w", commID, err)
	}
	rp, err := startReplay(ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		return err
	}
	defer rp.stop()
	r := newGoalRenderer(c.nc, c.subj, "", w, opt)
	r.fromChat = true
	g := &goalView{id: commID}
	for {
		select {
		case m := <-rp.C:
			var am protocol.AgentMessage
			if json.Unmarshal(m.Data(), &am) != nil {
				continue
			}
			if opt.JSON {
				writeJSONLine(w, m.Data())
			} else {
				r.message(g, am)
			}
			if am.State == protocol.StateConclusion {
				if !opt.JSON {
					fmt.Fprintf(w, "%s chat %s ended\n", r.pal.dim("●"), commID)
				}
				return nil
			}
		case err := <-rp.errc:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// watchAll prints every chat message and every goal's end as they happen.
func watchAll(ctx context.Context, c *clientConn, w io.Writer, opt renderOptions) error {
	msgs := make(chan *nats.Msg, 256)
	var subs []*nats.Subscription
	defer func() {
		for _, s := range subs {
			_ = s.Unsubscribe()
		}
	}()
	for _, subject := range []string{c.subj.AllChats(), c.subj.AllGoalResults()} {
		s, err := c.nc.ChanSubscribe(subject, msgs)
		if err != nil {
			return err
		}
		subs = append(subs, s)
	}
	if err := c.nc.FlushTimeout(clientRequestTimeout); err != nil {
		return err
	}
	r := newGoalRenderer(c.nc, c.subj, "", w, opt)
	r.fromChat = true
	chats := map[string]*goalView{}
	resultPrefix := c.subj.Prefix() + ".goal."
	for {
		select {
		case m := <-msgs:
			if opt.JSON {
				writeJSONLine(w, m.Data)
				continue
			}
			if strings.HasPrefix(m.Subject, resultPrefix) {
				var res protocol.GoalResult
				if json.Unmarshal(m.Data, &res) == nil {
					printGoalEnd(w, r.pal, res, opt.Width)
				}
				continue
			}
			var am protocol.AgentMessage
			if json.Unmarshal(m.Data, &am) != nil || am.CommID == "" {
				continue
			}
			g := chats[am.CommID]
			if g == nil {
				if len(chats) > 1024 {
					clear(chats)
				}
				g = &goalView{id: am.CommID, tag: r.pal.dim("[" + am.CommID + "] ")}
				chats[am.CommID] = g
			}
			r.message(g, am)
		case <-ctx.Done():
			return nil
		}
	}
}

func printGoalEnd(w io.Writer, p palette, res protocol.GoalResult, width int) {
	mark := p.green("✔")
	if res.Status != protocol.GoalConcluded {
		mark = p.red("✗")
	}
	line := fmt.Sprintf("%s goal %s %s · %s", mark, p.bold(res.GoalID), res.Status, p.dim(summary(res)))
	if text := firstNonEmpty(res.Reason, firstLine(res.Conclusion)); text != "" {
		line += ": " + trimLine(firstLine(text), max(width-visibleLen(line)-2, 20))
	}
	fmt.Fprintln(w, line)
}

func writeJSONLine(w io.Writer, data []byte) {
	var buf bytes.Buffer
	if json.Compact(&buf, data) == nil {
		buf.WriteByte('\n')
		_, _ = w.Write(buf.Bytes())
	}
}
