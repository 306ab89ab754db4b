package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/ioa-nats/ioa/agentkit"
)

// Defaults of HTTP.
const (
	DefaultHTTPTimeout     = 2 * time.Minute
	DefaultHTTPMaxResponse = 1 << 20
)

// ErrStatus is wrapped by an HTTP run that got a status outside 2xx.
var ErrStatus = errors.New("unexpected status")

// HTTP posts each task (agentkit.Task as JSON) to a URL and reads the
// result from the response body: plain text, or a JSON object
// {"conclusion": "..."} (or {"error": "..."} to fail the task).
type HTTP struct {
	// URL receives the POST.
	URL string
	// Header is added to each request (e.g. Authorization); it is never
	// logged or put in an error.
	Header http.Header
	// Timeout bounds a run (default 2m).
	Timeout time.Duration
	// MaxResponse bounds the response body in bytes (default 1 MiB).
	MaxResponse int64
	// Client sends the requests; nil means a plain http.Client.
	Client *http.Client
}

var _ agentkit.Worker = (*HTTP)(nil)

// Run posts t once.
func (h *HTTP) Run(ctx context.Context, t agentkit.Task) (agentkit.Result, error) {
	if h.URL == "" {
		return agentkit.Result{}, errors.New("http worker: no URL")
	}
	timeout := h.Timeout
	if timeout <= 0 {
		timeout = DefaultHTTPTimeout
	}
	limit := h.MaxResponse
	if limit <= 0 {
		limit = DefaultHTTPMaxResponse
	}
	client := h.Client
	if client == nil {
		client = http.DefaultClient
	}
	body, err := json.Marshal(t)
	if err != nil {
		return agentkit.Result{}, fmt.Errorf("http worker: encode task: %w", err)
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, h.URL, bytes.NewReader(body))
	if err != nil {
		return agentkit.Result{}, fmt.Errorf("http worker: %w", err)
	}
	for k, vs := range h.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/plain")
	where := req.URL.Redacted()
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() == nil && errors.Is(rctx.Err(), context.DeadlineExceeded) {
			return agentkit.Result{}, fmt.Errorf("http worker: POST %s: %w after %v", where, ErrTimeout, timeout)
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its message repeats the URL unredacted
		}
		return agentkit.Result{}, fmt.Errorf("http worker: POST %s: %w", where, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	switch {
	case err != nil && ctx.Err() == nil && errors.Is(rctx.Err(), context.DeadlineExceeded):
		return agentkit.Result{}, fmt.Errorf("http worker: POST %s: %w after %v", where, ErrTimeout, timeout)
	case err != nil:
		return agentkit.Result{}, fmt.Errorf("http worker: POST %s: read: %w", where, err)
	case int64(len(out)) > limit:
		return agentkit.Result{}, fmt.Errorf("http worker: POST %s: %w: body passed %d bytes", where, ErrOutputLimit, limit)
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return agentkit.Result{}, fmt.Errorf("http worker: POST %s: %w %d: %s", where, ErrStatus, resp.StatusCode, snippet(out))
	}
	return parseHTTPBody(where, out)
}

func parseHTTPBody(where string, out []byte) (agentkit.Result, error) {
	trimmed := strings.TrimSpace(string(out))
	if strings.HasPrefix(trimmed, "{") {
		var v struct {
			Conclusion *string `json:"conclusion"`
			Error      string  `json:"error"`
		}
		if json.Unmarshal([]byte(trimmed), &v) == nil && (v.Conclusion != nil || v.Error != "") {
			if v.Error != "" {
				return agentkit.Result{}, fmt.Errorf("http worker: POST %s: the service failed the task: %s", where, v.Error)
			}
			return agentkit.Result{Conclusion: *v.Conclusion}, nil
		}
	}
	return agentkit.Result{Conclusion: trimmed}, nil
}

// snippet is the start of a body for an error message, on one line.
func snippet(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	if s == "" {
		return "(empty body)"
	}
	return s
}
