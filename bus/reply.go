package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	json "github.com/segmentio/encoding/json"
)

// Headers of the NATS micro error convention.
const (
	HeaderError     = "Nats-Service-Error"
	HeaderErrorCode = "Nats-Service-Error-Code"
)

// RespondError answers a micro request with the protocol's error convention.
func RespondError(r micro.Request, err error) error {
	pe := protocol.AsError(err)
	msg := pe.Message
	if msg == "" {
		msg = pe.Code
	}
	return r.Error(strconv.Itoa(pe.Status), msg, ErrorBody(pe))
}

// ErrorMsg builds an error reply for a plain NATS request.
func ErrorMsg(subject string, err error) *nats.Msg {
	pe := protocol.AsError(err)
	msg := pe.Message
	if msg == "" {
		msg = pe.Code
	}
	m := nats.NewMsg(subject)
	m.Header.Set(HeaderError, msg)
	m.Header.Set(HeaderErrorCode, strconv.Itoa(pe.Status))
	m.Data = ErrorBody(pe)
	return m
}

// ReplyError decodes a reply: it returns the protocol error it carries, or
// nil when the reply is not an error.
func ReplyError(m *nats.Msg) error {
	if m == nil || m.Header == nil || m.Header.Get(HeaderError) == "" {
		if m != nil && m.Header != nil && m.Header.Get("Status") == "503" {
			return noResponders{protocol.Errorf(protocol.ErrUnavailable, "no responders")}
		}
		return nil
	}
	var body protocol.ErrorBody
	_ = json.Unmarshal(m.Data, &body)
	status, _ := strconv.Atoi(m.Header.Get(HeaderErrorCode))
	code := body.Error.Code
	if code == "" {
		code = "error_" + strconv.Itoa(status)
	}
	return &protocol.Error{Code: code, Status: status, Message: m.Header.Get(HeaderError)}
}

// HandlerOption tunes Handle.
type HandlerOption func(*handlerOpts)

type handlerOpts struct {
	optional bool
	log      *slog.Logger
	nc       *nats.Conn    // with sem: where replies sent from a worker go
	sem      chan struct{} // bounds the requests being handled at once
}

// Concurrently handles up to n requests of the endpoint at once, each on a
// goroutine of its own that answers on nc. A micro endpoint's handler is
// otherwise called for one request at a time, so a read-only endpoint that
// takes CPU (a registry search) would serve one core's worth however many
// there are. When n are running, the next waits in the handler, which
// holds the endpoint's later requests back as before.
func Concurrently(nc *nats.Conn, n int) HandlerOption {
	return func(o *handlerOpts) { o.nc, o.sem = nc, make(chan struct{}, max(n, 1)) }
}

// EmptyMeansObject makes an empty body decode as {}.
func EmptyMeansObject() HandlerOption { return func(o *handlerOpts) { o.optional = true } }

// WithLogger logs handler panics and failed replies.
func WithLogger(l *slog.Logger) HandlerOption { return func(o *handlerOpts) { o.log = l } }

// Handle adapts a typed function to a micro handler: the body is decoded
// strictly, the result encoded as JSON, an error replied with the protocol's
// convention, and a panic turned into a 500 error instead of killing the
// service.
func Handle[Req any, Resp any](ctx context.Context, c Codec, fn func(ctx context.Context, r micro.Request, req *Req) (*Resp, error), opts ...HandlerOption) micro.Handler {
	o := handlerOpts{log: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		opt(&o)
	}
	return micro.HandlerFunc(func(r micro.Request) {
		defer func() {
			if p := recover(); p != nil {
				o.log.Error("handler panic", "subject", r.Subject(), "panic", p, "stack", string(debug.Stack()))
				_ = RespondError(r, protocol.Errorf(protocol.ErrInternal, "internal error: %v", p))
			}
		}()
		var req Req
		decode := c.Decode
		if o.optional {
			decode = c.DecodeOptional
		}
		if err := decode(r.Data(), &req); err != nil {
			_ = RespondError(r, err)
			return
		}
		if o.sem != nil {
			o.sem <- struct{}{}
			go func() {
				defer func() {
					<-o.sem
					if p := recover(); p != nil {
						o.log.Error("handler panic", "subject", r.Subject(), "panic", p, "stack", string(debug.Stack()))
						_ = RespondErrorLater(o.nc, r.Reply(), protocol.Errorf(protocol.ErrInternal, "internal error: %v", p))
					}
				}()
				resp, err := fn(ctx, r, &req)
				if err != nil {
					_ = RespondErrorLater(o.nc, r.Reply(), err)
					return
				}
				var body any = []byte("{}")
				if resp != nil {
					body = resp
				}
				if err := RespondLater(o.nc, r.Reply(), body); err != nil {
					o.log.Warn("reply failed", "subject", r.Subject(), "err", err)
				}
			}()
			return
		}
		resp, err := fn(ctx, r, &req)
		if err != nil {
			_ = RespondError(r, err)
			return
		}
		// A nil result is an empty object. Replies sent after the handler
		// returns must not use r (see RespondLater), so there is no way here
		// to answer later.
		body := []byte("{}")
		if resp != nil {
			body = Encode(resp)
		}
		if err := r.Respond(body); err != nil {
			o.log.Warn("reply failed", "subject", r.Subject(), "err", err)
		}
	})
}

// Request sends a JSON request and decodes the JSON reply into out; an error
// reply comes back as a *protocol.Error.
func Request(ctx context.Context, nc *nats.Conn, subject string, in, out any) error {
	return RequestHeader(ctx, nc, subject, nil, in, out)
}

// RequestHeader is Request with message headers (such as a W3C
// traceparent); a nil header sends none.
func RequestHeader(ctx context.Context, nc *nats.Conn, subject string, h nats.Header, in, out any) error {
	var data []byte
	switch v := in.(type) {
	case nil:
	case []byte:
		data = v
	case string:
		data = []byte(v)
	default:
		data = Encode(in)
	}
	var m *nats.Msg
	var err error
	if h == nil {
		m, err = nc.RequestWithContext(ctx, subject, data)
	} else {
		m, err = nc.RequestMsgWithContext(ctx, &nats.Msg{Subject: subject, Data: data, Header: h})
	}
	if err != nil {
		if err == nats.ErrNoResponders {
			return noResponders{protocol.Errorf(protocol.ErrUnavailable, "no service answers on %s (is ioa serve running?)", subject)}
		}
		if errors.Is(err, nats.ErrMaxPayload) {
			return fmt.Errorf("request %s: %w: the request is %d bytes, the server takes at most %d in a message", subject, err, len(data), nc.MaxPayload())
		}
		return fmt.Errorf("request %s: %w", subject, err)
	}
	if err := ReplyError(m); err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(m.Data, out); err != nil {
		return fmt.Errorf("reply from %s: %w", subject, err)
	}
	return nil
}

// RequestAgain is Request for a request that is safe to send twice (a
// goal.submit with an idempotency key): one whose answer has not come within
// each is sent again, until ctx ends. A request or its answer can be lost on
// the way (core NATS delivers at most once, and a cluster's routes may
// reconnect in between); waiting longer for it would not bring it.
func RequestAgain(ctx context.Context, nc *nats.Conn, subject string, each time.Duration, in, out any) error {
	return RequestHeaderAgain(ctx, nc, subject, nil, each, in, out)
}

// RequestHeaderAgain is RequestAgain with message headers.
func RequestHeaderAgain(ctx context.Context, nc *nats.Conn, subject string, h nats.Header, each time.Duration, in, out any) error {
	for {
		actx, cancel := context.WithTimeout(ctx, each)
		err := RequestHeader(actx, nc, subject, h, in, out)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
			return err
		}
	}
}

// ErrNoResponders matches (errors.Is) a request nobody was subscribed to
// answer, as opposed to a 503 a responder sent; such an error is also
// protocol.ErrUnavailable.
var ErrNoResponders = nats.ErrNoResponders

type noResponders struct{ pe *protocol.Error }

func (e noResponders) Error() string   { return e.pe.Error() }
func (e noResponders) Unwrap() []error { return []error{e.pe, nats.ErrNoResponders} }

// RespondLater answers a request after its micro handler has returned.
// micro.Request must not be used then (the service's statistics read it when
// the handler returns), so the reply is published to the reply subject.
func RespondLater(nc *nats.Conn, reply string, v any) error {
	if reply == "" {
		return nil
	}
	data, ok := v.([]byte)
	if !ok {
		data = Encode(v)
	}
	return nc.Publish(reply, data)
}

// RespondErrorLater is RespondLater for an error reply.
func RespondErrorLater(nc *nats.Conn, reply string, err error) error {
	if reply == "" {
		return nil
	}
	return nc.PublishMsg(ErrorMsg(reply, err))
}
