package bus_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/bus/bustest"
)

type echoReq struct {
	Text string `json:"text"`
}

// With Concurrently, requests are handled at the same time: each handler
// here waits until two are in flight, which never happens one at a time.
// A panic in a worker is a 500 reply, and the endpoint goes on.
func TestHandleConcurrently(t *testing.T) {
	b := bustest.New(t)
	nc := b.Conn()
	ctx := t.Context()
	var mu sync.Mutex
	inFlight, both := 0, make(chan struct{})
	h := bus.Handle(ctx, b.Codec(), func(ctx context.Context, _ micro.Request, req *echoReq) (*echoReq, error) {
		if req.Text == "panic" {
			panic("boom")
		}
		mu.Lock()
		inFlight++
		if inFlight == 2 {
			close(both)
		}
		mu.Unlock()
		select {
		case <-both:
			return &echoReq{Text: "re: " + req.Text}, nil
		case <-time.After(3 * time.Second):
			return nil, protocol.Errorf(protocol.ErrTimeout, "handled alone")
		}
	}, bus.Concurrently(nc, 2))
	svc, err := micro.AddService(nc, micro.Config{Name: "concurrent", Version: "1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	if err := svc.AddEndpoint("echo", h, micro.WithEndpointSubject("test.echo")); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	replies, errs := make([]echoReq, 2), make([]error, 2)
	for i, text := range []string{"a", "b"} {
		wg.Go(func() { errs[i] = bus.Request(ctx, nc, "test.echo", echoReq{Text: text}, &replies[i]) })
	}
	wg.Wait()
	for i, text := range []string{"a", "b"} {
		if errs[i] != nil || replies[i].Text != "re: "+text {
			t.Errorf("request %q: %+v, %v; want both answered together", text, replies[i], errs[i])
		}
	}
	if err := bus.Request(ctx, nc, "test.echo", echoReq{Text: "panic"}, nil); !errors.Is(err, protocol.ErrInternal) {
		t.Errorf("a panicking handler: %v, want an internal error", err)
	}
	if err := bus.Request(ctx, nc, "test.echo", []byte(`{"text":`), nil); !errors.Is(err, protocol.ErrInvalid) {
		t.Errorf("malformed JSON: %v, want invalid", err)
	}
}

// RequestAgain sends a request whose answer does not come again, and
// stops when its context ends; an error reply is not sent again.
func TestRequestAgainResendsALostRequest(t *testing.T) {
	b := bustest.New(t)
	nc := b.Conn()
	ctx := t.Context()
	var mu sync.Mutex
	seen := 0
	if _, err := nc.Subscribe("test.lossy", func(m *nats.Msg) {
		mu.Lock()
		seen++
		n := seen
		mu.Unlock()
		if n == 1 {
			return // the first copy is lost
		}
		_ = m.Respond(bus.Encode(echoReq{Text: "answered copy " + strconv.Itoa(n)}))
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Subscribe("test.refuse", func(m *nats.Msg) {
		mu.Lock()
		seen++
		mu.Unlock()
		_ = m.RespondMsg(bus.ErrorMsg(m.Reply, protocol.Errorf(protocol.ErrInvalid, "no")))
	}); err != nil {
		t.Fatal(err)
	}
	var out echoReq
	if err := bus.RequestAgain(ctx, nc, "test.lossy", 100*time.Millisecond, echoReq{Text: "x"}, &out); err != nil || out.Text != "answered copy 2" {
		t.Fatalf("lost first copy: %+v, %v; want the second copy answered", out, err)
	}
	mu.Lock()
	seen = 0
	mu.Unlock()
	if err := bus.RequestAgain(ctx, nc, "test.refuse", 100*time.Millisecond, echoReq{}, nil); !errors.Is(err, protocol.ErrInvalid) {
		t.Fatalf("refused: err = %v, want the 400", err)
	}
	mu.Lock()
	if seen != 1 {
		t.Errorf("a refused request was sent %d times, want once", seen)
	}
	mu.Unlock()
	if _, err := nc.Subscribe("test.silent", func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(ctx, 350*time.Millisecond)
	defer cancel()
	if err := bus.RequestAgain(sctx, nc, "test.silent", 100*time.Millisecond, echoReq{}, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("never answered: err = %v, want the deadline", err)
	}
}

// TestRequestTooLargeSaysTheLimit: a request over the server's message
// limit fails before it is sent, naming its size and the limit.
func TestRequestTooLargeSaysTheLimit(t *testing.T) {
	b := bustest.New(t)
	limit := b.Conn().MaxPayload()
	err := bus.Request(t.Context(), b.Conn(), "ioa.test.big", make([]byte, limit+1), nil)
	want := fmt.Sprintf("the request is %d bytes, the server takes at most %d in a message", limit+1, limit)
	if !errors.Is(err, nats.ErrMaxPayload) || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want nats.ErrMaxPayload saying %q", err, want)
	}
}
