package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultMaxLineLength bounds one input line of a LineTransport, as the
// go-sdk bounds its own.
const DefaultMaxLineLength = sdk.DefaultMaxLineLength

// LineTransport is newline-delimited JSON-RPC over a reader and a writer,
// as the go-sdk's IOTransport, but it outlives a bad line: one that is not
// JSON is answered with a parse error (-32700, id null), one that is not a
// JSON-RPC 2.0 message with an invalid request error (-32600), and the
// session carries on where the go-sdk's transport would end it. At the end
// of the input it waits for the replies still due, so a client that pipes
// its requests in and closes its end gets every answer. Batches (JSON
// arrays, gone from MCP since 2025-06-18) are refused as invalid requests.
type LineTransport struct {
	Reader io.Reader
	Writer io.Writer
	// MaxLineLength bounds one line; 0 means DefaultMaxLineLength.
	MaxLineLength int
}

// Connect implements the go-sdk's Transport.
func (t *LineTransport) Connect(context.Context) (sdk.Connection, error) {
	limit := t.MaxLineLength
	if limit <= 0 {
		limit = DefaultMaxLineLength
	}
	c := &lineConn{
		w:       t.Writer,
		due:     map[jsonrpc.ID]bool{},
		changed: make(chan struct{}),
		msgs:    make(chan msgOrEnd),
		closed:  make(chan struct{}),
	}
	// Reading in a goroutine lets Close unblock a Read waiting on input.
	go c.readLoop(bufio.NewReader(t.Reader), limit)
	return c, nil
}

type msgOrEnd struct {
	msg jsonrpc.Message
	err error
}

type lineConn struct {
	writeMu sync.Mutex // one message a Write, never interleaved
	w       io.Writer

	mu      sync.Mutex
	due     map[jsonrpc.ID]bool // calls read and not yet answered
	broken  bool                // a write failed: no reply can be given
	changed chan struct{}       // closed (and replaced) when due or broken change

	msgs      chan msgOrEnd
	closed    chan struct{}
	closeOnce sync.Once
}

func (c *lineConn) SessionID() string { return "" }

func (c *lineConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return nil
}

// Read returns the next message; at the end of the input, once the replies
// due are written (or cannot be), io.EOF.
func (c *lineConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case m := <-c.msgs:
		if m.err != nil {
			c.waitDue(ctx)
		}
		return m.msg, m.err
	case <-c.closed:
		return nil, io.EOF
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *lineConn) Write(_ context.Context, msg jsonrpc.Message) error {
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("encoding a message: %w", err)
	}
	err = c.writeLine(data)
	if resp, ok := msg.(*jsonrpc.Response); ok {
		c.settle(resp.ID, err != nil)
	}
	return err
}

func (c *lineConn) writeLine(data []byte) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	_, err := c.w.Write(append(data, '\n'))
	return err
}

// settle marks the call id answered, or every call unanswerable when the
// write failed.
func (c *lineConn) settle(id jsonrpc.ID, failed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.due, id)
	c.broken = c.broken || failed
	close(c.changed)
	c.changed = make(chan struct{})
}

func (c *lineConn) expect(id jsonrpc.ID) {
	c.mu.Lock()
	c.due[id] = true
	c.mu.Unlock()
}

// waitDue waits until every call read has its reply, the writer is broken,
// the connection is closed or ctx ends.
func (c *lineConn) waitDue(ctx context.Context) {
	for {
		c.mu.Lock()
		done, changed := len(c.due) == 0 || c.broken, c.changed
		c.mu.Unlock()
		if done {
			return
		}
		select {
		case <-changed:
		case <-c.closed:
			return
		case <-ctx.Done():
			return
		}
	}
}

// readLoop hands each good line's message to Read and answers bad lines
// itself, until the input ends.
func (c *lineConn) readLoop(in *bufio.Reader, limit int) {
	for n := 1; ; n++ {
		line, tooLong, err := readLine(in, limit)
		if err != nil {
			c.deliver(msgOrEnd{err: err})
			return
		}
		if tooLong {
			c.refuse(nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("invalid request: line %d is longer than %d bytes", n, limit))
			continue
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		msg, ok := c.decode(line, n)
		if ok && !c.deliver(msgOrEnd{msg: msg}) {
			return
		}
	}
}

// deliver hands m to Read; false if the connection closed first.
func (c *lineConn) deliver(m msgOrEnd) bool {
	select {
	case c.msgs <- m:
		return true
	case <-c.closed:
		return false
	}
}

// decode parses line number n; a line that is no message is answered
// here, and ok is false.
func (c *lineConn) decode(line []byte, n int) (_ jsonrpc.Message, ok bool) {
	line = bytes.TrimSpace(line)
	if !json.Valid(line) {
		c.refuse(nil, jsonrpc.CodeParseError, fmt.Sprintf("parse error: line %d is not valid JSON", n))
		return nil, false
	}
	if line[0] == '[' {
		c.refuse(nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("invalid request: line %d is a batch; send one message a line", n))
		return nil, false
	}
	msg, err := jsonrpc.DecodeMessage(line)
	if err != nil {
		c.refuse(rawID(line), jsonrpc.CodeInvalidRequest, fmt.Sprintf(`invalid request: line %d is not a JSON-RPC 2.0 message (it needs "jsonrpc": "2.0", a "method" or a "result", and an "id" that is a string or a number)`, n))
		return nil, false
	}
	if req, isReq := msg.(*jsonrpc.Request); isReq {
		c.track(req)
	}
	return msg, true
}

// track records a call as due before the server can answer it, and forgets
// one the client cancels (MCP wants no reply to it).
func (c *lineConn) track(req *jsonrpc.Request) {
	if req.IsCall() {
		c.expect(req.ID)
		return
	}
	if req.Method != "notifications/cancelled" {
		return
	}
	var p struct {
		RequestID any `json:"requestId"`
	}
	if json.Unmarshal(req.Params, &p) == nil {
		if id, err := jsonrpc.MakeID(p.RequestID); err == nil && id.IsValid() {
			c.settle(id, false)
		}
	}
}

// rawID is the id of a line that is JSON but no message, if it has a
// usable one; nil (id null) otherwise.
func rawID(line []byte) json.RawMessage {
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(line, &m) != nil || len(m.ID) == 0 {
		return nil
	}
	var id any
	_ = json.Unmarshal(m.ID, &id)
	switch id.(type) {
	case string, float64:
		return m.ID
	}
	return nil
}

// refuse writes an error reply that the server's session knows nothing of.
func (c *lineConn) refuse(id json.RawMessage, code int64, message string) {
	if id == nil {
		id = json.RawMessage("null")
	}
	type wireError struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	}
	data, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   wireError       `json:"error"`
	}{"2.0", id, wireError{code, message}})
	if err == nil {
		err = c.writeLine(data)
	}
	if err != nil {
		c.settle(jsonrpc.ID{}, true)
	}
}

// readLine reads one line (its newline included) of at most limit bytes; a
// longer one is read to its end and reported too long. The last line may
// lack its newline.
func readLine(in *bufio.Reader, limit int) (line []byte, tooLong bool, err error) {
	for {
		frag, err := in.ReadSlice('\n')
		if !tooLong && len(line)+len(frag) <= limit {
			line = append(line, frag...)
		} else {
			tooLong, line = true, nil
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && (len(line) > 0 || tooLong):
			return line, tooLong, nil
		}
		return line, tooLong, err
	}
}
