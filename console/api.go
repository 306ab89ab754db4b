package console

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
)

// request asks a service on NATS within the request timeout.
func (s *Server) request(r *http.Request, subject string, in, out any) error {
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	return bus.Request(ctx, s.cfg.NC, subject, in, out)
}

// intParam reads a query parameter in [lo, hi]; def when missing.
func intParam(r *http.Request, name string, def, lo, hi int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%s=%q is not a whole number from %d to %d", name, v, lo, hi)
	}
	return n, nil
}

func (s *Server) serveAgents(w http.ResponseWriter, r *http.Request) {
	offset, err := intParam(r, "offset", 0, 0, 1_000_000)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid", err.Error())
		return
	}
	limit, err := intParam(r, "limit", 100, 1, 1000)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid", err.Error())
		return
	}
	var out protocol.ListReply
	req := protocol.ListRequest{Offset: offset, Limit: limit, OnlineOnly: r.URL.Query().Get("online") == "1"}
	if err := s.request(r, s.cfg.Subjects.Registry(bus.RegistryList), req, &out); err != nil {
		writeServiceError(w, err)
		return
	}
	if out.Agents == nil {
		out.Agents = []protocol.AgentInfo{}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) serveSearch(w http.ResponseWriter, r *http.Request) {
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	if q == "" {
		writeError(w, http.StatusBadRequest, "invalid", "q (what the agent should do) is required")
		return
	}
	limit, err := intParam(r, "limit", 10, 1, 100)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid", err.Error())
		return
	}
	var out struct {
		Results []protocol.SearchResult `json:"results"`
	}
	req := protocol.SearchRequest{Query: q, Limit: limit, IncludeOffline: r.URL.Query().Get("offline") == "1"}
	if err := s.request(r, s.cfg.Subjects.Registry(bus.RegistrySearch), req, &out); err != nil {
		writeServiceError(w, err)
		return
	}
	if out.Results == nil {
		out.Results = []protocol.SearchResult{}
	}
	writeJSON(w, http.StatusOK, out)
}

// serveGoals is one page of goal.list (newest first). goal.list has no
// offset, so the page is cut from the first offset+limit goals, at most
// the service's 1000.
func (s *Server) serveGoals(w http.ResponseWriter, r *http.Request) {
	status := r.URL.Query().Get("status")
	switch status {
	case "", "all", "running", "ended":
	default:
		writeError(w, http.StatusBadRequest, "invalid", fmt.Sprintf("status %q is not running, ended or all", status))
		return
	}
	limit, err := intParam(r, "limit", 20, 1, 200)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid", err.Error())
		return
	}
	offset, err := intParam(r, "offset", 0, 0, 1000-limit)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid", err.Error())
		return
	}
	var out protocol.GoalListReply
	// One more than the page tells whether there is a next page.
	want := offset + limit + 1
	if err := s.request(r, s.cfg.Subjects.Goal(bus.GoalList), protocol.GoalListRequest{Status: status, Limit: min(want, 1000)}, &out); err != nil {
		writeServiceError(w, err)
		return
	}
	goals := out.Goals
	more := len(goals) > offset+limit
	goals = goals[min(offset, len(goals)):min(offset+limit, len(goals))]
	if goals == nil {
		goals = []protocol.GoalStatus{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"goals": goals, "offset": offset, "limit": limit, "more": more})
}

// SubmitRequest is the body of POST /api/goals.
type SubmitRequest struct {
	Goal    string   `json:"goal"`
	Team    []string `json:"team,omitempty"`
	Timeout string   `json:"timeout,omitempty"` // a Go duration, "2m"
	// ApproveBy names a person whose approval the conclusion needs.
	ApproveBy string `json:"approve_by,omitempty"`
}

func (s *Server) serveSubmit(w http.ResponseWriter, r *http.Request) {
	var in SubmitRequest
	if !decodeBody(w, r, &in) {
		return
	}
	req := protocol.GoalRequest{Goal: strings.TrimSpace(in.Goal), Team: in.Team, ApproveBy: in.ApproveBy}
	if req.Goal == "" {
		writeError(w, http.StatusBadRequest, "invalid", "goal is required")
		return
	}
	if in.ApproveBy != "" {
		if err := protocol.CheckName("approve_by", in.ApproveBy); err != nil {
			writeServiceError(w, err)
			return
		}
	}
	for _, n := range in.Team {
		if err := protocol.CheckName("team member", n); err != nil {
			writeServiceError(w, err)
			return
		}
	}
	if in.Timeout != "" {
		d, err := time.ParseDuration(in.Timeout)
		if err != nil || d <= 0 {
			writeError(w, http.StatusBadRequest, "invalid", fmt.Sprintf("timeout %q is not a positive duration such as 2m", in.Timeout))
			return
		}
		req.Timeout = protocol.Duration(d)
	}
	// The service refuses a team member nobody registered (404) or one
	// offline (409) before it records the goal.
	var reply protocol.SubmitReply
	if err := s.request(r, s.cfg.Subjects.Goal(bus.GoalSubmit), req, &reply); err != nil {
		writeServiceError(w, err)
		return
	}
	out := struct {
		GoalID string `json:"goal_id"`
		Status string `json:"status"`
		// Timeout and Note say that the server gave the goal less time than
		// asked: it clamps a timeout to its limits.goal_timeout, and its
		// reply says the timeout in force (an older server's says none).
		Timeout string `json:"timeout,omitempty"`
		Note    string `json:"note,omitempty"`
	}{GoalID: reply.GoalID, Status: reply.Status}
	if got, lowered := reply.Lowered(req.Timeout.D()); lowered {
		out.Timeout = got.String()
		out.Note = fmt.Sprintf("the goal has %s, the server's limit (limits.goal_timeout), not the %s asked", got, req.Timeout.D())
	}
	writeJSON(w, http.StatusAccepted, out)
}

func (s *Server) getGoal(r *http.Request, id string) (protocol.GoalStatus, error) {
	var g protocol.GoalStatus
	if err := protocol.CheckID("goal_id", id); err != nil {
		return g, err
	}
	err := s.request(r, s.cfg.Subjects.Goal(bus.GoalGet), protocol.GoalIDRequest{GoalID: id}, &g)
	return g, err
}

func (s *Server) serveGoal(w http.ResponseWriter, r *http.Request) {
	g, err := s.getGoal(r, r.PathValue("id"))
	if err != nil {
		writeServiceError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, g)
}

func (s *Server) serveCancel(w http.ResponseWriter, r *http.Request) {
	var in struct{}
	if r.ContentLength != 0 && !decodeBody(w, r, &in) {
		return
	}
	id := r.PathValue("id")
	if err := protocol.CheckID("goal_id", id); err != nil {
		writeServiceError(w, err)
		return
	}
	var g protocol.GoalStatus
	if err := s.request(r, s.cfg.Subjects.Goal(bus.GoalCancel), protocol.GoalIDRequest{GoalID: id}, &g); err != nil {
		writeServiceError(w, err)
		return
	}
	if protocol.GoalEnded(g.Status) && g.Status != protocol.GoalCancelled {
		// Nothing was cancelled: say so, as approving an ended goal does.
		writeError(w, http.StatusConflict, "conflict", fmt.Sprintf("goal %s had already ended (%s): nothing to cancel", id, g.Status))
		return
	}
	writeJSON(w, http.StatusOK, g)
}

// Person is a registered person (an agent of type human) and what waits
// on it in running goals.
type Person struct {
	protocol.AgentInfo
	Waiting []Waiting `json:"waiting"`
}

// Waiting is one goal whose chat waits on a person.
type Waiting struct {
	GoalID string   `json:"goal_id"`
	Goal   string   `json:"goal"`
	Turn   bool     `json:"turn"`            // the person holds the turn
	Tasks  []string `json:"tasks,omitempty"` // running tasks assigned to the person
	// Approval: the team concluded and the goal waits for the person to
	// approve or reject the proposed result.
	Approval bool `json:"approval,omitempty"`
}

// servePeople lists the people and, for each, the running goals that wait
// on them: the chats are folded from their logs, so nothing is lost when
// the console or ioa serve restarts.
func (s *Server) servePeople(w http.ResponseWriter, r *http.Request) {
	var reg protocol.ListReply
	if err := s.request(r, s.cfg.Subjects.Registry(bus.RegistryList), protocol.ListRequest{Limit: 1000}, &reg); err != nil {
		writeServiceError(w, err)
		return
	}
	people := []Person{}
	index := map[string]int{}
	for _, a := range reg.Agents {
		if a.Type == protocol.TypeHuman {
			index[a.Name] = len(people)
			people = append(people, Person{AgentInfo: a, Waiting: []Waiting{}})
		}
	}
	if len(people) > 0 {
		var running protocol.GoalListReply
		if err := s.request(r, s.cfg.Subjects.Goal(bus.GoalList), protocol.GoalListRequest{Status: "running", Limit: 200}, &running); err != nil {
			writeServiceError(w, err)
			return
		}
		for _, g := range running.Goals {
			if i, ok := index[g.ApproveBy]; ok && g.Status == protocol.GoalAwaitingApproval {
				people[i].Waiting = append(people[i].Waiting, Waiting{GoalID: g.GoalID, Goal: g.Goal, Approval: true})
				continue
			}
			if g.CommID == "" || !slices.ContainsFunc(g.Team, func(n string) bool { _, ok := index[n]; return ok }) {
				continue
			}
			ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
			v, err := s.loadChat(ctx, g.CommID)
			cancel()
			if err != nil {
				continue // ended meanwhile, or its log is gone
			}
			st := v.state(g.GoalID, time.Time{})
			waits := map[string]*Waiting{}
			at := func(n string) *Waiting {
				if waits[n] == nil {
					waits[n] = &Waiting{GoalID: g.GoalID, Goal: g.Goal}
				}
				return waits[n]
			}
			if st.YourTurn != "" {
				at(st.YourTurn).Turn = true
			}
			for _, t := range st.Tasks {
				if slices.Contains(st.InputRequired, t.TaskID) {
					at(t.Assignee).Tasks = append(at(t.Assignee).Tasks, t.TaskID)
				}
			}
			for n, wt := range waits {
				if i, ok := index[n]; ok {
					people[i].Waiting = append(people[i].Waiting, *wt)
				}
			}
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"people": people})
}

// SayRequest is the body of POST /api/goals/{id}/say: a person's turn move.
type SayRequest struct {
	As          string `json:"as"`           // the person speaking; may be left out when one person holds the turn
	Type        string `json:"type"`         // discussion (default) or conclusion
	Content     string `json:"content"`      // what the person says
	NextSpeaker string `json:"next_speaker"` // discussion: who speaks next (default: the launcher)
	// SeenSeq is, for a conclusion, the last chat entry the person saw (the
	// page sends the last it shows): one that missed a task's result is
	// refused with 409 conflict, so the person concludes again with it.
	SeenSeq uint64 `json:"seen_seq,omitempty"`
}

// TaskResultRequest is the body of POST /api/goals/{id}/tasks/{task}/result.
type TaskResultRequest struct {
	Status     string `json:"status"` // completed (default) or failed
	Conclusion string `json:"conclusion"`
}

// personChat loads the goal's chat for a person's answer.
func (s *Server) personChat(w http.ResponseWriter, r *http.Request) (protocol.GoalStatus, *chatView, bool) {
	g, err := s.getGoal(r, r.PathValue("id"))
	if err != nil {
		writeServiceError(w, err)
		return g, nil, false
	}
	if g.CommID == "" {
		writeError(w, http.StatusConflict, "illegal_transition", fmt.Sprintf("goal %s has no chat yet (status %s)", g.GoalID, g.Status))
		return g, nil, false
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	v, err := s.loadChat(ctx, g.CommID)
	if err != nil {
		writeServiceError(w, err)
		return g, nil, false
	}
	if v.chat.Ended() {
		writeError(w, http.StatusConflict, "illegal_transition", fmt.Sprintf("goal %s's chat has ended", g.GoalID))
		return g, nil, false
	}
	return g, v, true
}

func (s *Server) serveSay(w http.ResponseWriter, r *http.Request) {
	var in SayRequest
	if !decodeBody(w, r, &in) {
		return
	}
	in.Content = strings.TrimSpace(in.Content)
	if in.Content == "" {
		writeError(w, http.StatusBadRequest, "invalid", "content (what the person says) is required")
		return
	}
	switch in.Type {
	case "":
		in.Type = protocol.MsgDiscussion
	case protocol.MsgDiscussion, protocol.MsgConclusion:
	default:
		writeError(w, http.StatusBadRequest, "invalid", fmt.Sprintf("type %q is not discussion or conclusion", in.Type))
		return
	}
	g, v, ok := s.personChat(w, r)
	if !ok {
		return
	}
	c := &v.chat
	if in.As == "" {
		in.As = c.Speaker
	}
	if !v.person(in.As) {
		writeError(w, http.StatusForbidden, "forbidden", fmt.Sprintf("%q is not a person in goal %s's chat; the console speaks only for members of type human", in.As, g.GoalID))
		return
	}
	m := protocol.AgentMessage{Type: in.Type, Content: in.Content}
	if in.Type == protocol.MsgConclusion {
		m.SeenSeq = in.SeenSeq
	}
	if in.Type == protocol.MsgDiscussion {
		next := in.NextSpeaker
		if next == "" {
			next = c.Launcher
		}
		m.NextSpeaker = []string{next}
	}
	// The same move after the same log position has the same id, so a
	// double click is logged once.
	s.send(w, r, g, v, in.As, agentkit.MessageID(in.As, c.CommID, "s"+strconv.FormatUint(c.LastSeq, 10), "web"), m)
}

func (s *Server) serveTaskResult(w http.ResponseWriter, r *http.Request) {
	var in TaskResultRequest
	if !decodeBody(w, r, &in) {
		return
	}
	in.Conclusion = strings.TrimSpace(in.Conclusion)
	if in.Conclusion == "" {
		writeError(w, http.StatusBadRequest, "invalid", "conclusion (the task's answer) is required")
		return
	}
	switch in.Status {
	case "":
		in.Status = protocol.TaskCompleted
	case protocol.TaskCompleted, protocol.TaskFailed:
	default:
		writeError(w, http.StatusBadRequest, "invalid", fmt.Sprintf("status %q is not completed or failed", in.Status))
		return
	}
	taskID := r.PathValue("task")
	if err := protocol.CheckID("task_id", taskID); err != nil {
		writeServiceError(w, err)
		return
	}
	g, v, ok := s.personChat(w, r)
	if !ok {
		return
	}
	t, found := v.chat.Task(taskID)
	if !found {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("goal %s has no task %s", g.GoalID, taskID))
		return
	}
	if !v.person(t.Assignee) {
		writeError(w, http.StatusForbidden, "forbidden", fmt.Sprintf("task %s is %s's, not a person's; the console answers only for members of type human", taskID, t.Assignee))
		return
	}
	m := protocol.AgentMessage{
		Type: protocol.MsgTaskResult, TaskID: taskID, TaskStatus: in.Status, TaskConclusion: in.Conclusion,
		Content: t.Assignee + ": " + firstLine(in.Conclusion),
	}
	// agentkit's id for a task's result: a repeat is logged once.
	s.send(w, r, g, v, t.Assignee, agentkit.MessageID(t.Assignee, v.chat.CommID, taskID, strconv.Itoa(t.Attempt), "r"), m)
}

// send checks the move against the folded chat (the referee would refuse
// it with the same error) and sends it on the person's outbox.
func (s *Server) send(w http.ResponseWriter, r *http.Request, g protocol.GoalStatus, v *chatView, as, id string, m protocol.AgentMessage) {
	c := &v.chat
	m.V, m.ID, m.CommID, m.GoalID, m.Sender, m.Seq = protocol.Version, id, c.CommID, g.GoalID, as, c.LastSeq+1
	if _, err := protocol.Apply(*c, m); err != nil {
		writeServiceError(w, err)
		return
	}
	m.Seq = 0 // the referee stamps it
	subj, err := s.cfg.Subjects.Outbox(as, c.CommID)
	if err != nil {
		writeServiceError(w, protocol.Errorf(protocol.ErrInvalid, "%v", err))
		return
	}
	var out protocol.SendReply
	if err := s.request(r, subj, m, &out); err != nil {
		writeServiceError(w, err)
		return
	}
	s.log.Info("a person answered", "as", as, "goal_id", g.GoalID, "type", m.Type, "task_id", m.TaskID, "seq", out.Seq)
	writeJSON(w, http.StatusOK, out)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// ApproveRequest is the body of POST /api/goals/{id}/approve: the person
// the goal waits on approves or rejects the result its team proposed.
type ApproveRequest struct {
	Approve bool   `json:"approve"`
	Note    string `json:"note,omitempty"`
}

// serveApprove answers for the person named in the goal's approve_by (the
// console holds the login that may act for its people, as for their turns).
func (s *Server) serveApprove(w http.ResponseWriter, r *http.Request) {
	var in ApproveRequest
	if !decodeBody(w, r, &in) {
		return
	}
	g, err := s.getGoal(r, r.PathValue("id"))
	if err != nil {
		writeServiceError(w, err)
		return
	}
	if g.Status != protocol.GoalAwaitingApproval {
		writeError(w, http.StatusConflict, "conflict", fmt.Sprintf("goal %s is %s, not awaiting approval", g.GoalID, g.Status))
		return
	}
	req := protocol.ApproveRequest{GoalID: g.GoalID, Approve: in.Approve, Note: strings.TrimSpace(in.Note), By: g.ApproveBy}
	var out protocol.GoalStatus
	if err := s.request(r, s.cfg.Subjects.Goal(bus.GoalApprove), req, &out); err != nil {
		writeServiceError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}
