package main

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// replay reads a stream in order, from a start sequence, through an ordered
// consumer: it hands each message to C until stop is called. Stop returns
// only after its goroutine has ended.
type replay struct {
	C    <-chan jetstream.Msg
	errc <-chan error

	it     jetstream.MessagesContext
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func startReplay(ctx context.Context, stream jetstream.Stream, cfg jetstream.OrderedConsumerConfig) (*replay, error) {
	cons, err := stream.OrderedConsumer(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", stream.CachedInfo().Config.Name, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", stream.CachedInfo().Config.Name, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	c := make(chan jetstream.Msg)
	errc := make(chan error, 1)
	r := &replay{C: c, errc: errc, it: it, cancel: cancel}
	r.wg.Go(func() {
		for {
			m, err := it.Next(jetstream.NextContext(ctx))
			if err != nil {
				if ctx.Err() == nil && !errors.Is(err, jetstream.ErrMsgIteratorClosed) {
					errc <- fmt.Errorf("read %s: %w", stream.CachedInfo().Config.Name, err)
				}
				return
			}
			select {
			case c <- m:
			case <-ctx.Done():
				return
			}
		}
	})
	return r, nil
}

func (r *replay) stop() {
	r.cancel()
	r.it.Stop()
	r.wg.Wait()
}

// openStream finds one of the runtime's streams, with a hint when it is not
// there (NATS without the runtime).
func openStream(ctx context.Context, js jetstream.JetStream, name string) (jetstream.Stream, error) {
	s, err := js.Stream(ctx, name)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return nil, fmt.Errorf("no stream %s on this NATS: is \"ioa serve\" running with this --nats-url?", name)
	case errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
		return nil, fmt.Errorf("JetStream is not enabled on this NATS: is \"ioa serve\" running with this --nats-url?")
	case err != nil:
		return nil, fmt.Errorf("stream %s: %w", name, err)
	}
	return s, nil
}

// firstSeq is the sequence of the first message on subject, or where the
// next message will be stored when there is none yet (so a reader that
// starts there misses nothing that is published later).
func firstSeq(ctx context.Context, s jetstream.Stream, subject string) (uint64, bool, error) {
	info, err := s.Info(ctx)
	if err != nil {
		return 0, false, err
	}
	m, err := s.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(subject))
	switch {
	case err == nil:
		return m.Sequence, true, nil
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return info.State.LastSeq + 1, false, nil
	}
	return 0, false, err
}
