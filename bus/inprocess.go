package bus

import (
	"net"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// inProcess connects clients to the embedded server through memory, as
// nats.InProcessServer does, but with writes that do not wait for the
// server to read them.
//
// The server's in-process connection is a net.Pipe, where a write returns
// only once the other side has read all of it, and nats.go's flusher holds
// the connection's lock while it writes. Every flush therefore held up the
// connection's other publishers, and the acknowledgements its read loop
// routes, until the server's read loop was scheduled: on two busy cores the
// referee's publishes took two to three times as long as on an idle one.
// Here a write lands in a buffer that one goroutine per connection drains
// into the pipe, in order.
type inProcess struct{ srv *server.Server }

func (p inProcess) InProcessConn() (net.Conn, error) {
	c, err := p.srv.InProcessConn()
	if err != nil {
		return nil, err
	}
	return newBufferedConn(c), nil
}

// maxUnwritten is how much a connection may have buffered, besides the
// batch being handed to the server, before its writes wait: a bound on the
// memory a stalled server can hold up, far above what one flush carries.
const maxUnwritten = 8 << 20

// keepBuffer is the largest write buffer kept for the next batch: one a
// burst grew beyond it is left to the garbage collector.
const keepBuffer = 1 << 20

// closeDrain bounds how long Close waits for what was written to reach the
// server (nats.go flushes, then closes at once).
const closeDrain = 2 * time.Second

// bufferedConn is a net.Conn whose writes are buffered and written by a
// goroutine of its own. Reads, and everything else, are the pipe's.
type bufferedConn struct {
	net.Conn
	mu      sync.Mutex
	changed *sync.Cond // signalled when buf shrinks, an error occurs or the writer stops
	buf     []byte     // written, not yet handed to the pipe
	spare   []byte
	err     error
	closing bool
	kick    chan struct{}
	stopped chan struct{}
}

func newBufferedConn(c net.Conn) *bufferedConn {
	b := &bufferedConn{Conn: c, kick: make(chan struct{}, 1), stopped: make(chan struct{})}
	b.changed = sync.NewCond(&b.mu)
	go b.writeLoop()
	return b
}

func (b *bufferedConn) Write(p []byte) (int, error) {
	b.mu.Lock()
	for len(b.buf) >= maxUnwritten && b.err == nil && !b.closing {
		b.changed.Wait()
	}
	if b.err != nil {
		err := b.err
		b.mu.Unlock()
		return 0, err
	}
	if b.closing {
		b.mu.Unlock()
		return 0, net.ErrClosed
	}
	b.buf = append(b.buf, p...)
	b.mu.Unlock()
	select {
	case b.kick <- struct{}{}:
	default: // the writer is already due to look
	}
	return len(p), nil
}

func (b *bufferedConn) writeLoop() {
	defer close(b.stopped)
	for range b.kick {
		for {
			b.mu.Lock()
			if len(b.buf) == 0 || b.err != nil {
				b.changed.Broadcast()
				stop := b.closing || b.err != nil
				b.mu.Unlock()
				if stop {
					return
				}
				break
			}
			out := b.buf
			b.buf, b.spare = b.spare[:0], nil
			b.changed.Broadcast()
			b.mu.Unlock()
			_, err := b.Conn.Write(out)
			b.mu.Lock()
			if cap(out) <= keepBuffer {
				b.spare = out[:0]
			}
			if err != nil && b.err == nil {
				b.err = err
			}
			b.mu.Unlock()
		}
	}
}

// Close lets what was written reach the server (for up to closeDrain), then
// closes the pipe.
func (b *bufferedConn) Close() error {
	b.mu.Lock()
	if b.closing {
		b.mu.Unlock()
		return net.ErrClosed
	}
	b.closing = true
	b.mu.Unlock()
	select {
	case b.kick <- struct{}{}:
	default:
	}
	timer := time.AfterFunc(closeDrain, func() { _ = b.Conn.Close() }) // a server that stopped reading
	defer timer.Stop()
	<-b.stopped
	return b.Conn.Close()
}

// SetDeadline and SetWriteDeadline bound reads only: a write never waits on
// the server (up to maxUnwritten), so there is nothing for a write deadline
// to bound, and on a pipe each deadline was a timer made and stopped around
// every flush.
func (b *bufferedConn) SetDeadline(t time.Time) error { return b.Conn.SetReadDeadline(t) }

func (b *bufferedConn) SetWriteDeadline(time.Time) error { return nil }
