package telemetry_test

import (
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/internal/stacktest"
	"github.com/ioa-nats/ioa/telemetry"
)

// otlpReceiver is a small OTLP/HTTP trace receiver: it decodes the
// protobuf ExportTraceServiceRequest of POST /v1/traces and keeps the spans
// with their resource's service.name.
type otlpReceiver struct {
	URL   string
	mu    sync.Mutex
	spans []receivedSpan
}

type receivedSpan struct {
	service string
	*tracepb.Span
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	rcv := &otlpReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
			http.NotFound(w, r)
			return
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		data, err := io.ReadAll(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(data, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rcv.mu.Lock()
		for _, rs := range req.GetResourceSpans() {
			service := ""
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.GetKey() == "service.name" {
					service = kv.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.GetScopeSpans() {
				for _, sp := range ss.GetSpans() {
					rcv.spans = append(rcv.spans, receivedSpan{service, sp})
				}
			}
		}
		rcv.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	rcv.URL = srv.URL
	return rcv
}

func (r *otlpReceiver) find(match func(receivedSpan) bool) (receivedSpan, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, sp := range r.spans {
		if match(sp) {
			return sp, true
		}
	}
	return receivedSpan{}, false
}

func spanAttr(sp *tracepb.Span, key string) string {
	for _, kv := range sp.GetAttributes() {
		if kv.GetKey() == key {
			return kv.GetValue().GetStringValue()
		}
	}
	return ""
}

// TestTraceAcrossAForeignAgentProcess runs the example Go agent as a
// separate OS process that exports its spans with OTLP/HTTP to a receiver
// in the test, while the orchestrator's spans go to an in-memory exporter.
// The agent's task span must be in the goal's trace, a child of the goal's
// span that the orchestrator started: the traceparent crossed NATS in the
// inbox messages' headers.
func TestTraceAcrossAForeignAgentProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a child process")
	}
	bin := filepath.Join(t.TempDir(), "go-agent")
	build := exec.Command("go", "build", "-o", bin, "github.com/ioa-nats/ioa/examples/go-agent")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	exp := traceInMemory(t)
	rcv := newOTLPReceiver(t)
	s := stacktest.Start(t, stacktest.Options{Coordinator: true})

	agent := exec.Command(bin)
	var logs stacktest.Buffer
	agent.Stdout, agent.Stderr = &logs, &logs
	agent.Env = append(os.Environ(), "NATS_URL="+s.URL, "NATS_CREDS=",
		"OTEL_EXPORTER_OTLP_ENDPOINT="+rcv.URL, "OTEL_BSP_SCHEDULE_DELAY=50", "OTEL_SERVICE_NAME=",
		"OTEL_TRACES_EXPORTER=", "OTEL_SDK_DISABLED=")
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- agent.Wait() }()
	t.Cleanup(func() {
		_ = agent.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = agent.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("go-agent output:\n%s", logs.String())
		}
	})
	s.WaitOnline(t, "reverser")

	res := s.Submit(t, protocol.GoalRequest{Goal: "Spell 'stressed' backwards."})
	if res.Status != protocol.GoalConcluded || !strings.Contains(res.Conclusion, "desserts") {
		t.Fatalf("goal: %s (%s):\n%s", res.Status, res.Reason, res.Conclusion)
	}
	stacktest.WaitFor(t, "the goal's root span", func() bool { return ended(exp, goalSpan(res.GoalID)) })
	var rootTrace, rootSpan []byte
	for _, sp := range exp.GetSpans() {
		if sp.Name == "ioa.goal" && attr(sp, telemetry.AttrGoalID) == res.GoalID {
			tid, sid := sp.SpanContext.TraceID(), sp.SpanContext.SpanID()
			rootTrace, rootSpan = tid[:], sid[:]
		}
	}
	if rootTrace == nil {
		t.Fatalf("no root span for goal %s in this process", res.GoalID)
	}
	var task receivedSpan
	stacktest.WaitFor(t, "the agent process's task span", func() bool {
		var ok bool
		task, ok = rcv.find(func(sp receivedSpan) bool { return sp.GetName() == "execute_tool reverser" })
		return ok
	})
	if !bytes.Equal(task.GetTraceId(), rootTrace) {
		t.Errorf("the agent's task span is in trace %s, want the goal's %s", hex.EncodeToString(task.GetTraceId()), hex.EncodeToString(rootTrace))
	}
	if !bytes.Equal(task.GetParentSpanId(), rootSpan) {
		t.Errorf("the agent's task span has parent %s, want the goal's span %s (the orchestrator's)", hex.EncodeToString(task.GetParentSpanId()), hex.EncodeToString(rootSpan))
	}
	if task.service != "reverser" {
		t.Errorf("service.name %q, want reverser", task.service)
	}
	for key, want := range map[string]string{
		string(telemetry.AttrAgentName): "reverser", string(telemetry.AttrConversation): res.CommID,
		string(telemetry.AttrOperation): telemetry.OpExecuteTool, string(telemetry.AttrGoalID): res.GoalID,
	} {
		if got := spanAttr(task.Span, key); got != want {
			t.Errorf("task span %s = %q, want %q", key, got, want)
		}
	}
}
