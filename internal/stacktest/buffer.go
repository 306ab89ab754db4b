package stacktest

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer safe for one writer goroutine (os/exec's output
// copier, a renderer) and a test reading it meanwhile.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
