// Package a2a connects ioa and the Agent2Agent protocol (A2A) both ways,
// with the a2aproject Go SDK (github.com/a2aproject/a2a-go, which speaks
// the protocol's JSON-RPC binding as of spec 0.3: message/send,
// message/stream, tasks/get, tasks/cancel, agent cards at
// /.well-known/agent-card.json):
//
//   - Server publishes ioa over HTTP (A2A out): a front-door card whose
//     messages become goals for a team the registry forms, and one card
//     per registered agent, whose messages become goals for that agent's
//     team. Each goal is an A2A task whose states follow the goal's
//     events, streamed over SSE.
//   - Worker makes a remote A2A agent a member of ioa teams (A2A in): its
//     card's skills become the agent's capabilities and each task goes to
//     it as an A2A message.
package a2a

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"
	"github.com/nats-io/nats.go"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/interop/internal/ioaclient"
)

// ProtocolVersion is the A2A version of the cards and the JSON-RPC binding
// served (that of the a2a-go SDK).
const ProtocolVersion = "0.3.0"

// DefaultMaxGoals is ServerConfig.MaxGoals when unset.
const DefaultMaxGoals = 256

// SchemeName names the bearer security scheme in the cards.
const SchemeName = "bearer"

// MetaGoalID is the key of the ioa goal id in an A2A task's metadata.
const MetaGoalID = "ioa_goal_id"

// MetaOutcome and MetaReason are the keys of a concluded goal's outcome
// (succeeded or partial) and of its reason (what was not done) in the
// metadata of its conclusion artifact. A goal that concluded having done
// nothing ends its task as failed.
const (
	MetaOutcome = "ioa_outcome"
	MetaReason  = "ioa_reason"
)

// ServerConfig configures the A2A front door.
type ServerConfig struct {
	// NC reaches ioa; it must be allowed to submit, get and cancel goals
	// for As, read the registry and read stream IOA_GOALS (the admin's
	// connection of ioa serve).
	NC   *nats.Conn
	Subj bus.Subjects
	// As is the client identity goals are submitted for, on the
	// identity-bound subjects (<p>.goal.submit.<As>), so they are
	// attributable: GoalStatus.submitter says who. Default "a2a".
	As string
	// BaseURL is the public URL of the HTTP server, e.g.
	// http://127.0.0.1:8080; the cards' endpoints are under it.
	BaseURL string
	// Token is the bearer token callers of the JSON-RPC endpoints must
	// present (Authorization: Bearer <token>), as the cards' security
	// scheme says. Empty serves without authentication (development).
	Token string
	// Version is the cards' version (default "dev").
	Version string
	// Coordinator names the launcher of goals (orchestrator.coordinator):
	// it is left out of the front door's skills and gets no card of its own.
	Coordinator string
	// MaxGoals bounds the goals the front door follows at once (default
	// 256); a message past it is rejected.
	MaxGoals int
	// GoalTimeout, when set, is asked for each goal (the server's
	// limits.goal_timeout applies anyway).
	GoalTimeout time.Duration
	Logger      *slog.Logger
}

// Server is the A2A front door: an http.Handler.
type Server struct {
	cfg ServerConfig
	c   *ioaclient.Client
	log *slog.Logger
	mux *http.ServeMux

	mu       sync.Mutex
	handlers map[string]http.Handler // "" is the front door, else an agent's name

	ctx    context.Context // ends the goal followers on Close
	cancel context.CancelFunc
	slots  chan struct{} // one per goal followed
}

// NewServer returns the front door.
func NewServer(cfg ServerConfig) (*Server, error) {
	if cfg.NC == nil {
		return nil, errors.New("a2a: no NATS connection")
	}
	if cfg.As == "" {
		cfg.As = "a2a"
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if cfg.MaxGoals <= 0 {
		cfg.MaxGoals = DefaultMaxGoals
	}
	cfg.BaseURL = strings.TrimSuffix(cfg.BaseURL, "/")
	if !strings.HasPrefix(cfg.BaseURL, "http://") && !strings.HasPrefix(cfg.BaseURL, "https://") {
		return nil, fmt.Errorf("a2a: base URL %q is not http(s)", cfg.BaseURL)
	}
	s := &Server{
		cfg:      cfg,
		c:        &ioaclient.Client{NC: cfg.NC, Subj: cfg.Subj, As: cfg.As},
		log:      cfg.Logger,
		handlers: map[string]http.Handler{},
		slots:    make(chan struct{}, cfg.MaxGoals),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+a2asrv.WellKnownAgentCardPath, s.serveCard)
	mux.HandleFunc("POST /a2a", s.serveRPC)
	mux.HandleFunc("GET /agents", s.serveAgentList)
	mux.HandleFunc("GET /agents/{name}"+a2asrv.WellKnownAgentCardPath, s.serveCard)
	mux.HandleFunc("POST /agents/{name}/a2a", s.serveRPC)
	s.mux = mux
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxRequestBytes)
	s.mux.ServeHTTP(w, r)
}

// Close stops following goals: their tasks end as failed, saying that the
// goals go on in ioa.
func (s *Server) Close() { s.cancel() }

const maxRequestBytes = 1 << 20

// FrontDoorURL is the JSON-RPC endpoint of the front door.
func (s *Server) FrontDoorURL() string { return s.cfg.BaseURL + "/a2a" }

// AgentURL is the JSON-RPC endpoint of an agent's card.
func (s *Server) AgentURL(name string) string { return s.cfg.BaseURL + "/agents/" + name + "/a2a" }

func (s *Server) security(card *a2a.AgentCard) {
	if s.cfg.Token == "" {
		return
	}
	card.SecuritySchemes = a2a.NamedSecuritySchemes{
		SchemeName: a2a.HTTPAuthSecurityScheme{Scheme: "Bearer", Description: "the token in <data-dir>/creds/a2a.token of the ioa serve (the path is printed at start)"},
	}
	card.Security = []a2a.SecurityRequirements{{SchemeName: a2a.SecuritySchemeScopes{}}}
}

// FrontDoorCard is ioa's own card: messages become goals for a team the
// registry forms; its skills are the registered agents.
func (s *Server) FrontDoorCard(ctx context.Context) (*a2a.AgentCard, error) {
	list, err := s.c.Agents(ctx, false, 1000)
	if err != nil {
		return nil, err
	}
	skills := []a2a.AgentSkill{{
		ID: "goal", Name: "Reach a goal with a team of agents",
		Description: "Send a goal in plain language; ioa finds the agents that can help, they team up in a group chat, split the work into tasks and conclude. The task's artifact is the conclusion.",
		Tags:        []string{"goal", "team", "agents"},
		Examples:    []string{"Convert 42 km to miles. Then write a Markdown report of the results."},
	}}
	for _, a := range list.Agents {
		if a.Type == protocol.TypeHuman || a.Name == s.cfg.Coordinator {
			continue
		}
		skills = append(skills, a2a.AgentSkill{
			ID: "agent-" + a.Name, Name: a.Name, Description: a.Description,
			Tags: nonNil(a.Capabilities),
		})
	}
	return s.card("ioa", "The Internet of Agents on NATS: agents that find each other, team up in group chats and get goals done. Each message is a goal; each task is the goal's run.",
		s.FrontDoorURL(), skills), nil
}

// card is an A2A card served by the front door: JSON-RPC at url, text in
// and out, streaming, and the front door's security scheme.
func (s *Server) card(name, description, url string, skills []a2a.AgentSkill) *a2a.AgentCard {
	card := &a2a.AgentCard{
		Name:                 name,
		Description:          description,
		URL:                  url,
		PreferredTransport:   a2a.TransportProtocolJSONRPC,
		AdditionalInterfaces: []a2a.AgentInterface{{Transport: a2a.TransportProtocolJSONRPC, URL: url}},
		ProtocolVersion:      ProtocolVersion,
		Version:              s.cfg.Version,
		Capabilities:         a2a.AgentCapabilities{Streaming: true},
		DefaultInputModes:    []string{"text/plain"},
		DefaultOutputModes:   []string{"text/plain"},
		Skills:               skills,
		Provider:             &a2a.AgentProvider{Org: "ioa", URL: s.cfg.BaseURL},
	}
	s.security(card)
	return card
}

// AgentCard is one registered agent's card: messages become goals for a
// team of that agent (and the coordinator); its skills are the agent's
// capabilities.
func (s *Server) AgentCard(ctx context.Context, name string) (*a2a.AgentCard, error) {
	if name == s.cfg.Coordinator {
		return nil, fmt.Errorf("%w: %s launches the goals of the front door; it has no card of its own", protocol.ErrNotFound, name)
	}
	info, err := s.c.Agent(ctx, name)
	if err != nil {
		return nil, err
	}
	var skills []a2a.AgentSkill
	for i, c := range info.Capabilities {
		skills = append(skills, a2a.AgentSkill{
			ID: fmt.Sprintf("%s-%d", info.Name, i+1), Name: c,
			Description: c + " (" + info.Description + ")",
			Tags:        nonNil(info.Tags),
		})
	}
	if len(skills) == 0 {
		skills = []a2a.AgentSkill{{ID: info.Name, Name: info.Name, Description: info.Description, Tags: nonNil(info.Tags)}}
	}
	return s.card(info.Name, info.Description, s.AgentURL(info.Name), skills), nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (s *Server) serveCard(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	var card *a2a.AgentCard
	var err error
	if name := r.PathValue("name"); name != "" {
		card, err = s.AgentCard(ctx, name)
	} else {
		card, err = s.FrontDoorCard(ctx)
	}
	if err != nil {
		httpError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Access-Control-Allow-Origin", "*")
	_ = json.NewEncoder(w).Encode(card)
}

// serveAgentList lists the agent cards' URLs (not part of A2A; a
// convenience for finding them).
func (s *Server) serveAgentList(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	list, err := s.c.Agents(ctx, false, 1000)
	if err != nil {
		httpError(w, err)
		return
	}
	type entry struct {
		Name        string `json:"name"`
		Description string `json:"description"`
		Online      bool   `json:"online"`
		Card        string `json:"card"`
	}
	out := struct {
		Agents []entry `json:"agents"`
	}{Agents: []entry{}}
	for _, a := range list.Agents {
		if a.Name == s.cfg.Coordinator {
			continue // it has no card of its own (AgentCard)
		}
		out.Agents = append(out.Agents, entry{a.Name, a.Description, a.Online, s.cfg.BaseURL + "/agents/" + a.Name + a2asrv.WellKnownAgentCardPath})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

func httpError(w http.ResponseWriter, err error) {
	code := http.StatusBadGateway
	if errors.Is(err, protocol.ErrNotFound) {
		code = http.StatusNotFound
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
}

// authorized checks the bearer token.
func (s *Server) authorized(r *http.Request) bool {
	if s.cfg.Token == "" {
		return true
	}
	h := r.Header.Get("Authorization")
	const prefix = "bearer "
	if len(h) < len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(h[len(prefix):])), []byte(s.cfg.Token)) == 1
}

func (s *Server) serveRPC(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="ioa"`)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"unauthorized: send Authorization: Bearer <token> (ioa serve keeps it in <data-dir>/creds/a2a.token)"}}`))
		return
	}
	name := r.PathValue("name")
	if name != "" {
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		_, err := s.AgentCard(ctx, name)
		cancel()
		if err != nil {
			httpError(w, err)
			return
		}
	}
	if checkRPC(w, r) {
		return
	}
	s.handlerFor(name).ServeHTTP(w, r)
}

// handlerFor returns the JSON-RPC handler of the front door ("") or of an
// agent, each with its own task store.
func (s *Server) handlerFor(name string) http.Handler {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.handlers[name]
	if !ok {
		exec := &executor{s: s, agent: name, running: map[a2a.TaskID]bool{}}
		h = a2asrv.NewJSONRPCHandler(endedTasks{a2asrv.NewHandler(exec, a2asrv.WithLogger(s.log), a2asrv.WithCallInterceptor(errorLog{s.log}))})
		s.handlers[name] = h
	}
	return h
}

// errorLog refuses follow-up messages to a task and logs the errors the
// JSON-RPC methods answer with (the binding reduces them to a code and a
// short message).
type errorLog struct{ log *slog.Logger }

// errFollowUp answers a message that names a task: an ioa goal takes no
// more input once submitted.
var errFollowUp = fmt.Errorf("%w: an ioa goal takes no more input once submitted; send a new message (without taskId) for a new goal", a2a.ErrUnsupportedOperation)

func (errorLog) Before(ctx context.Context, _ *a2asrv.CallContext, req *a2asrv.Request) (context.Context, error) {
	if p, ok := req.Payload.(*a2a.MessageSendParams); ok && p != nil && p.Message != nil && p.Message.TaskID != "" {
		return ctx, errFollowUp
	}
	return ctx, nil
}

func (l errorLog) After(_ context.Context, cc *a2asrv.CallContext, resp *a2asrv.Response) error {
	if resp.Err != nil {
		l.log.Warn("a2a call failed", "method", cc.Method(), "err", resp.Err)
	}
	return nil
}

// executor runs each A2A task as an ioa goal.
type executor struct {
	s     *Server
	agent string // "" for the front door

	mu      sync.Mutex
	running map[a2a.TaskID]bool // tasks whose goal Execute follows
}

var _ a2asrv.AgentExecutor = (*executor)(nil)

// MessageText is the text of a message: its text parts, and its data parts
// as JSON.
func MessageText(m *a2a.Message) string {
	if m == nil {
		return ""
	}
	return partsText(m.Parts)
}

func partsText(parts a2a.ContentParts) string {
	var out []string
	for _, p := range parts {
		switch p := p.(type) {
		case a2a.TextPart:
			out = append(out, p.Text)
		case *a2a.TextPart:
			out = append(out, p.Text)
		case a2a.DataPart:
			if b, err := json.Marshal(p.Data); err == nil {
				out = append(out, string(b))
			}
		case *a2a.DataPart:
			if b, err := json.Marshal(p.Data); err == nil {
				out = append(out, string(b))
			}
		}
	}
	return strings.TrimSpace(strings.Join(out, "\n"))
}

func agentText(info a2a.TaskInfoProvider, text string) *a2a.Message {
	return a2a.NewMessageForTask(a2a.MessageRoleAgent, info, a2a.TextPart{Text: text})
}

// Execute submits the message as a goal and turns the goal's events into
// the task's: submitted, working (with the chat's messages), then
// completed with the conclusion as an artifact, failed or canceled.
func (e *executor) Execute(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	s := e.s
	if rc.StoredTask != nil {
		return errFollowUp // refused before it gets here (errorLog.Before)
	}
	goal := MessageText(rc.Message)
	task := a2a.NewSubmittedTask(rc, rc.Message)
	if goal == "" {
		task.Status = a2a.TaskStatus{State: a2a.TaskStateRejected, Message: agentText(rc, "the message has no text: send the goal as a text part")}
		return q.Write(ctx, task)
	}
	var release func()
	select {
	case s.slots <- struct{}{}:
		// Given back before the task's final event, so that a client who
		// saw its task end may send the next one at once.
		release = sync.OnceFunc(func() { <-s.slots })
		defer release()
	default:
		task.Status = a2a.TaskStatus{State: a2a.TaskStateRejected, Message: agentText(rc, fmt.Sprintf("too many goals in flight through the A2A front door (%d): try again when some have ended", s.cfg.MaxGoals))}
		return q.Write(ctx, task)
	}
	// Keyed by the task: a submission whose answer is lost on the bus is
	// sent again without making a second goal.
	req := protocol.GoalRequest{Goal: goal, Timeout: protocol.Duration(s.cfg.GoalTimeout), IdempotencyKey: "a2a/" + string(rc.TaskID)}
	if e.agent != "" {
		req.Team = []string{e.agent}
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	reply, err := s.c.Submit(sctx, req)
	cancel()
	if err != nil {
		task.Status = a2a.TaskStatus{State: a2a.TaskStateRejected, Message: agentText(rc, "ioa refused the goal: "+err.Error())}
		return q.Write(ctx, task)
	}
	task.Metadata = map[string]any{MetaGoalID: reply.GoalID}
	// From the task's first event on, a tasks/cancel finds it running.
	e.mu.Lock()
	e.running[rc.TaskID] = true
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		delete(e.running, rc.TaskID)
		e.mu.Unlock()
	}()
	if err := q.Write(ctx, task); err != nil {
		return err
	}
	s.log.Info("a2a goal submitted", "goal_id", reply.GoalID, "task_id", rc.TaskID, "agent", e.agent)
	return e.follow(ctx, rc, q, reply.GoalID, release)
}

// follow relays the goal's events until it ends.
func (e *executor) follow(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue, goalID string, release func()) error {
	s := e.s
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	unhook := context.AfterFunc(s.ctx, stop)
	defer unhook()
	working := false
	var werr error
	status := func(state a2a.TaskState, text string, final bool) bool {
		if final {
			release()
		}
		ev := a2a.NewStatusUpdateEvent(rc, state, nil)
		if text != "" {
			ev.Status.Message = agentText(rc, text)
		}
		ev.Final = final
		ev.Metadata = map[string]any{MetaGoalID: goalID}
		if err := q.Write(fctx, ev); err != nil {
			werr = err
			return false
		}
		return true
	}
	res, err := s.c.Follow(fctx, goalID, func(ev protocol.GoalEvent) bool {
		switch ev.Kind {
		case protocol.EventTeamFormed:
			working = true
			return status(a2a.TaskStateWorking, "team formed: "+strings.Join(ev.Team, ", "), false)
		case protocol.EventMessage:
			if m := ev.Message; m != nil && m.Sender != "system" && m.Content != "" {
				working = true
				return status(a2a.TaskStateWorking, m.Sender+": "+clip(m.Content, 2000), false)
			}
		case protocol.EventTaskDone:
			if t := ev.Task; t != nil && ev.Message != nil {
				// A task result's status and answer are its task_* fields.
				return status(a2a.TaskStateWorking, fmt.Sprintf("task %s by %s %s: %s", t.TaskID, t.Assignee, ev.Message.TaskStatus, clip(ev.Message.TaskConclusion, 2000)), false)
			}
		}
		if !working && ev.Kind == protocol.EventAccepted {
			return status(a2a.TaskStateWorking, "goal "+goalID+" accepted", false)
		}
		return true
	})
	switch {
	case werr != nil:
		// The task ended already (cancelled through tasks/cancel) or its
		// queue is gone: nothing more to tell.
		s.log.Debug("a2a task not updated", "goal_id", goalID, "err", werr)
		return nil
	case err != nil && s.ctx.Err() != nil:
		// ioa serve is stopping; the goal goes on without this follower.
		status(a2a.TaskStateFailed, "the A2A front door stopped; the goal "+goalID+" goes on in ioa", true)
		return nil
	case err != nil && ctx.Err() != nil:
		return nil
	case err != nil:
		status(a2a.TaskStateFailed, "lost the goal's events: "+err.Error(), true)
		return nil
	case res == nil:
		return nil
	}
	// A goal that concluded having done nothing (outcome failed) is a
	// failed task: "completed" would tell the client its request was met.
	switch {
	case res.Status == protocol.GoalConcluded && res.Outcome != protocol.OutcomeFailed:
		art := a2a.NewArtifactEvent(rc, a2a.TextPart{Text: res.Conclusion})
		art.Artifact.Name = "conclusion"
		art.Artifact.Metadata = map[string]any{MetaGoalID: goalID, "turns": res.Turns, MetaOutcome: res.Outcome}
		if res.Reason != "" {
			art.Artifact.Metadata[MetaReason] = res.Reason
		}
		art.LastChunk = true
		if err := q.Write(fctx, art); err != nil {
			s.log.Debug("a2a task not updated", "goal_id", goalID, "err", err)
			return nil
		}
		status(a2a.TaskStateCompleted, res.Conclusion, true)
	case res.Status == protocol.GoalCancelled:
		status(a2a.TaskStateCanceled, "cancelled: "+res.Reason, true)
	default:
		text := res.Status
		if res.Status == protocol.GoalConcluded {
			text = "nothing done"
		}
		if res.Reason != "" {
			text += ": " + res.Reason
		}
		if res.Conclusion != "" {
			text += "\n" + res.Conclusion
		}
		status(a2a.TaskStateFailed, text, true)
	}
	return nil
}

// Cancel cancels the goal of the task. While Execute follows the goal, it
// sees the goal end as cancelled and ends the task so; a final event from
// here too would race with its updates.
func (e *executor) Cancel(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	e.mu.Lock()
	following := e.running[rc.TaskID]
	e.mu.Unlock()
	var goalID string
	if rc.StoredTask != nil {
		goalID, _ = rc.StoredTask.Metadata[MetaGoalID].(string)
	}
	if goalID != "" {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := e.s.c.Cancel(cctx, goalID)
		cancel()
		if err != nil {
			return fmt.Errorf("cancel goal %s: %w", goalID, err)
		}
	}
	if following {
		return nil
	}
	ev := a2a.NewStatusUpdateEvent(rc, a2a.TaskStateCanceled, agentText(rc, "cancelled by request"))
	ev.Final = true
	return q.Write(ctx, ev)
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + " [...]"
	}
	return s
}

var tokenRE = regexp.MustCompile(`^[A-Za-z0-9._~+/=-]{16,512}$`)

// ValidToken reports whether a bearer token is long enough and made of
// token68 characters (RFC 7235).
func ValidToken(t string) bool { return tokenRE.MatchString(t) }
