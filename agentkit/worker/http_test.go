package worker_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/worker"
)

func TestHTTPWorker(t *testing.T) {
	// The handler runs on the server's goroutines; the race detector does not see
	// the socket as synchronisation, so the request it saw is guarded by a mutex.
	var (
		mu  sync.Mutex
		got agentkit.Task
	)
	seen := func() agentkit.Task { mu.Lock(); defer mu.Unlock(); return got }
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" || r.Header.Get("X-Token") != "tok" {
			http.Error(w, "bad request", 400)
			return
		}
		var req agentkit.Task
		_ = json.NewDecoder(r.Body).Decode(&req)
		mu.Lock()
		got = req
		mu.Unlock()
		switch r.URL.Path {
		case "/text":
			_, _ = io.WriteString(w, "  plain answer \n")
		case "/json":
			_, _ = io.WriteString(w, `{"conclusion": "from json"}`)
		case "/error":
			_, _ = io.WriteString(w, `{"error": "cannot"}`)
		case "/503":
			http.Error(w, "overloaded, try later", http.StatusServiceUnavailable)
		case "/slow":
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		case "/big":
			_, _ = io.WriteString(w, strings.Repeat("x", 10000))
		}
	}))
	defer srv.Close()
	run := func(path string) (agentkit.Result, error) {
		h := &worker.HTTP{URL: srv.URL + path, Header: http.Header{"X-Token": {"tok"}}, Timeout: 300 * time.Millisecond, MaxResponse: 4096}
		return h.Run(t.Context(), task())
	}
	if res, err := run("/text"); err != nil || res.Conclusion != "plain answer" || seen().TaskID != "t1" || seen().Goal != "sleep well" {
		t.Errorf("text: %+v %v (server got %+v)", res, err, seen())
	}
	if res, err := run("/json"); err != nil || res.Conclusion != "from json" {
		t.Errorf("json: %+v %v", res, err)
	}
	for _, tc := range []struct {
		path, want string
		is         error
	}{
		{"/error", "cannot", nil},
		{"/503", "503: overloaded", worker.ErrStatus},
		{"/slow", "timed out", worker.ErrTimeout},
		{"/big", "4096 bytes", worker.ErrOutputLimit},
	} {
		_, err := run(tc.path)
		if err == nil || !strings.Contains(err.Error(), tc.want) || (tc.is != nil && !errors.Is(err, tc.is)) {
			t.Errorf("%s: %v, want %q", tc.path, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "tok") {
			t.Errorf("%s: the header value leaked into the error: %v", tc.path, err)
		}
	}
}
