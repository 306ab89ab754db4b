package bus

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// Writes reach the reader whole and in order, even when the reader is slow
// and the writes come from several goroutines one at a time (as nats.go's
// flusher and its protocol writes do, under the connection's lock).
func TestBufferedConnKeepsWritesInOrder(t *testing.T) {
	client, server := net.Pipe()
	c := newBufferedConn(client)
	var want bytes.Buffer
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 500 {
				p := bytes.Repeat([]byte{byte('a' + g)}, 1+i%97)
				mu.Lock()
				want.Write(p)
				_, err := c.Write(p)
				mu.Unlock()
				if err != nil {
					t.Errorf("write: %v", err)
					return
				}
			}
		})
	}
	total := 0
	for i := range 500 {
		total += 4 * (1 + i%97)
	}
	got := make(chan []byte)
	go func() {
		var b bytes.Buffer
		buf := make([]byte, 333) // a reader that takes little at a time
		for b.Len() < total {
			n, err := server.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		got <- b.Bytes()
	}()
	wg.Wait()
	if b := <-got; !bytes.Equal(b, want.Bytes()) {
		t.Fatalf("the reader got %d bytes that differ from the %d written", len(b), want.Len())
	}
	_ = c.Close()
}

// A write returns before the server has read it: the point of the buffer.
// Close then waits until the server has read everything written.
func TestBufferedConnWriteDoesNotWaitAndCloseDrains(t *testing.T) {
	client, server := net.Pipe()
	c := newBufferedConn(client)
	done := make(chan error, 1)
	go func() {
		_, err := c.Write([]byte("PUB a 1\r\nx\r\n"))
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a write waited for the reader")
	}
	if _, err := c.Write([]byte("PUB b 1\r\ny\r\n")); err != nil {
		t.Fatal(err)
	}
	read := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(server)
		read <- b
	}()
	if err := c.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if b := <-read; string(b) != "PUB a 1\r\nx\r\nPUB b 1\r\ny\r\n" {
		t.Errorf("the server read %q before the close", b)
	}
	if _, err := c.Write([]byte("late")); !errors.Is(err, net.ErrClosed) {
		t.Errorf("a write after close: %v, want net.ErrClosed", err)
	}
}

// A server that went away fails the writes that follow, and a server that
// stopped reading holds Close up for closeDrain at most.
func TestBufferedConnReportsAPeerThatWentAway(t *testing.T) {
	client, server := net.Pipe()
	c := newBufferedConn(client)
	_ = server.Close()
	var err error
	for deadline := time.Now().Add(5 * time.Second); err == nil && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		_, err = c.Write([]byte("PING\r\n"))
	}
	if err == nil {
		t.Fatal("writes to a closed peer kept succeeding")
	}
	_ = c.Close()

	client, server = net.Pipe()
	defer server.Close()
	c = newBufferedConn(client)
	if _, err := c.Write([]byte("never read")); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	_ = c.Close()
	if d := time.Since(t0); d > closeDrain+time.Second {
		t.Errorf("close took %v with a peer that does not read, want at most %v", d, closeDrain)
	}
}

// More than maxUnwritten buffered besides the batch being written (itself at
// most maxUnwritten): writes wait, and go on once the server reads.
func TestBufferedConnWaitsWhenTheServerFallsFarBehind(t *testing.T) {
	client, server := net.Pipe()
	c := newBufferedConn(client)
	defer c.Close()
	chunk := make([]byte, 1<<20)
	writes := 2*maxUnwritten/len(chunk) + 2
	wrote := make(chan int, 1)
	go func() {
		n := 0
		for range writes {
			if _, err := c.Write(chunk); err != nil {
				break
			}
			n++
		}
		wrote <- n
	}()
	select {
	case n := <-wrote:
		t.Fatalf("%d MiB written with nobody reading, over twice the %d MiB bound", n, maxUnwritten>>20)
	case <-time.After(500 * time.Millisecond):
	}
	go func() { _, _ = io.Copy(io.Discard, server) }()
	select {
	case n := <-wrote:
		if n != writes {
			t.Errorf("%d writes went through, want %d", n, writes)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("writes still wait after the server read")
	}
}
