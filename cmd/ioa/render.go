package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
)

// renderOptions says how followGoal and the watchers print.
type renderOptions struct {
	Color bool // ANSI colours: stdout is a terminal and NO_COLOR is unset
	JSON  bool // print each event as one JSON line instead of text
	Quiet bool // print only the outcome and the summary
	Live  bool // keep a progress line that is rewritten in place (a terminal)
	Width int  // columns that content lines are trimmed to; 0 means 100
}

// Shape of the text output.
const (
	maxContentLines = 8 // a plan of six parts, with its "Plan:" and its first step
	progressEvery   = 120 * time.Millisecond
	describeTimeout = 2 * time.Second
	maxEarlyGoals   = 256 // goals whose events came before their subgoal announcement
	maxEarlyEvents  = 256 // per goal
)

// followGoal prints a goal's events, from its first one, as they happen,
// with the events of the sub-goals its tasks spin off indented under them,
// until the goal's result arrives (returned) or ctx ends.
func followGoal(ctx context.Context, nc *nats.Conn, subj bus.Subjects, goalID string, w io.Writer, opt renderOptions) (protocol.GoalResult, error) {
	events, err := subj.GoalEvents(goalID)
	if err != nil {
		return protocol.GoalResult{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		return protocol.GoalResult{}, err
	}
	stream, err := openStream(ctx, js, bus.StreamGoals)
	if err != nil {
		return protocol.GoalResult{}, err
	}
	// The goal's sub-goals are not known in advance, so the reader takes
	// every goal's events from the goal's first one on and keeps the tree.
	start, _, err := firstSeq(ctx, stream, events)
	if err != nil {
		return protocol.GoalResult{}, fmt.Errorf("goal %s: %w", goalID, err)
	}
	rp, err := startReplay(ctx, stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subj.AllGoalEvents(), subj.AllGoalResults()},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    start,
	})
	if err != nil {
		return protocol.GoalResult{}, err
	}
	defer rp.stop()

	r := newGoalRenderer(nc, subj, goalID, w, opt)
	defer r.clearProgress()
	var tick <-chan time.Time
	if r.live() {
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case m := <-rp.C:
			if res, done := r.handle(ctx, m.Subject(), m.Data()); done {
				return res, nil
			}
			r.drawProgress()
		case err := <-rp.errc:
			return protocol.GoalResult{}, err
		case <-tick:
			r.drawProgress()
		case <-ctx.Done():
			return protocol.GoalResult{}, ctx.Err()
		}
	}
}

// goalView is a goal of the followed tree.
type goalView struct {
	id    string
	depth int
	tag   string // printed before each line, e.g. the chat of "ioa watch"
}

// taskView is a task that runs.
type taskView struct {
	goal        *goalView
	id          string
	assignee    string
	abstract    string
	assignedAt  time.Time // event time, for the reported duration
	seenAt      time.Time // wall clock, for the live line
	hasSubgoals bool
}

// goalRenderer turns a goal tree's events into text. One goroutine (the
// follower's loop) owns it.
type goalRenderer struct {
	w    io.Writer
	opt  renderOptions
	pal  palette
	nc   *nats.Conn
	subj bus.Subjects
	root string

	goals map[string]*goalView
	early map[string][][]byte
	tasks []*taskView // running, in assignment order

	speaker      string // who is expected to speak next
	speakerSince time.Time
	progress     bool // a progress line is on screen
	frame        int

	// fromChat says the renderer reads chat logs rather than goal events:
	// tasks are then shown from the assign and result messages.
	fromChat bool
}

func newGoalRenderer(nc *nats.Conn, subj bus.Subjects, root string, w io.Writer, opt renderOptions) *goalRenderer {
	if opt.Width <= 0 {
		opt.Width = 100
	}
	return &goalRenderer{
		w: w, opt: opt, pal: palette{opt.Color}, nc: nc, subj: subj, root: root,
		goals: map[string]*goalView{root: {id: root}},
		early: map[string][][]byte{},
	}
}

func (r *goalRenderer) live() bool { return r.opt.Live && !r.opt.JSON && !r.opt.Quiet }

func (r *goalRenderer) text() bool { return !r.opt.JSON && !r.opt.Quiet }

// handle takes one message of the goal stream; it reports the root's result
// once it is known.
func (r *goalRenderer) handle(ctx context.Context, subject string, data []byte) (protocol.GoalResult, bool) {
	rest, ok := strings.CutPrefix(subject, r.subj.Prefix()+".goal.")
	if !ok {
		return protocol.GoalResult{}, false
	}
	id, kind, ok := strings.Cut(rest, ".")
	if !ok {
		return protocol.GoalResult{}, false
	}
	if kind == "result" {
		var res protocol.GoalResult
		if id != r.root || json.Unmarshal(data, &res) != nil {
			return res, false
		}
		// The terminal event comes first and says the same; it may be
		// missing only if its publication failed.
		r.outcome(res)
		return res, true
	}
	g := r.goals[id]
	if g == nil {
		r.keepEarly(id, data)
		return protocol.GoalResult{}, false
	}
	return r.event(ctx, g, data)
}

// keepEarly holds the events of a goal that may turn out to be a sub-goal
// of the tree: a child's first events can be stored before its parent's
// subgoal event. Memory is bounded; the oldest goals go first.
func (r *goalRenderer) keepEarly(id string, data []byte) {
	if _, ok := r.early[id]; !ok && len(r.early) >= maxEarlyGoals {
		clear(r.early)
	}
	if len(r.early[id]) < maxEarlyEvents {
		r.early[id] = append(r.early[id], bytes.Clone(data))
	}
}

func (r *goalRenderer) event(ctx context.Context, g *goalView, data []byte) (protocol.GoalResult, bool) {
	var ev protocol.GoalEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		return protocol.GoalResult{}, false
	}
	if r.opt.JSON {
		writeJSONLine(r.w, data)
	}
	switch ev.Kind {
	case protocol.EventAccepted:
		if g.id == r.root && r.text() {
			st, ok := r.describe(ctx, g.id)
			if ok && st.Goal != "" {
				r.line(g, "%s goal %s: %s", r.pal.cyan("●"), r.pal.bold(g.id), trimLine(firstLine(st.Goal), r.room(g, 20)))
			} else {
				r.line(g, "%s goal %s accepted", r.pal.cyan("●"), r.pal.bold(g.id))
			}
		}
	case protocol.EventTeamFormed:
		if r.text() {
			r.line(g, "%s team: %s  %s", r.pal.cyan("●"), r.pal.bold(strings.Join(ev.Team, ", ")), r.pal.dim("(chat "+ev.CommID+")"))
		}
	case protocol.EventMessage:
		if ev.Message != nil {
			r.message(g, *ev.Message)
		}
	case protocol.EventTaskAssigned:
		if ev.Task != nil {
			r.assigned(g, *ev.Task, ev.At)
		}
	case protocol.EventTaskDone:
		if ev.Task != nil {
			r.taskDone(g, *ev.Task, ev.Message, ev.At)
		}
	case protocol.EventSubgoal:
		if ev.Child != "" && r.goals[ev.Child] == nil {
			r.subgoal(ctx, g, ev.Child)
		}
	case protocol.EventApprovalRequested:
		r.approvalWait(ctx, g)
	case protocol.EventConcluded, protocol.EventFailed, protocol.EventCancelled, protocol.EventTimedOut:
		res := protocol.GoalResult{GoalID: g.id, Status: ev.Kind}
		if ev.Result != nil {
			res = *ev.Result
		}
		r.endTasks(g)
		if g.id == r.root {
			r.outcome(res)
			return res, true
		}
		r.subOutcome(g, res)
	}
	return protocol.GoalResult{}, false
}

// approvalWait says that the goal waits for a person and how they answer:
// the stream goes quiet until then, which looked like a hang. Quiet output
// shows it too, since nothing else would explain the wait.
func (r *goalRenderer) approvalWait(ctx context.Context, g *goalView) {
	if r.opt.JSON {
		return
	}
	st, _ := r.describe(ctx, g.id)
	r.line(g, "%s %s", r.pal.yellow("⏸"), approvalHint(g.id, st.ApproveBy))
}

// approvalHint is the wait for a person's approval and the command that
// answers it.
func approvalHint(goalID, person string) string {
	if person == "" {
		return fmt.Sprintf("waiting for approval: ioa goals approve %s [--reject] [--note ...]", goalID)
	}
	return fmt.Sprintf("waiting for %s's approval: ioa goals approve %s --as %s [--reject] [--note ...]", person, goalID, person)
}

func (r *goalRenderer) message(g *goalView, m protocol.AgentMessage) {
	switch {
	case len(m.NextSpeaker) == 1 && m.State != protocol.StateConclusion:
		r.speaker, r.speakerSince = m.NextSpeaker[0], time.Now()
	case protocol.IsTurnMessage(m.Type) || m.Type == protocol.MsgSystem:
		r.speaker = ""
	}
	if !r.text() {
		return
	}
	p := r.pal
	switch m.Type {
	case protocol.MsgTaskResult:
		if r.fromChat {
			r.taskDone(g, protocol.Task{TaskID: m.TaskID, Assignee: m.Sender}, &m, m.TS)
		}
		return // else shown by its task_done event, with the task's abstract
	case protocol.MsgTaskProgress:
		text := firstLine(m.Content)
		if text == "" {
			text = "working"
		}
		r.line(g, "  %s %s %s: %s", p.dim("…"), p.cyan(m.TaskID), m.Sender, trimLine(text, r.room(g, 8+len(m.TaskID)+len(m.Sender))))
		return
	}
	var head strings.Builder
	fmt.Fprintf(&head, "  %s %s  ", p.dim(fmt.Sprintf("#%d", m.Seq)), p.bold(m.Sender))
	if m.Type == protocol.MsgSystem {
		head.WriteString(p.yellow(firstNonEmpty(m.Event, m.Type)))
	} else {
		head.WriteString(p.magenta(m.Type))
	}
	if len(m.NextSpeaker) > 0 && m.State != protocol.StateConclusion {
		fmt.Fprintf(&head, " → %s", p.bold(strings.Join(m.NextSpeaker, ", ")))
	}
	if m.State != "" {
		fmt.Fprintf(&head, "  %s", p.dim("["+string(m.State)+"]"))
	}
	r.line(g, "%s", head.String())
	content := m.Content
	switch {
	case m.Type == protocol.MsgSystem && m.Event == protocol.EventStart:
		content = fmt.Sprintf("max %d turns, team-up depth %d", m.MaxTurns, m.TeamUpDepth)
	case m.Type == protocol.MsgSystem && m.Reason != "" && !strings.Contains(content, m.Reason):
		content = strings.TrimSpace(content + "\n" + m.Reason)
	case m.Type == protocol.MsgConclusion && g.id == r.root:
		content = "" // printed in full as the outcome
	}
	r.block(g, "      ", content)
	if r.fromChat {
		for _, t := range m.Tasks {
			r.assigned(g, t, m.TS)
		}
	}
}

func (r *goalRenderer) assigned(g *goalView, t protocol.Task, at time.Time) {
	r.tasks = append(r.tasks, &taskView{goal: g, id: t.TaskID, assignee: t.Assignee, abstract: taskTitle(t), assignedAt: at, seenAt: time.Now()})
	if !r.text() {
		return
	}
	p := r.pal
	r.line(g, "      %s %s → %s: %s", p.cyan("⇢ task"), p.cyan(t.TaskID), p.bold(t.Assignee),
		trimLine(taskTitle(t), r.room(g, 20+len(t.TaskID)+len(t.Assignee))))
}

func (r *goalRenderer) taskDone(g *goalView, t protocol.Task, m *protocol.AgentMessage, at time.Time) {
	var took string
	for i, tv := range r.tasks {
		if tv.goal == g && tv.id == t.TaskID {
			if !tv.assignedAt.IsZero() && !at.IsZero() {
				took = " " + fmtDuration(at.Sub(tv.assignedAt))
			}
			r.tasks = append(r.tasks[:i], r.tasks[i+1:]...)
			break
		}
	}
	if !r.text() {
		return
	}
	p := r.pal
	status, result := protocol.TaskCompleted, ""
	if m != nil {
		status, result = firstNonEmpty(m.TaskStatus, protocol.TaskCompleted), m.TaskConclusion
	}
	mark, verb := p.green("✓"), ""
	if status != protocol.TaskCompleted {
		mark, verb = p.red("✗"), " "+p.red(status)
	}
	head := fmt.Sprintf("  %s %s %s%s%s", mark, p.cyan(t.TaskID), p.bold(t.Assignee), verb, p.dim(took))
	first, more, _ := strings.Cut(strings.TrimSpace(result), "\n")
	r.line(g, "%s: %s", head, trimLine(first, r.room(g, visibleLen(head)+2)))
	r.block(g, "      ", more)
}

func (r *goalRenderer) subgoal(ctx context.Context, parent *goalView, child string) {
	cg := &goalView{id: child, depth: parent.depth + 1}
	r.goals[child] = cg
	early := r.early[child]
	delete(r.early, child)
	if r.text() {
		st, _ := r.describe(ctx, child)
		label := "a task"
		if st.Parent != nil && st.Parent.TaskID != "" {
			label = r.pal.cyan(st.Parent.TaskID)
			for _, t := range r.tasks {
				if t.goal == parent && t.id == st.Parent.TaskID {
					label += " (" + t.assignee + ")"
					t.hasSubgoals = true
				}
			}
		}
		r.line(parent, "  %s %s teams up: sub-goal %s %s", r.pal.cyan("↳"), label, r.pal.bold(child),
			trimLine(firstLine(st.Goal), r.room(cg, 40)))
	}
	for _, data := range early {
		r.event(ctx, cg, data)
	}
}

// endTasks forgets the running tasks of a goal that has ended.
func (r *goalRenderer) endTasks(g *goalView) {
	kept := r.tasks[:0]
	for _, t := range r.tasks {
		if t.goal != g {
			kept = append(kept, t)
		}
	}
	clear(r.tasks[len(kept):])
	r.tasks = kept
}

func (r *goalRenderer) subOutcome(g *goalView, res protocol.GoalResult) {
	if !r.text() {
		return
	}
	mark, status := endMark(r.pal, res)
	line := fmt.Sprintf("%s sub-goal %s %s · %s", mark, g.id, status, r.pal.dim(summary(res)))
	if res.Reason != "" {
		line += ": " + res.Reason
	}
	r.line(g, "%s", trimLine(line, r.room(g, 0)))
}

// outcome prints how the followed goal ended: in full, since it is what
// the user asked for.
func (r *goalRenderer) outcome(res protocol.GoalResult) {
	r.clearProgress()
	if r.opt.JSON {
		return
	}
	p := r.pal
	mark, status := endMark(p, res)
	line := fmt.Sprintf("%s %s", mark, p.bold(status))
	if res.Reason != "" {
		line += ": " + res.Reason
	}
	fmt.Fprintln(r.w, line)
	if c := strings.TrimSpace(res.Conclusion); c != "" {
		for l := range strings.SplitSeq(c, "\n") {
			fmt.Fprintf(r.w, "    %s\n", l)
		}
	}
	fmt.Fprintf(r.w, "  %s\n", p.dim(summary(res)))
}

// endMark is the mark and the words for how a goal ended: a green ✔ only
// when it concluded having done everything; a yellow ◐ when it did part of
// it; a red ✗ when it did nothing, failed, was cancelled or timed out.
func endMark(p palette, res protocol.GoalResult) (mark, status string) {
	status = strings.ReplaceAll(res.Status, "_", " ")
	if res.Status == protocol.GoalConcluded {
		switch res.Outcome {
		case protocol.OutcomePartial:
			return p.yellow("◐"), status + " · partial"
		case protocol.OutcomeFailed:
			return p.red("✗"), status + " · failed"
		}
		return p.green("✔"), status
	}
	if res.Outcome == protocol.OutcomePartial {
		status += " · partial"
	}
	return p.red("✗"), status
}

// summary is the usage line of a result.
func summary(res protocol.GoalResult) string {
	u := res.Usage
	llm := "no LLM calls"
	if u.LLMCalls > 0 || u.PromptTokens+u.CompletionTokens > 0 {
		llm = fmt.Sprintf("%d LLM calls · %d tokens (%d prompt + %d completion)", u.LLMCalls,
			u.PromptTokens+u.CompletionTokens, u.PromptTokens, u.CompletionTokens)
	}
	return fmt.Sprintf("%s · %s · %s", plural(res.Turns, "turn"), fmtDuration(res.Elapsed.D()), llm)
}

// describe asks the orchestrator about a goal; the text is a nicety, so
// failures are quiet.
func (r *goalRenderer) describe(ctx context.Context, id string) (protocol.GoalStatus, bool) {
	ctx, cancel := context.WithTimeout(ctx, describeTimeout)
	defer cancel()
	var st protocol.GoalStatus
	err := bus.Request(ctx, r.nc, r.subj.Goal(bus.GoalGet), protocol.GoalIDRequest{GoalID: id}, &st)
	return st, err == nil
}

// line prints one line of goal g, indented by its depth, below the
// progress line's place.
func (r *goalRenderer) line(g *goalView, format string, args ...any) {
	r.clearProgress()
	fmt.Fprintf(r.w, "%s%s%s\n", indent(g.depth), g.tag, fmt.Sprintf(format, args...))
}

// block prints multi-line content under a line, trimmed in width and length.
func (r *goalRenderer) block(g *goalView, lead, content string) {
	content = strings.TrimSpace(content)
	if content == "" {
		return
	}
	lines := strings.Split(content, "\n")
	room := r.room(g, len(lead))
	for i, l := range lines {
		if i == maxContentLines-1 && len(lines) > maxContentLines {
			r.line(g, "%s%s", lead, r.pal.dim(fmt.Sprintf("… %d more lines", len(lines)-i)))
			return
		}
		r.line(g, "%s%s", lead, trimLine(l, room))
	}
}

// room is how many columns are left on a line of g after used ones.
func (r *goalRenderer) room(g *goalView, used int) int {
	return max(r.opt.Width-len(indent(g.depth))-visibleLen(g.tag)-used, 20)
}

var spinner = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// drawProgress rewrites the progress line: the running tasks and how long
// they have run, or who is expected to speak.
func (r *goalRenderer) drawProgress() {
	if !r.live() {
		return
	}
	var status string
	switch {
	case len(r.tasks) > 0:
		parts := make([]string, 0, len(r.tasks))
		for _, t := range r.tasks {
			parts = append(parts, fmt.Sprintf("%s %s %s", t.id, t.assignee, fmtDuration(time.Since(t.seenAt))))
		}
		status = fmt.Sprintf("%s running: %s", plural(len(r.tasks), "task"), strings.Join(parts, " · "))
	case r.speaker != "":
		status = fmt.Sprintf("%s is speaking… %s", r.speaker, fmtDuration(time.Since(r.speakerSince)))
	default:
		r.clearProgress()
		return
	}
	frame := spinner[r.frame%len(spinner)]
	r.frame++
	fmt.Fprintf(r.w, "\r\033[K%s %s", r.pal.cyan(frame), r.pal.dim(trimLine(status, r.opt.Width-3)))
	r.progress = true
}

func (r *goalRenderer) clearProgress() {
	if r.progress {
		fmt.Fprint(r.w, "\r\033[K")
		r.progress = false
	}
}

// palette colours text when colour is on.
type palette struct{ on bool }

func (p palette) wrap(code, s string) string {
	if !p.on || s == "" {
		return s
	}
	return "\033[" + code + "m" + s + "\033[0m"
}

func (p palette) bold(s string) string    { return p.wrap("1", s) }
func (p palette) dim(s string) string     { return p.wrap("2", s) }
func (p palette) red(s string) string     { return p.wrap("31", s) }
func (p palette) green(s string) string   { return p.wrap("32", s) }
func (p palette) yellow(s string) string  { return p.wrap("33", s) }
func (p palette) magenta(s string) string { return p.wrap("35", s) }
func (p palette) cyan(s string) string    { return p.wrap("36", s) }

func indent(depth int) string { return strings.Repeat("    ", depth) }

// trimLine cuts s to n runes, marking the cut.
func trimLine(s string, n int) string {
	s = strings.TrimRight(s, " \t\r")
	if n <= 1 {
		n = 2
	}
	rs := []rune(s)
	if len(rs) <= n {
		return s
	}
	return string(rs[:n-1]) + "…"
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return l
}

// visibleLen is the width of s without its colour codes.
func visibleLen(s string) int {
	n, esc := 0, false
	for _, c := range s {
		switch {
		case esc:
			esc = c != 'm'
		case c == '\033':
			esc = true
		default:
			n++
		}
	}
	return n
}

func taskTitle(t protocol.Task) string {
	return firstLine(firstNonEmpty(t.TaskAbstract, t.TaskDesc))
}

// firstNonEmpty returns the first of its arguments that is not empty.
func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// fmtDuration prints durations the way people read them: 340ms, 2.4s, 1m12s.
func fmtDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return d.Round(time.Second).String()
}
