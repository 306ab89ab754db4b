package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/bus/auth"
	"github.com/ioa-nats/ioa/configs"
)

func newChatCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "chat",
		Short: "Take part in chats as a person (an agent of type human)",
	}
	join := &cobra.Command{
		Use:   "join NAME",
		Short: "Follow a person's chats in the terminal and answer its turns and tasks",
		Long: `join follows the chats of NAME, a member of type human (a person hosted by
ioa serve, such as alice in configs/demo.yaml): it prints their messages as
they are logged and says when NAME holds the turn ("your turn") or has a task
("input required"). Type a line to answer the first thing that waits:

  text             your turn: a discussion handing the turn to the launcher;
                   a task: its result (completed)
  /to NAME text    your turn: a discussion handing the turn to NAME
  /conclude text   your turn: the conclusion
  /fail text       a task: a failed result
  /approve [note]  a goal awaiting NAME's approval: approve its conclusion
  /reject [note]   a goal awaiting NAME's approval: reject it (the goal fails)
  #N ...           answer item N of the list instead of the first
  /list            list what waits on NAME

Goals awaiting NAME's approval (ioa goal --approve-by NAME) are listed with
the admin's credentials, which may list goals; with NAME's own, answer them
with ioa goals approve ID.

A NAME that is not a registered person is refused, naming those that are.
The waits are state in the chats' logs, bounded by the speaker and task
timeouts: leaving and joining again (or answering in the web console
instead) loses nothing. It needs credentials that may use NAME's outbox:
the admin's (the default of a local ioa serve) or NAME's own
(ioa agent add NAME --out NAME.creds). Ctrl-D or Ctrl-C leaves.`,
		Example: `  ioa chat join alice
  ioa chat join alice --creds alice.creds --nats-url nats://host:4222`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := protocol.CheckName("person", args[0]); err != nil {
				return err
			}
			return chatJoin(cmd, args[0])
		},
	}
	configs.AddFlags(join.Flags())
	cmd.AddCommand(join)
	return cmd
}

// personChat is one chat of the person, folded from its history and inbox.
type personChat struct {
	chat   protocol.Chat
	people map[string]bool // members of type human
}

// waitItem is one thing waiting on the person: its turn, a task, or a
// goal's approval.
type waitItem struct {
	comm string
	task string // "" for a turn
	goal string // a goal awaiting the person's approval; comm and task are ""
}

func (w waitItem) key(c *personChat) string {
	if w.goal != "" {
		return "approve/" + w.goal
	}
	if w.task == "" {
		return w.comm + "/s" + strconv.FormatUint(c.chat.LastSeq, 10)
	}
	t, _ := c.chat.Task(w.task)
	return w.comm + "/" + w.task + "/" + strconv.Itoa(t.Attempt)
}

type chatJoiner struct {
	c      *clientConn
	name   string
	out    io.Writer
	chats  map[string]*personChat
	order  []string        // comm ids, in the order seen
	told   map[string]bool // waits already announced
	inbox  chan *nats.Msg
	failed map[string]bool // chats whose history could not be read
	// approvals are the goals awaiting the person's approval, as last
	// listed (goal.list, which only the admin may ask for all goals).
	approvals []protocol.GoalStatus
}

func chatJoin(cmd *cobra.Command, name string) error {
	c, err := dialClient(cmd)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx := cmd.Context()
	if err := checkPerson(ctx, c, name); err != nil {
		return err
	}
	j := &chatJoiner{c: c, name: name, out: cmd.OutOrStdout(), chats: map[string]*personChat{}, told: map[string]bool{},
		inbox: make(chan *nats.Msg, 1024), failed: map[string]bool{}}
	subj, err := c.subj.AgentInboxes(name)
	if err != nil {
		return err
	}
	sub, err := c.nc.ChanSubscribe(subj, j.inbox)
	if err != nil {
		return fmt.Errorf("follow %s's inbox: %w", name, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	var open protocol.OpenChatsReply
	chatsSubj, _ := c.subj.OpenChats(name)
	if err := c.request(ctx, chatsSubj, nil, &open); err != nil {
		return fmt.Errorf("%s's open chats: %w", name, err)
	}
	events, stop := j.followApprovals()
	defer stop()
	fmt.Fprintf(j.out, "joined as %s: %d open chats; type a line to answer what waits (/list, /to NAME, /conclude, /fail, /approve, /reject, #N)\n", name, len(open.Chats))
	for _, comm := range open.Chats {
		j.catchUp(ctx, comm)
	}
	j.refreshApprovals(ctx)
	j.announce()

	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(cmd.InOrStdin())
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case line, ok := <-lines:
			if !ok {
				fmt.Fprintln(j.out, "bye")
				return nil
			}
			j.answer(ctx, line)
		case m := <-events:
			var ev protocol.GoalEvent
			if json.Unmarshal(m.Data, &ev) == nil && ev.Kind == protocol.EventApprovalRequested {
				j.refreshApprovals(ctx)
				j.announce()
			}
		case m := <-j.inbox:
			var am protocol.AgentMessage
			if json.Unmarshal(m.Data, &am) != nil || protocol.CheckID("comm_id", am.CommID) != nil {
				continue
			}
			pc := j.chats[am.CommID]
			switch {
			case pc == nil || am.Seq > pc.chat.LastSeq+1:
				j.catchUp(ctx, am.CommID) // a new chat, or a gap
			case am.Seq == pc.chat.LastSeq+1:
				j.apply(pc, am)
			}
			j.announce()
		}
	}
}

// checkPerson refuses a name that is no registered person: nothing would
// ever wait on it, and the session would look as if it worked.
func checkPerson(ctx context.Context, c *clientConn, name string) error {
	var info protocol.AgentInfo
	err := c.request(ctx, c.subj.Registry(bus.RegistryGet), protocol.NameRequest{Name: name}, &info)
	var why string
	switch {
	case err == nil && info.Type == protocol.TypeHuman:
		return nil
	case err == nil:
		why = fmt.Sprintf("%s is an agent of type %s", name, firstNonEmpty(info.Type, "unknown"))
	case errors.Is(err, protocol.ErrNotFound):
		why = fmt.Sprintf("no agent %s is registered", name)
	default:
		return fmt.Errorf("registry get %s: %w", name, err)
	}
	return fmt.Errorf("%s is not a registered person (an agent of type human): %s%s", name, why, personsHint(ctx, c))
}

// personsHint names the registered persons, to pick one from.
func personsHint(ctx context.Context, c *clientConn) string {
	all, err := listAgents(ctx, c, false)
	if err != nil {
		return ""
	}
	var people []string
	for _, a := range all.Agents {
		if a.Type == protocol.TypeHuman {
			people = append(people, a.Name)
		}
	}
	if len(people) == 0 {
		return "; no person is registered (one is an agent with type: human in the config of ioa serve)"
	}
	return "; the registered persons: " + strings.Join(people, ", ")
}

// followApprovals delivers the goals' events, to hear of approvals asked
// of the person as they are; only the admin may list goals to see whose
// approval they wait for, so other credentials get no events.
func (j *chatJoiner) followApprovals() (<-chan *nats.Msg, func()) {
	ch := make(chan *nats.Msg, 256)
	if j.c.id.Role != auth.Admin {
		return ch, func() {}
	}
	sub, err := j.c.nc.ChanSubscribe(j.c.subj.AllGoalEvents(), ch)
	if err != nil {
		return ch, func() {}
	}
	return ch, func() { _ = sub.Unsubscribe() }
}

// refreshApprovals lists the goals awaiting the person's approval. A
// failure keeps the last list: approvals are a nicety of the session, and
// ioa goals approve answers them anyway.
func (j *chatJoiner) refreshApprovals(ctx context.Context) {
	if j.c.id.Role != auth.Admin {
		return
	}
	var reply protocol.GoalListReply
	req := protocol.GoalListRequest{Status: "running", Limit: 1000}
	if err := j.c.request(ctx, j.c.goalSubject(bus.GoalList), req, &reply); err != nil {
		return
	}
	j.approvals = j.approvals[:0]
	for _, g := range reply.Goals {
		if g.Status == protocol.GoalAwaitingApproval && g.ApproveBy == j.name {
			j.approvals = append(j.approvals, g)
		}
	}
}

// approval is the listed goal awaiting approval with id, if any.
func (j *chatJoiner) approval(id string) (protocol.GoalStatus, bool) {
	for _, g := range j.approvals {
		if g.GoalID == id {
			return g, true
		}
	}
	return protocol.GoalStatus{}, false
}

// catchUp reads a chat's history after what it has folded.
func (j *chatJoiner) catchUp(ctx context.Context, comm string) {
	pc := j.chats[comm]
	if pc == nil {
		pc = &personChat{people: map[string]bool{}}
	}
	subj, err := j.c.subj.History(j.name, comm)
	if err != nil {
		return
	}
	for {
		var h protocol.HistoryReply
		if err := j.c.request(ctx, subj, protocol.HistoryRequest{AfterSeq: pc.chat.LastSeq, Limit: 1000}, &h); err != nil {
			if !j.failed[comm] {
				fmt.Fprintf(j.out, "! chat %s: %v\n", comm, err)
				j.failed[comm] = true
			}
			return
		}
		if j.chats[comm] == nil {
			j.chats[comm] = pc
			j.order = append(j.order, comm)
		}
		for _, m := range h.Messages {
			if m.Seq == pc.chat.LastSeq+1 {
				j.apply(pc, m)
			}
		}
		if len(h.Messages) == 0 || pc.chat.LastSeq >= h.LastSeq {
			return
		}
	}
}

func (j *chatJoiner) apply(pc *personChat, m protocol.AgentMessage) {
	next, err := protocol.Apply(pc.chat, m)
	if err != nil {
		return
	}
	pc.chat = next
	if m.Type == protocol.MsgSystem && m.Event == protocol.EventStart {
		for _, card := range m.Team {
			pc.people[card.Name] = card.Type == protocol.TypeHuman
		}
	}
	kind := m.Type
	if m.Event != "" {
		kind += ":" + m.Event
	}
	fmt.Fprintf(j.out, "[%s #%d] %s %s", pc.chat.GoalID, m.Seq, m.Sender, kind)
	if len(m.NextSpeaker) > 0 {
		fmt.Fprintf(j.out, " → %s", strings.Join(m.NextSpeaker, ", "))
	}
	if m.Type == protocol.MsgTaskResult {
		fmt.Fprintf(j.out, " %s %s: %s", m.TaskID, m.TaskStatus, oneLine(m.TaskConclusion))
	} else if m.Content != "" {
		fmt.Fprintf(j.out, ": %s", oneLine(m.Content))
	}
	fmt.Fprintln(j.out)
	if pc.chat.Ended() {
		fmt.Fprintf(j.out, "[%s] chat ended: %s\n", pc.chat.GoalID, pc.chat.Outcome)
	}
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// waiting lists what waits on the person, oldest chat first.
func (j *chatJoiner) waiting() []waitItem {
	var out []waitItem
	for _, comm := range j.order {
		c := &j.chats[comm].chat
		if c.Ended() {
			continue
		}
		if c.State == protocol.StateDiscussion && c.Speaker == j.name {
			out = append(out, waitItem{comm: comm})
		}
		for _, t := range c.Tasks {
			if t.Assignee == j.name && t.Status == protocol.TaskRunning {
				out = append(out, waitItem{comm: comm, task: t.TaskID})
			}
		}
	}
	for _, g := range j.approvals {
		out = append(out, waitItem{goal: g.GoalID})
	}
	return out
}

// announce prints each new wait once.
func (j *chatJoiner) announce() {
	for i, w := range j.waiting() {
		if k := w.key(j.chats[w.comm]); !j.told[k] {
			j.told[k] = true
			j.describe(i+1, w)
		}
	}
}

func (j *chatJoiner) describe(n int, w waitItem) {
	if w.goal != "" {
		g, _ := j.approval(w.goal)
		proposed := ""
		if g.Result != nil {
			proposed = oneLine(g.Result.Conclusion)
		}
		fmt.Fprintf(j.out, ">> #%d approval, %s: goal %s (%q) proposes: %s\n   /approve [note] or /reject [note] (or: ioa goals approve %s --as %s [--reject] [--note ...])\n",
			n, j.name, g.GoalID, oneLine(g.Goal), proposed, g.GoalID, j.name)
		return
	}
	c := &j.chats[w.comm].chat
	if w.task == "" {
		fmt.Fprintf(j.out, ">> #%d your turn, %s, in goal %s (%q): say something (to %s), or /to NAME ..., /conclude ...\n",
			n, j.name, c.GoalID, oneLine(c.Goal), c.Launcher)
		return
	}
	t, _ := c.Task(w.task)
	fmt.Fprintf(j.out, ">> #%d input required, %s: task %s of goal %s: %s\n   type the result (or /fail why)\n",
		n, j.name, t.TaskID, c.GoalID, oneLine(t.TaskDesc))
}

// chatCommands are the words a line may start with; chatCommandsHelp says
// how to use them.
var chatCommands = []string{"/list", "/to", "/conclude", "/fail", "/approve", "/reject"}

const chatCommandsHelp = "/list, /to NAME text, /conclude text, /fail why, /approve note, /reject note, #N to answer item N (plain text answers the first)"

// unknownCommand is the first word of a line that starts with / and is no
// command, so a typo is not taken for an answer or for nothing.
func unknownCommand(line string) (string, bool) {
	if !strings.HasPrefix(line, "/") {
		return "", false
	}
	word, _, _ := strings.Cut(line, " ")
	return word, !slices.Contains(chatCommands, word)
}

// isApproval reports whether line answers a goal awaiting approval.
func isApproval(line string) bool {
	word, _, _ := strings.Cut(line, " ")
	return word == "/approve" || word == "/reject"
}

// approve answers a goal awaiting the person's approval with /approve or
// /reject and an optional note.
func (j *chatJoiner) approve(ctx context.Context, w waitItem, line string) {
	word, note, _ := strings.Cut(line, " ")
	if w.goal == "" || !isApproval(word) {
		fmt.Fprintln(j.out, "! for an approval: /approve [note] or /reject [note]; for a turn or a task, not those")
		return
	}
	req := protocol.ApproveRequest{GoalID: w.goal, Approve: word == "/approve", Note: strings.TrimSpace(note), By: j.name}
	var st protocol.GoalStatus
	if err := j.c.request(ctx, j.c.goalSubject(bus.GoalApprove), req, &st); err != nil {
		fmt.Fprintf(j.out, "! goal %s: %v\n", w.goal, err)
		return
	}
	j.refreshApprovals(ctx)
	reason := ""
	if st.Result != nil && st.Result.Reason != "" {
		reason = " (" + st.Result.Reason + ")"
	}
	fmt.Fprintf(j.out, "goal %s: %s%s\n", st.GoalID, strings.ReplaceAll(st.Status, "_", " "), reason)
}

// answer sends one typed line as the person's move or task result.
func (j *chatJoiner) answer(ctx context.Context, line string) {
	line = strings.TrimSpace(line)
	if line == "" {
		return
	}
	approving := isApproval(strings.TrimLeft(line, "#0123456789 "))
	if line == "/list" || approving {
		j.refreshApprovals(ctx) // answered elsewhere, or asked since
	}
	items := j.waiting()
	if line == "/list" {
		if len(items) == 0 {
			fmt.Fprintln(j.out, "nothing waits on "+j.name)
		}
		for i, w := range items {
			j.describe(i+1, w)
		}
		return
	}
	pick, chosen := 0, strings.HasPrefix(line, "#")
	if chosen {
		num, rest, _ := strings.Cut(line[1:], " ")
		n, err := strconv.Atoi(num)
		if err != nil || n < 1 || n > len(items) {
			fmt.Fprintf(j.out, "! %q: no such item (/list shows them)\n", "#"+num)
			return
		}
		pick, line = n-1, strings.TrimSpace(rest)
	}
	if cmd, ok := unknownCommand(line); ok {
		fmt.Fprintf(j.out, "! unknown command %s; the commands: %s\n", cmd, chatCommandsHelp)
		return
	}
	if len(items) == 0 {
		fmt.Fprintln(j.out, "! nothing waits on "+j.name+" now")
		return
	}
	if approving && !chosen {
		pick = slices.IndexFunc(items, func(w waitItem) bool { return w.goal != "" })
		if pick < 0 {
			fmt.Fprintln(j.out, "! no goal awaits "+j.name+"'s approval now")
			return
		}
	}
	w := items[pick]
	if w.goal != "" || approving {
		j.approve(ctx, w, line)
		return
	}
	pc := j.chats[w.comm]
	c := &pc.chat
	var m protocol.AgentMessage
	var id string
	if w.task == "" {
		m = protocol.AgentMessage{Type: protocol.MsgDiscussion, NextSpeaker: []string{c.Launcher}}
		switch {
		case strings.HasPrefix(line, "/conclude "):
			// The last entry shown: a conclusion that missed a task's
			// result is refused, and that result is on the screen.
			m = protocol.AgentMessage{Type: protocol.MsgConclusion, SeenSeq: c.LastSeq}
			line = strings.TrimPrefix(line, "/conclude ")
		case strings.HasPrefix(line, "/to "):
			to, rest, _ := strings.Cut(strings.TrimPrefix(line, "/to "), " ")
			m.NextSpeaker, line = []string{to}, rest
		case strings.HasPrefix(line, "/"):
			fmt.Fprintln(j.out, "! on your turn: text, /to NAME text or /conclude text")
			return
		}
		m.Content = strings.TrimSpace(line)
		id = agentkit.MessageID(j.name, w.comm, "s"+strconv.FormatUint(c.LastSeq, 10), "term")
	} else {
		t, _ := c.Task(w.task)
		status := protocol.TaskCompleted
		switch {
		case strings.HasPrefix(line, "/fail "):
			status, line = protocol.TaskFailed, strings.TrimPrefix(line, "/fail ")
		case strings.HasPrefix(line, "/"):
			fmt.Fprintln(j.out, "! for a task: the result, or /fail why")
			return
		}
		line = strings.TrimSpace(line)
		m = protocol.AgentMessage{Type: protocol.MsgTaskResult, TaskID: t.TaskID, TaskStatus: status, TaskConclusion: line, Content: j.name + ": " + oneLine(line)}
		id = agentkit.MessageID(j.name, w.comm, t.TaskID, strconv.Itoa(t.Attempt), "r")
	}
	if strings.TrimSpace(line) == "" {
		fmt.Fprintln(j.out, "! say something")
		return
	}
	m.V, m.ID, m.CommID, m.GoalID, m.Sender, m.Seq = protocol.Version, id, w.comm, c.GoalID, j.name, c.LastSeq+1
	if _, err := protocol.Apply(*c, m); err != nil {
		fmt.Fprintf(j.out, "! %v\n", err)
		return
	}
	m.Seq = 0
	subj, err := j.c.subj.Outbox(j.name, w.comm)
	if err != nil {
		fmt.Fprintf(j.out, "! %v\n", err)
		return
	}
	var reply protocol.SendReply
	if err := j.c.request(ctx, subj, m, &reply); err != nil {
		var pe *protocol.Error
		if errors.As(err, &pe) {
			fmt.Fprintf(j.out, "! refused: %v\n", pe)
		} else {
			fmt.Fprintf(j.out, "! %v\n", err)
		}
		return
	}
	fmt.Fprintf(j.out, "sent (#%d, chat now %s)\n", reply.Seq, reply.State)
}
