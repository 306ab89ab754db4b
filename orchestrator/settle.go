package orchestrator

import (
	"context"
	"errors"
	"time"

	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/internal/backoff"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A write to JetStream whose acknowledgement is lost (a cluster electing a
// stream's leader) may have been stored all the same. Retrying it blindly is
// safe, because every write names what it expects (a message id, an expected
// last sequence, a KV revision), but the retry then fails as a conflict or a
// duplicate, and the writer would take its own write for someone else's.
// settle resolves that: after an error it reads back what is stored, and a
// write found there counts as done.
const (
	settleFor     = 20 * time.Second       // how long a write is tried in all
	settleAttempt = 3 * time.Second        // one attempt, or one read-back
	settlePause   = 50 * time.Millisecond  // first pause between attempts; doubles
	settleMaxWait = 500 * time.Millisecond // longest pause
)

// errDuplicate is what a write function returns for a publish that
// JetStream acknowledged as a duplicate of an earlier message id: stored
// decides whether that earlier message is this one.
var errDuplicate = errors.New("duplicate message id")

// errWriteAgain is what a read-back returns when it changed what the next
// attempt expects (it stepped over foreign log entries): write again now.
var errWriteAgain = errors.New("write again")

// settle runs write until JetStream answers it, for up to settleFor. After
// any error stored reads back what is there: found means the write (this
// one, or an earlier attempt of it whose answer was lost) is stored, at the
// returned sequence or revision. A conflict that the read-back shows is not
// this write is returned as it is; so is an error that retrying cannot cure.
// what names the write in the log line that says a lost ack was settled.
func (s *Service) settle(ctx context.Context, what string, write func(context.Context) (uint64, error), stored func(context.Context) (uint64, bool, error)) (uint64, error) {
	deadline := time.Now().Add(settleFor)
	pace := backoff.New(settlePause, settleMaxWait)
	for again := 0; ; {
		actx, cancel := context.WithTimeout(ctx, settleAttempt)
		seq, err := write(actx)
		cancel()
		if err == nil {
			return seq, nil
		}
		if !transient(err) && !conflict(err) {
			return 0, err
		}
		actx, cancel = context.WithTimeout(ctx, settleAttempt)
		got, found, rerr := stored(actx)
		cancel()
		switch {
		case rerr == nil && found:
			s.log.Info("write stored though its answer was lost", "what", what, "err", err)
			return got, nil
		case errors.Is(rerr, errWriteAgain) && again < 16:
			again++
			continue
		case rerr == nil && conflict(err):
			return 0, err // someone else's write is there: a real conflict
		}
		if time.Now().After(deadline) || !pace.Wait(ctx) {
			return 0, err
		}
	}
}

// conflict reports a write refused because the stream holds something other
// than it expected: a wrong last sequence (10071, or 10164 on a replicated
// stream), an existing key, a duplicate message id.
func conflict(err error) bool {
	return errors.Is(err, errDuplicate) || errors.Is(err, jetstream.ErrKeyExists) || bus.WrongLastSeq(err)
}

// transient reports errors that a stream without a leader, or a connection
// moving to another server, gives for a while: no answer, a timeout, or
// JetStream saying it is temporarily unavailable.
func transient(err error) bool {
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout),
		errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrNoStreamResponse),
		errors.Is(err, nats.ErrConnectionReconnecting):
		return true
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case 10008, // JetStream system temporarily unavailable
			10009: // cluster cannot handle the request (no leader yet)
			return true
		}
		return apiErr.Code == 503
	}
	return false
}
