package a2a

import (
	"context"
	"errors"
	"fmt"
	"github.com/ioa-nats/ioa/interop/internal/text"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"

	"github.com/ioa-nats/ioa/agentkit"
)

// Defaults of a Worker.
const (
	DefaultTimeout = 5 * time.Minute
	fetchTimeout   = 30 * time.Second
	maxProgress    = 20 // progress notes per task
	pollFirst      = 250 * time.Millisecond
	pollMax        = 5 * time.Second
)

// Errors a Worker wraps, for callers that branch on them.
var (
	// ErrRemoteFailed is a task the remote agent failed, rejected or
	// cancelled.
	ErrRemoteFailed = errors.New("the remote agent failed the task")
	// ErrInputRequired is a task the remote agent paused to ask for input.
	ErrInputRequired = errors.New("the remote agent needs more input")
	// ErrAuthRequired is a task the remote agent paused for credentials.
	ErrAuthRequired = errors.New("the remote agent requires authentication")
	// ErrTimeout is a task that took longer than the timeout.
	ErrTimeout = errors.New("timed out")
)

// WorkerConfig says where the remote agent is.
type WorkerConfig struct {
	// URL is the agent's card (a URL ending in .json) or its base URL, to
	// which /.well-known/agent-card.json is added.
	URL string
	// Token, when set, is sent as Authorization: Bearer <token>, on the
	// card request and the calls.
	Token string
	// Timeout bounds each task (default 5m).
	Timeout time.Duration
	// HTTPClient sends the requests (default: a plain client).
	HTTPClient *http.Client
	Logger     *slog.Logger
}

// Worker is an agentkit.Worker that sends each task to a remote A2A agent
// as a message and waits for the task to end: streamed when the card says
// the agent streams, else a blocking message/send (then tasks/get until the
// task ends). A completed task's artifacts (or last message) are the
// result; a failed, rejected or cancelled one fails the ioa task with the
// agent's reason; input-required and auth-required fail it with the
// agent's question, so the chat sees it. Working updates with text are
// sent to the chat as task progress. Tasks of one chat share an A2A
// context (the chat's comm_id).
type Worker struct {
	cfg    WorkerConfig
	card   *a2a.AgentCard
	client *a2aclient.Client
	log    *slog.Logger
}

var _ agentkit.Worker = (*Worker)(nil)

// DialWorker fetches the agent's card and prepares a client for it.
func DialWorker(ctx context.Context, cfg WorkerConfig) (*Worker, error) {
	if !strings.HasPrefix(cfg.URL, "http://") && !strings.HasPrefix(cfg.URL, "https://") {
		return nil, fmt.Errorf("a2a: %q is not an http(s) URL", cfg.URL)
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	if cfg.Token != "" {
		base := hc.Transport
		if base == nil {
			base = http.DefaultTransport
		}
		c := *hc
		c.Transport = bearer{token: cfg.Token, base: base}
		hc = &c
	}
	w := &Worker{cfg: cfg, log: cfg.Logger}
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	fctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	base, opts := cfg.URL, []agentcard.ResolveOption(nil)
	if strings.HasSuffix(strings.SplitN(cfg.URL, "?", 2)[0], ".json") {
		i := strings.Index(cfg.URL[len("https://"):], "/") + len("https://")
		base, opts = cfg.URL[:i], []agentcard.ResolveOption{agentcard.WithPath(cfg.URL[i:])}
	}
	card, err := agentcard.NewResolver(hc).Resolve(fctx, base, opts...)
	if err != nil {
		return nil, fmt.Errorf("a2a: fetch the agent card from %s: %w", cfg.URL, err)
	}
	if card.Name == "" || card.URL == "" {
		return nil, fmt.Errorf("a2a: the agent card at %s has no name or url", cfg.URL)
	}
	client, err := a2aclient.NewFromCard(fctx, card, a2aclient.WithJSONRPCTransport(hc))
	if err != nil {
		return nil, fmt.Errorf("a2a: agent %s: %w", card.Name, err)
	}
	w.card, w.client = card, client
	return w, nil
}

// Card returns the remote agent's card.
func (w *Worker) Card() *a2a.AgentCard { return w.card }

// Capabilities are the card's skills: each skill's name and description.
func (w *Worker) Capabilities() []string {
	var out []string
	for _, s := range w.card.Skills {
		c := s.Name
		if s.Description != "" && s.Description != s.Name {
			c += ": " + text.FirstSentence(s.Description)
		}
		out = append(out, c)
	}
	return out
}

// Tags are the skills' tags, without repeats.
func (w *Worker) Tags() []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range w.card.Skills {
		for _, t := range s.Tags {
			if !seen[t] {
				seen[t] = true
				out = append(out, t)
			}
		}
	}
	return out
}

// Description is the card's description.
func (w *Worker) Description() string {
	if w.card.Description != "" {
		return w.card.Description
	}
	return "A2A agent " + w.card.Name
}

// Close releases the client.
func (w *Worker) Close() error { return w.client.Destroy() }

// taskMessage is what the remote agent gets for an ioa task.
func taskMessage(t agentkit.Task) string {
	text := strings.TrimSpace(t.TaskDesc)
	if text == "" {
		text = t.TaskAbstract
	}
	var b strings.Builder
	b.WriteString(text)
	if t.Goal != "" && t.Goal != text {
		fmt.Fprintf(&b, "\n\n(This task is part of the goal: %s)", t.Goal)
	}
	if len(t.Earlier) > 0 {
		b.WriteString("\n\nResults of earlier tasks:")
		for _, e := range t.Earlier {
			fmt.Fprintf(&b, "\n- %s (%s, %s): %s", e.TaskID, e.Assignee, e.Status, clip(e.Result, 1000))
		}
	}
	return b.String()
}

// outcome gathers what the remote task produced.
type outcome struct {
	state     a2a.TaskState
	taskID    a2a.TaskID
	statusMsg string
	artifacts []string // in order; an appended chunk extends the last of its id
	artIDs    []a2a.ArtifactID
	message   string // a direct Message answer
	progress  int
}

func (o *outcome) addArtifact(a *a2a.Artifact, appendTo bool) {
	if a == nil {
		return
	}
	text := partsText(a.Parts)
	for i, id := range o.artIDs {
		if id == a.ID {
			if appendTo {
				o.artifacts[i] += text
			} else {
				o.artifacts[i] = text
			}
			return
		}
	}
	o.artIDs = append(o.artIDs, a.ID)
	o.artifacts = append(o.artifacts, text)
}

func (o *outcome) task(t *a2a.Task) {
	o.taskID = t.ID
	o.state = t.Status.State
	if m := MessageText(t.Status.Message); m != "" {
		o.statusMsg = m
	}
	o.artIDs, o.artifacts = nil, nil
	for _, a := range t.Artifacts {
		o.addArtifact(a, false)
	}
}

func (o *outcome) done() bool {
	return o.message != "" || o.state.Terminal() || o.state == a2a.TaskStateInputRequired || o.state == a2a.TaskStateAuthRequired
}

// Run sends t to the remote agent and waits for its result.
func (w *Worker) Run(ctx context.Context, t agentkit.Task) (agentkit.Result, error) {
	timeout := w.cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: taskMessage(t)})
	msg.ContextID = t.CommID
	msg.Metadata = map[string]any{"ioa_goal_id": t.GoalID, "ioa_comm_id": t.CommID, "ioa_task_id": t.TaskID}
	params := &a2a.MessageSendParams{Message: msg, Config: &a2a.MessageSendConfig{AcceptedOutputModes: []string{"text/plain", "text/markdown", "application/json"}}}
	o := &outcome{}
	var err error
	if w.card.Capabilities.Streaming {
		err = w.stream(rctx, t, params, o)
	} else {
		err = w.send(rctx, params, o)
	}
	if err == nil && !o.done() && o.taskID != "" {
		err = w.poll(rctx, o)
	}
	if err != nil {
		if o.taskID != "" && !o.state.Terminal() {
			w.cancelRemote(o.taskID)
		}
		switch {
		case ctx.Err() != nil:
			return agentkit.Result{}, fmt.Errorf("a2a %s: %w", w.card.Name, ctx.Err())
		case errors.Is(rctx.Err(), context.DeadlineExceeded):
			return agentkit.Result{}, fmt.Errorf("a2a %s: %w after %v", w.card.Name, ErrTimeout, timeout)
		}
		return agentkit.Result{}, fmt.Errorf("a2a %s: %w", w.card.Name, err)
	}
	return w.result(o)
}

func (w *Worker) result(o *outcome) (agentkit.Result, error) {
	name := w.card.Name
	if o.message != "" {
		return agentkit.Result{Conclusion: o.message}, nil
	}
	reason := o.statusMsg
	if reason == "" {
		reason = "(no reason given)"
	}
	switch o.state {
	case a2a.TaskStateCompleted:
		text := strings.TrimSpace(strings.Join(o.artifacts, "\n\n"))
		if text == "" {
			text = o.statusMsg
		}
		return agentkit.Result{Conclusion: text}, nil
	case a2a.TaskStateInputRequired:
		return agentkit.Result{}, fmt.Errorf("a2a %s: %w: %s", name, ErrInputRequired, reason)
	case a2a.TaskStateAuthRequired:
		return agentkit.Result{}, fmt.Errorf("a2a %s: %w: %s", name, ErrAuthRequired, reason)
	case a2a.TaskStateFailed, a2a.TaskStateRejected, a2a.TaskStateCanceled:
		return agentkit.Result{}, fmt.Errorf("a2a %s: %w (%s): %s", name, ErrRemoteFailed, o.state, reason)
	}
	return agentkit.Result{}, fmt.Errorf("a2a %s: the task ended in state %q without a result", name, o.state)
}

func (w *Worker) stream(ctx context.Context, t agentkit.Task, params *a2a.MessageSendParams, o *outcome) error {
	for ev, err := range w.client.SendStreamingMessage(ctx, params) {
		if err != nil {
			return err
		}
		switch ev := ev.(type) {
		case *a2a.Message:
			o.message = MessageText(ev)
			if o.message == "" {
				o.message = "(empty answer)"
			}
		case *a2a.Task:
			o.task(ev)
		case *a2a.TaskStatusUpdateEvent:
			o.taskID = ev.TaskID
			o.state = ev.Status.State
			text := MessageText(ev.Status.Message)
			if text != "" {
				o.statusMsg = text
			}
			if ev.Status.State == a2a.TaskStateWorking && text != "" && t.Progress != nil && o.progress < maxProgress {
				o.progress++
				if err := t.Progress(ctx, clip(text, 2000)); err != nil {
					w.log.Debug("a2a progress not sent", "agent", w.card.Name, "err", err)
				}
			}
		case *a2a.TaskArtifactUpdateEvent:
			o.taskID = ev.TaskID
			o.addArtifact(ev.Artifact, ev.Append)
		}
		if o.done() {
			return nil
		}
	}
	return nil
}

func (w *Worker) send(ctx context.Context, params *a2a.MessageSendParams, o *outcome) error {
	blocking := true
	params.Config.Blocking = &blocking
	res, err := w.client.SendMessage(ctx, params)
	if err != nil {
		return err
	}
	switch r := res.(type) {
	case *a2a.Message:
		o.message = MessageText(r)
		if o.message == "" {
			o.message = "(empty answer)"
		}
	case *a2a.Task:
		o.task(r)
	default:
		return fmt.Errorf("unexpected answer %T to message/send", res)
	}
	return nil
}

// poll asks for a task that is not done yet until it is, backing off.
func (w *Worker) poll(ctx context.Context, o *outcome) error {
	wait := pollFirst
	for !o.done() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, pollMax)
		task, err := w.client.GetTask(ctx, &a2a.TaskQueryParams{ID: o.taskID})
		if err != nil {
			return err
		}
		o.task(task)
	}
	return nil
}

// cancelRemote asks the remote agent to cancel a task ioa gave up on.
func (w *Worker) cancelRemote(id a2a.TaskID) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := w.client.CancelTask(ctx, &a2a.TaskIDParams{ID: id}); err != nil {
		w.log.Debug("a2a cancel", "agent", w.card.Name, "task", id, "err", err)
	}
}

// bearer adds the token to each request.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}
