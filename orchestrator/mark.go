package orchestrator

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/internal/backoff"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/segmentio/encoding/json"
)

// Only the referee writes chat logs, but nothing in NATS stops another
// client from publishing to <p>.chat.<comm> when permissions are off or
// wrong. Every entry the referee appends therefore carries a mark: an
// HMAC-SHA256 of its subject and body under a key all orchestrator instances
// share. An entry without a valid mark, or whose message id or seq do not
// fit, is foreign: it is skipped by the referee's rebuild, by the history
// endpoint (the only way members read a log) and when appending, reported
// once (a WARN line and a counter), and never ends or changes a chat.

// MarkHeader is the header that carries an entry's mark.
const MarkHeader = "Ioa-Log-Mark"

// markKeyName is where the key lives in the ioa_chats bucket. It holds a
// dot, so it can never be a comm id (ids are [A-Za-z0-9_-]).
const markKeyName = "_ioa.log-mark-key"

// markKeyWait bounds how long Start waits for the bucket to answer (a
// cluster still electing its leaders).
const markKeyWait = 60 * time.Second

// loadMarkKey reads the shared key, creating it on first start. Two
// instances starting at once both try Create; the loser reads the winner's.
func (s *Service) loadMarkKey(ctx context.Context) error {
	deadline := time.Now().Add(markKeyWait)
	pace := backoff.New(100*time.Millisecond, time.Second)
	for {
		key, err := s.readMarkKey(ctx)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			fresh := make([]byte, 32)
			_, _ = rand.Read(fresh)
			actx, cancel := context.WithTimeout(ctx, settleAttempt)
			_, err = s.chatKV.Create(actx, markKeyName, []byte(hex.EncodeToString(fresh)))
			cancel()
			if err == nil {
				key = fresh
			}
			// Otherwise the key exists now (another instance, or a lost
			// ack of this Create): the next read finds it.
		}
		if key != nil {
			s.markKey = key
			return nil
		}
		if err != nil && !transient(err) && !conflict(err) {
			return fmt.Errorf("orchestrator: log mark key: %w", err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("orchestrator: log mark key: %w", err)
		}
		if !pace.Wait(ctx) {
			return ctx.Err()
		}
	}
}

func (s *Service) readMarkKey(ctx context.Context) ([]byte, error) {
	actx, cancel := context.WithTimeout(ctx, settleAttempt)
	defer cancel()
	e, err := s.chatKV.Get(actx, markKeyName)
	if err != nil {
		return nil, err
	}
	key, err := hex.DecodeString(string(e.Value()))
	if err != nil || len(key) < 32 {
		return nil, fmt.Errorf("bucket ioa_chats holds a malformed log mark key under %q; delete that key to have a new one made (the chats logged under the old key will read as foreign)", markKeyName)
	}
	return key, nil
}

// mark is the mark of an entry with this subject and body.
func (s *Service) mark(subject string, body []byte) string {
	return EntryMark(s.markKey, subject, body)
}

// EntryMark is the mark (MarkHeader) of a chat log entry with this subject
// and body under key: HMAC-SHA256 of the subject, a zero byte and the body,
// in hex. Tools that check a log with the key, or log as the referee does,
// compute it with this.
func EntryMark(key []byte, subject string, body []byte) string {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(subject))
	h.Write([]byte{0})
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// logMsg is a chat log entry ready to publish: body and mark.
func (s *Service) logMsg(subject string, body []byte) *nats.Msg {
	msg := nats.NewMsg(subject)
	msg.Data = body
	msg.Header.Set(MarkHeader, s.mark(subject, body))
	return msg
}

// entryMsgID is the message id of a chat's entry at seq. An id someone else
// took first gets a suffix (see appendLog).
func entryMsgID(comm string, seq uint64) string { return comm + "." + strconv.FormatUint(seq, 10) }

// verify decodes a raw log entry of comm and says why it is foreign, or ""
// when it is the referee's own: a valid mark, the chat's comm id, and the
// message id of its seq.
func (s *Service) verify(comm string, raw *jetstream.RawStreamMsg) (protocol.AgentMessage, string) {
	var m protocol.AgentMessage
	got := raw.Header.Get(MarkHeader)
	if got == "" {
		return m, "no mark"
	}
	if !hmac.Equal([]byte(got), []byte(s.mark(raw.Subject, raw.Data))) {
		return m, "bad mark"
	}
	if err := json.Unmarshal(raw.Data, &m); err != nil {
		return m, "not a message: " + err.Error()
	}
	if m.CommID != comm {
		return m, fmt.Sprintf("comm_id %q in chat %s", m.CommID, comm)
	}
	id, want := raw.Header.Get(jetstream.MsgIDHeader), entryMsgID(comm, m.Seq)
	if id != want && !strings.HasPrefix(id, want+".") {
		return m, fmt.Sprintf("message id %q does not match seq %d", id, m.Seq)
	}
	return m, ""
}

// maxReported bounds the memory of foreign entries already reported.
const maxReported = 100_000

// foreign reports a foreign entry once per instance: a WARN line, and the
// counter ForeignEntries and the service's stats show.
func (s *Service) foreign(comm string, raw *jetstream.RawStreamMsg, why string) {
	s.mu.Lock()
	if _, done := s.reported[raw.Sequence]; done {
		s.mu.Unlock()
		return
	}
	if len(s.reported) >= maxReported {
		clear(s.reported)
	}
	s.reported[raw.Sequence] = struct{}{}
	s.mu.Unlock()
	s.foreignCount.Add(1)
	body := raw.Data
	if len(body) > 200 {
		body = body[:200]
	}
	s.log.Warn("foreign chat log entry skipped", "comm", comm, "stream_seq", raw.Sequence, "why", why, "body", string(body))
}

// ForeignEntries is how many foreign chat log entries this instance has
// found and skipped since it started.
func (s *Service) ForeignEntries() uint64 { return s.foreignCount.Load() }
