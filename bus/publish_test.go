package bus_test

import (
	"errors"
	"strconv"
	"testing"

	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/bus/bustest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// PublishAcked answers as jetstream's PublishMsg does, for every outcome the
// referee tells apart: stored, a duplicate id, a wrong expected sequence, no
// stream, and a reply that is not an acknowledgement.
func TestPublishAckedAnswersAsJetStreamDoes(t *testing.T) {
	b := bustest.New(t)
	nc, js := b.Conn(), b.JetStream()
	subject, err := b.Subjects().Chat("c1")
	if err != nil {
		t.Fatal(err)
	}
	msg := func(id string, after uint64) *nats.Msg {
		m := nats.NewMsg(subject)
		m.Data = []byte(`{"seq":` + strconv.FormatUint(after+1, 10) + `}`)
		m.Header.Set(jetstream.MsgIDHeader, id)
		m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(after, 10))
		return m
	}
	first, err := bus.PublishAcked(t.Context(), nc, msg("c1.1", 0))
	if err != nil || first.Stream != bus.StreamChats || first.Sequence == 0 || first.Duplicate {
		t.Fatalf("first append: %+v, %v", first, err)
	}
	// The same id again (the expected sequence, which the server checks
	// first, being right): the stream says where it is, as a duplicate.
	dup, err := bus.PublishAcked(t.Context(), nc, msg("c1.1", first.Sequence))
	if err != nil || !dup.Duplicate || dup.Sequence != first.Sequence {
		t.Fatalf("duplicate: %+v, %v", dup, err)
	}
	// A new id after the wrong last sequence: the API error 10071, as jetstream gives it.
	_, err = bus.PublishAcked(t.Context(), nc, msg("c1.2", 0))
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != jetstream.JSErrCodeStreamWrongLastSequence || !bus.WrongLastSeq(err) {
		t.Fatalf("wrong last sequence: %v", err)
	}
	if bus.WrongLastSeq(jetstream.ErrNoStreamResponse) {
		t.Fatal("WrongLastSeq takes no answer for a wrong sequence")
	}
	_, jsErr := js.PublishMsg(t.Context(), msg("c1.3", 0))
	if jsErr == nil || err.Error() != jsErr.Error() {
		t.Fatalf("error %q, jetstream's %q", err, jsErr)
	}
	second, err := bus.PublishAcked(t.Context(), nc, msg("c1.2", first.Sequence))
	if err != nil || second.Sequence <= first.Sequence {
		t.Fatalf("second append: %+v, %v", second, err)
	}
	// No stream captures the subject.
	if _, err := bus.PublishAcked(t.Context(), nc, nats.NewMsg("nostream.x")); !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Fatalf("no stream: %v", err)
	}
	// A responder that is not JetStream.
	sub, err := nc.Subscribe("fake.stream", func(m *nats.Msg) { _ = m.Respond([]byte(`{"ok":true}`)) })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if _, err := bus.PublishAcked(t.Context(), nc, nats.NewMsg("fake.stream")); !errors.Is(err, jetstream.ErrInvalidJSAck) {
		t.Fatalf("not an acknowledgement: %v", err)
	}
}

// An append as the referee makes it (message id, expected last sequence),
// through PublishAcked and through jetstream's PublishMsg.
func BenchmarkPublishAcked(b *testing.B) {
	for _, via := range []string{"bus", "jetstream"} {
		b.Run(via, func(b *testing.B) {
			bb := bustest.New(b)
			nc, js := bb.Conn(), bb.JetStream()
			subject, _ := bb.Subjects().Chat("c" + via)
			body := []byte(`{"v":1,"id":"m-1","comm_id":"cabc","seq":2,"type":"discussion","content":"hello"}`)
			var last uint64
			i := 0
			for b.Loop() {
				i++
				m := nats.NewMsg(subject)
				m.Data = body
				var ack *jetstream.PubAck
				var err error
				if via == "bus" {
					m.Header.Set(jetstream.MsgIDHeader, subject+"."+strconv.Itoa(i))
					m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(last, 10))
					ack, err = bus.PublishAcked(b.Context(), nc, m)
				} else {
					ack, err = js.PublishMsg(b.Context(), m, jetstream.WithMsgID(subject+"."+strconv.Itoa(i)), jetstream.WithExpectLastSequencePerSubject(last))
				}
				if err != nil {
					b.Fatal(err)
				}
				last = ack.Sequence
			}
		})
	}
}
