package main

// The wire protocol, as far as the load generator needs it: its own small
// JSON structs (docs/protocol.md names every field) and a request helper that
// reads the protocol's error replies. Nothing here comes from the ioa module.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
)

// agentCard is what an agent registers (section 5).
type agentCard struct {
	Name         string   `json:"name"`
	Description  string   `json:"description"`
	Capabilities []string `json:"capabilities,omitempty"`
	Type         string   `json:"type,omitempty"`
	Tags         []string `json:"tags,omitempty"`
	AutoJoin     bool     `json:"auto_join,omitempty"`
	Incarnation  string   `json:"incarnation,omitempty"`
}

type nameRequest struct {
	Name string `json:"name"`
}

type heartbeatReply struct {
	TTL string `json:"ttl"`
}

// launchRequest comes to <p>.agent.<launcher>.launch (section 7).
type launchRequest struct {
	GoalID   string   `json:"goal_id"`
	Goal     string   `json:"goal"`
	Team     []string `json:"team,omitempty"`
	MaxTurns int      `json:"max_turns"`
	Depth    int      `json:"depth"`
}

type teamupRequest struct {
	GoalID   string   `json:"goal_id"`
	Launcher string   `json:"launcher"`
	Members  []string `json:"members"`
}

// commReply answers teamup and launch.
type commReply struct {
	CommID string `json:"comm_id"`
}

type inviteReply struct {
	Accept bool   `json:"accept"`
	Reason string `json:"reason,omitempty"`
}

type task struct {
	TaskID       string `json:"task_id,omitempty"`
	Assignee     string `json:"assignee"`
	TaskAbstract string `json:"task_abstract,omitempty"`
	TaskDesc     string `json:"task_desc,omitempty"`
}

type member struct {
	Name string `json:"name"`
}

// message is an AgentMessage (section 8). The fields the referee stamps are
// read from what arrives; what the load generator sends leaves them empty.
type message struct {
	V              int      `json:"v,omitempty"`
	ID             string   `json:"id"`
	CommID         string   `json:"comm_id,omitempty"`
	GoalID         string   `json:"goal_id,omitempty"`
	Sender         string   `json:"sender,omitempty"`
	Seq            uint64   `json:"seq,omitempty"`
	State          string   `json:"state,omitempty"`
	Type           string   `json:"type"`
	Content        string   `json:"content,omitempty"`
	NextSpeaker    []string `json:"next_speaker,omitempty"`
	Tasks          []task   `json:"tasks,omitempty"`
	TaskID         string   `json:"task_id,omitempty"`
	TaskStatus     string   `json:"task_status,omitempty"`
	TaskConclusion string   `json:"task_conclusion,omitempty"`
	Event          string   `json:"event,omitempty"`
	Team           []member `json:"team,omitempty"`
	Launcher       string   `json:"launcher,omitempty"`
	Attempt        int      `json:"attempt,omitempty"`
	Turn           int      `json:"turn,omitempty"`
}

// Message types and states used here (section 9).
const (
	typeSystem     = "system"
	typeSyncAssign = "sync_task_assign"
	typeTaskResult = "task_result"
	typeConclusion = "conclusion"

	stateDiscussion = "discussion"
	stateConclusion = "conclusion"
)

type sendReply struct {
	Seq   uint64 `json:"seq"`
	State string `json:"state"`
}

type historyRequest struct {
	AfterSeq uint64 `json:"after_seq"`
	Limit    int    `json:"limit"`
}

type historyReply struct {
	Messages []message `json:"messages"`
	LastSeq  uint64    `json:"last_seq"`
}

// goalRequest goes to <p>.goal.submit (section 6).
type goalRequest struct {
	Goal     string   `json:"goal"`
	Team     []string `json:"team,omitempty"`
	Launcher string   `json:"launcher,omitempty"`
	Wait     bool     `json:"wait,omitempty"`
	Timeout  string   `json:"timeout,omitempty"`
}

type goalResult struct {
	GoalID     string `json:"goal_id"`
	Status     string `json:"status"`
	Conclusion string `json:"conclusion"`
	Reason     string `json:"reason,omitempty"`
	CommID     string `json:"comm_id"`
	Turns      int    `json:"turns"`
	Elapsed    string `json:"elapsed"`
	Outcome    string `json:"outcome,omitempty"`
}

type health struct {
	Status  string   `json:"status"`
	Ready   bool     `json:"ready"`
	Waiting []string `json:"waiting,omitempty"`
}

// The headers of an error reply (section 2).
const (
	headerError     = "Nats-Service-Error"
	headerErrorCode = "Nats-Service-Error-Code"
)

// wireError is an error reply, or NATS's own "no responders" (status 503,
// code no_responders).
type wireError struct {
	Subject string
	Status  int
	Code    string
	Message string
}

func (e *wireError) Error() string {
	return fmt.Sprintf("%s: %d %s: %s", e.Subject, e.Status, e.Code, e.Message)
}

// errorBody is the JSON body of an error reply.
type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// request sends one request and decodes its reply into out (if not nil).
func request(ctx context.Context, nc *nats.Conn, subject string, in, out any) error {
	data, err := json.Marshal(in)
	if err != nil {
		return err
	}
	m, err := nc.RequestWithContext(ctx, subject, data)
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) {
			return &wireError{Subject: subject, Status: 503, Code: "no_responders", Message: "no service answers (is ioa serve running and ready?)"}
		}
		return fmt.Errorf("%s: %w", subject, err)
	}
	return decodeReply(subject, m, out)
}

// status is the protocol status of err, or 0.
func status(err error) int {
	var we *wireError
	if errors.As(err, &we) {
		return we.Status
	}
	return 0
}

// perRequest bounds each attempt.
const perRequest = 5 * time.Second

// requestRetry is request, sent again with a short, growing, jittered
// backoff until ctx ends while the failure is one to retry: 503 (the
// protocol's "send again"), 429, or no reply in time. Only for requests
// that are idempotent (an outbox message with a fixed id, teamup, register,
// heartbeat, history).
func requestRetry(ctx context.Context, nc *nats.Conn, subject string, in, out any) error {
	backoff := 5 * time.Millisecond
	for {
		actx, cancel := context.WithTimeout(ctx, perRequest)
		err := request(actx, nc, subject, in, out)
		cancel()
		if err == nil {
			return nil
		}
		again := false
		switch st := status(err); {
		case st == 503 || st == 429:
			again = true
		case st == 0 && ctx.Err() == nil &&
			(errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)):
			again = true
		}
		if !again {
			return err
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (gave up: %v)", err, context.Cause(ctx))
		case <-time.After(wait):
		}
		backoff = min(2*backoff, 250*time.Millisecond)
	}
}

// respondError answers a request we serve (a launch) with a protocol error.
func respondError(nc *nats.Conn, reply string, st int, code, msg string) {
	if reply == "" {
		return
	}
	m := nats.NewMsg(reply)
	m.Header.Set(headerError, msg)
	m.Header.Set(headerErrorCode, strconv.Itoa(st))
	var body errorBody
	body.Error.Code, body.Error.Message = code, msg
	m.Data, _ = json.Marshal(body)
	_ = nc.PublishMsg(m)
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// decodeReply decodes a reply, or returns the error it carries.
func decodeReply(subject string, m *nats.Msg, out any) error {
	if msg := m.Header.Get(headerError); msg != "" {
		we := &wireError{Subject: subject, Message: msg}
		we.Status, _ = strconv.Atoi(m.Header.Get(headerErrorCode))
		var body errorBody
		if json.Unmarshal(m.Data, &body) == nil && body.Error.Code != "" {
			we.Code, we.Message = body.Error.Code, body.Error.Message
		} else {
			we.Code = "error_" + strconv.Itoa(we.Status)
		}
		return we
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(m.Data, out); err != nil {
		return fmt.Errorf("reply from %s: %w", subject, err)
	}
	return nil
}
