package llm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/ioa-nats/ioa/internal/backoff"
)

// ErrResponseTooLarge is returned when a response body passes
// Config.MaxResponseBytes.
var ErrResponseTooLarge = errors.New("llm: response too large")

// maxBackoff bounds one wait between attempts, Retry-After included.
const maxBackoff = 10 * time.Second

// transport is the http.RoundTripper under every model client: each attempt
// under its own timeout, retries with exponential backoff of what is safe to
// send again, a capped response body, and one debug line per attempt with no
// headers, so no key can reach a log.
//
// A completion is billed once the provider has run it, so an attempt is
// sent again only when it cannot have run: the request never left (a
// refused or failed connection), or the server answered that it did not
// serve it (429, 500, 502, 503, with Retry-After honoured). An attempt that
// timed out or broke after the request was written may be generating, and
// a 504 comes from a gateway whose upstream may have run it: those are not
// retried, the caller gets the error (and the policies their fallback).
type transport struct {
	base *http.Transport
	cfg  Config
	log  *slog.Logger
}

func newTransport(cfg Config) *transport {
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.ResponseHeaderTimeout = cfg.Timeout
	return &transport{base: base, cfg: cfg, log: cfg.Logger}
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("llm: read request: %w", err)
		}
		body = b
	}
	ctx := req.Context()
	where := req.URL.Host + req.URL.Path
	pace := backoff.New(t.cfg.Backoff, maxBackoff)
	for attempt := 0; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, t.cfg.Timeout)
		r := req.Clone(actx)
		if body != nil {
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.ContentLength = int64(len(body))
		}
		var wrote atomic.Bool
		r = r.WithContext(httptrace.WithClientTrace(r.Context(), &httptrace.ClientTrace{
			WroteRequest: func(httptrace.WroteRequestInfo) { wrote.Store(true) },
		}))
		start := time.Now()
		resp, err := t.base.RoundTrip(r)
		retry, wait := t.retryable(ctx, resp, err, wrote.Load())
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.log.Debug("llm http", "url", where, "attempt", attempt, "status", status,
			"request_bytes", len(body), "elapsed", time.Since(start), "err", errString(err))
		if !retry || attempt >= t.cfg.Retries {
			if err != nil {
				cancel()
				if errors.Is(actx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
					return nil, fmt.Errorf("llm: %s: no answer within %v (attempt %d): %w", where, t.cfg.Timeout, attempt+1, context.DeadlineExceeded)
				}
				return nil, fmt.Errorf("llm: %s: %w", where, err)
			}
			resp.Body = &cappedBody{rc: resp.Body, left: t.cfg.MaxResponseBytes, cancel: cancel}
			if resp.ContentLength > t.cfg.MaxResponseBytes {
				_ = resp.Body.Close()
				return nil, fmt.Errorf("%w: %s announced %d bytes, limit %d", ErrResponseTooLarge, where, resp.ContentLength, t.cfg.MaxResponseBytes)
			}
			return resp, nil
		}
		if resp != nil {
			_, _ = io.CopyN(io.Discard, resp.Body, 4<<10)
			_ = resp.Body.Close()
		}
		cancel()
		if next := pace.Next(); wait <= 0 { // the server's Retry-After, or ours
			wait = next
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("llm: %s: %w", where, ctx.Err())
		case <-time.After(min(wait, maxBackoff)):
		}
	}
}

// retryable says whether an attempt may succeed if made again, and how
// long the server asked us to wait.
func (t *transport) retryable(ctx context.Context, resp *http.Response, err error, wrote bool) (bool, time.Duration) {
	if ctx.Err() != nil {
		return false, 0
	}
	if err != nil {
		return !wrote, 0 // sent again only if it never left
	}
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable:
		var wait time.Duration
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			wait = time.Duration(s) * time.Second
		}
		return true, wait
	}
	return false, 0
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// cappedBody fails reads past the limit and ends the attempt's context
// when closed.
type cappedBody struct {
	rc     io.ReadCloser
	left   int64
	cancel context.CancelFunc
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells a body that ends exactly at the limit from
		// one that goes on.
		var one [1]byte
		if n, _ := b.rc.Read(one[:]); n > 0 {
			return 0, ErrResponseTooLarge
		}
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *cappedBody) Close() error {
	err := b.rc.Close()
	b.cancel()
	return err
}
