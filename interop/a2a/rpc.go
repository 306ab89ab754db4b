package a2a

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
)

// JSON-RPC 2.0 error codes this layer answers with itself.
const (
	rpcInvalidRequest = -32600
	rpcInvalidParams  = -32602
)

// rpcParams maps each A2A method that takes params to a decoder of them,
// the same types the SDK's JSON-RPC binding decodes into.
var rpcParams = map[string]func(json.RawMessage) error{
	"message/send":                        decodeAs[a2a.MessageSendParams],
	"message/stream":                      decodeAs[a2a.MessageSendParams],
	"tasks/get":                           decodeAs[a2a.TaskQueryParams],
	"tasks/cancel":                        decodeAs[a2a.TaskIDParams],
	"tasks/resubscribe":                   decodeAs[a2a.TaskIDParams],
	"tasks/pushNotificationConfig/get":    decodeAs[a2a.GetTaskPushConfigParams],
	"tasks/pushNotificationConfig/set":    decodeAs[a2a.TaskPushConfig],
	"tasks/pushNotificationConfig/list":   decodeAs[a2a.ListTaskPushConfigParams],
	"tasks/pushNotificationConfig/delete": decodeAs[a2a.DeleteTaskPushConfigParams],
}

func decodeAs[T any](raw json.RawMessage) error {
	var v T
	return json.Unmarshal(raw, &v)
}

// checkRPC answers what the SDK's JSON-RPC binding (a2a-go v0.3.3) answers
// with the wrong code: a body over the limit and params that are missing or
// do not decode both get -32700 (parse error) from it, where JSON-RPC 2.0
// says -32600 (invalid request) and -32602 (invalid params). It reads the
// body and reports whether it answered; if not, r.Body holds the body again
// for the SDK, which also answers what is not JSON at all (-32700) and
// unknown methods (-32601) correctly.
func checkRPC(w http.ResponseWriter, r *http.Request) bool {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeRPCError(w, http.StatusRequestEntityTooLarge, nil, rpcInvalidRequest,
				fmt.Sprintf("request body is over the limit of %d bytes", tooLarge.Limit))
		} else {
			writeRPCError(w, http.StatusBadRequest, nil, rpcInvalidRequest, "reading the request body: "+err.Error())
		}
		return true
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(body, &req) != nil {
		return false // not a JSON object: the SDK's parse error is right
	}
	decode, ok := rpcParams[req.Method]
	if !ok {
		return false
	}
	if len(req.Params) == 0 || string(req.Params) == "null" {
		writeRPCError(w, http.StatusOK, req.ID, rpcInvalidParams, fmt.Sprintf("method %s needs params", req.Method))
		return true
	}
	if err := decode(req.Params); err != nil {
		writeRPCError(w, http.StatusOK, req.ID, rpcInvalidParams, fmt.Sprintf("invalid params for %s: %v", req.Method, err))
		return true
	}
	return false
}

// rpcError is a JSON-RPC 2.0 error response; ID is the request's id as
// sent (null when it could not be read).
type rpcError struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func writeRPCError(w http.ResponseWriter, status int, id json.RawMessage, code int, msg string) {
	e := rpcError{JSONRPC: "2.0", ID: id}
	if len(e.ID) == 0 {
		e.ID = json.RawMessage("null")
	}
	e.Error.Code, e.Error.Message = code, msg
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(e)
}

// endedTasks answers tasks/resubscribe to a task whose run has ended with
// the task as stored, one event, where a2a-go v0.3.3 answers "task not
// found" once a task's execution is gone: a client whose stream broke while
// the task ended learns how it ended. Everything else is the SDK's.
type endedTasks struct{ a2asrv.RequestHandler }

func (h endedTasks) OnResubscribeToTask(ctx context.Context, id *a2a.TaskIDParams) iter.Seq2[a2a.Event, error] {
	events := h.RequestHandler.OnResubscribeToTask(ctx, id)
	return func(yield func(a2a.Event, error) bool) {
		first := true
		for ev, err := range events {
			if first && id != nil && errors.Is(err, a2a.ErrTaskNotFound) {
				if task, gerr := h.OnGetTask(ctx, &a2a.TaskQueryParams{ID: id.ID}); gerr == nil && task.Status.State.Terminal() {
					yield(task, nil)
					return
				}
			}
			first = false
			if !yield(ev, err) {
				return
			}
		}
	}
}
