// Package mcp connects ioa and the Model Context Protocol both ways, with
// the official Go SDK (github.com/modelcontextprotocol/go-sdk):
//
//   - Worker makes an MCP server's tools an ioa agent (MCP in): the agent's
//     capabilities are the tools' descriptions, and each task becomes one
//     tool call, chosen and filled by a Chooser.
//   - NewServer serves ioa as an MCP server (MCP out): tools to submit a
//     goal and wait for its result, read a goal's status, and search and
//     list the agents; `ioa mcp` runs it over stdio.
package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/ioa-nats/ioa/interop/internal/text"
	"log/slog"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ioa-nats/ioa/agentkit"
)

// Defaults of a Worker.
const (
	DefaultTimeout     = 2 * time.Minute
	DefaultMaxResponse = 1 << 20
	connectTimeout     = 30 * time.Second
)

// Errors a Worker wraps, for callers that branch on them.
var (
	// ErrToolFailed is a tool call the MCP server answered with isError.
	ErrToolFailed = errors.New("tool failed")
	// ErrNoTool is a task no tool of the server fits.
	ErrNoTool = errors.New("no tool fits the task")
	// ErrTimeout is a tool call that took longer than the timeout.
	ErrTimeout = errors.New("timed out")
)

// Config says where the MCP server is and how to use it.
type Config struct {
	// Command runs a stdio server (program and arguments, no shell), or
	// URL names a streamable HTTP one; exactly one is set.
	Command []string
	Dir     string
	// Env, when set, is the stdio server's whole environment (KEY=value).
	Env []string
	URL string
	// Header is added to each HTTP request (e.g. Authorization).
	Header http.Header
	// Timeout bounds each tool call (default 2m).
	Timeout time.Duration
	// MaxResponse bounds a tool result's text in bytes (default 1 MiB).
	MaxResponse int
	// Tools, when set, limits the agent to these tools of the server.
	Tools []string
	// Chooser picks the tool and its arguments for a task (default Match).
	Chooser Chooser
	Logger  *slog.Logger
}

// Worker is an agentkit.Worker that does each task with one tool call to
// an MCP server. It keeps one session, and starts a new one when the
// server has gone away. Close ends the session (and a stdio server).
type Worker struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	session *sdk.ClientSession
	tools   []*sdk.Tool
}

var _ agentkit.Worker = (*Worker)(nil)

// Dial starts (or reaches) the server and lists its tools; it fails when
// the server offers none.
func Dial(ctx context.Context, cfg Config) (*Worker, error) {
	if (len(cfg.Command) == 0) == (cfg.URL == "") {
		return nil, errors.New("mcp: set exactly one of command (a stdio server) or url (streamable HTTP)")
	}
	if cfg.Chooser == nil {
		cfg.Chooser = Match{}
	}
	w := &Worker{cfg: cfg, log: cfg.Logger}
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.connectLocked(ctx); err != nil {
		return nil, err
	}
	return w, nil
}

// where names the server in errors.
func (w *Worker) where() string {
	if w.cfg.URL != "" {
		return w.cfg.URL
	}
	return w.cfg.Command[0]
}

func (w *Worker) connectLocked(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	var t sdk.Transport
	if w.cfg.URL != "" {
		client := &http.Client{Transport: headerTransport{h: w.cfg.Header}}
		t = &sdk.StreamableClientTransport{Endpoint: w.cfg.URL, HTTPClient: client, DisableStandaloneSSE: true}
	} else {
		cmd := exec.Command(w.cfg.Command[0], w.cfg.Command[1:]...)
		cmd.Dir = w.cfg.Dir
		if w.cfg.Env != nil {
			cmd.Env = w.cfg.Env
		}
		cmd.Stderr = &logWriter{log: w.log, prog: w.cfg.Command[0]}
		t = &sdk.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "ioa", Version: "1"}, nil)
	s, err := client.Connect(ctx, t, nil)
	if err != nil {
		return fmt.Errorf("mcp %s: connect: %w", w.where(), err)
	}
	var tools []*sdk.Tool
	for tool, err := range s.Tools(ctx, nil) {
		if err != nil {
			_ = s.Close()
			return fmt.Errorf("mcp %s: list tools: %w", w.where(), err)
		}
		if len(w.cfg.Tools) == 0 || slices.Contains(w.cfg.Tools, tool.Name) {
			tools = append(tools, tool)
		}
	}
	if len(tools) == 0 {
		_ = s.Close()
		if len(w.cfg.Tools) > 0 {
			return fmt.Errorf("mcp %s: none of the tools %v is offered", w.where(), w.cfg.Tools)
		}
		return fmt.Errorf("mcp %s: the server offers no tools", w.where())
	}
	w.session, w.tools = s, tools
	// A server that goes away between tasks is noticed here, so the next
	// task starts a new one.
	go func() {
		_ = s.Wait()
		w.drop(s)
	}()
	return nil
}

// Tools returns the server's tools (those the config allows).
func (w *Worker) Tools() []*sdk.Tool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.tools)
}

// Capabilities describes the tools for the agent's card: one line per
// tool, its name and the first sentence of its description, so that the
// registry finds the agent by what its tools do.
func (w *Worker) Capabilities() []string {
	var out []string
	for _, t := range w.Tools() {
		d := text.FirstSentence(t.Description)
		if d == "" {
			d = t.Title
		}
		out = append(out, strings.TrimSpace(strings.ReplaceAll(t.Name, "_", " ")+": "+d))
	}
	return out
}

// Description is a card description built from the tools, for agents
// configured without one.
func (w *Worker) Description() string {
	names := make([]string, 0, len(w.Tools()))
	for _, t := range w.Tools() {
		names = append(names, t.Name)
	}
	return "MCP server " + w.name() + " with tools: " + strings.Join(names, ", ")
}

// name is what the description calls the server: its URL, or its program's
// file name. A full path would put the words of wherever it is installed
// into the card, and the registry would match tasks on them.
func (w *Worker) name() string {
	if w.cfg.URL != "" {
		return w.cfg.URL
	}
	return filepath.Base(w.cfg.Command[0])
}

// Close ends the session; a stdio server is stopped.
func (w *Worker) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.session == nil {
		return nil
	}
	err := w.session.Close()
	w.session = nil
	return err
}

// current returns the live session, starting a new one if the last ended.
func (w *Worker) current(ctx context.Context) (*sdk.ClientSession, []*sdk.Tool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.session == nil {
		if err := w.connectLocked(ctx); err != nil {
			return nil, nil, err
		}
	}
	return w.session, w.tools, nil
}

// drop forgets s after a transport failure, so the next task reconnects.
func (w *Worker) drop(s *sdk.ClientSession) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.session == s {
		_ = s.Close()
		w.session = nil
	}
}

// Run does t with one tool call.
func (w *Worker) Run(ctx context.Context, t agentkit.Task) (agentkit.Result, error) {
	s, tools, err := w.current(ctx)
	if err != nil {
		return agentkit.Result{}, err
	}
	call, err := w.cfg.Chooser.Choose(ctx, t, tools)
	if err != nil {
		return agentkit.Result{}, fmt.Errorf("mcp %s: %w", w.where(), err)
	}
	if !slices.ContainsFunc(tools, func(x *sdk.Tool) bool { return x.Name == call.Tool }) {
		return agentkit.Result{}, fmt.Errorf("mcp %s: %w: the server has no tool %q", w.where(), ErrNoTool, call.Tool)
	}
	timeout := w.cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	w.log.Debug("mcp tool call", "server", w.where(), "tool", call.Tool, "task", t.TaskID)
	res, err := s.CallTool(cctx, &sdk.CallToolParams{Name: call.Tool, Arguments: call.Arguments})
	switch {
	case err != nil && ctx.Err() != nil:
		return agentkit.Result{}, fmt.Errorf("mcp %s: tool %s: %w", w.where(), call.Tool, ctx.Err())
	case err != nil && errors.Is(cctx.Err(), context.DeadlineExceeded):
		return agentkit.Result{}, fmt.Errorf("mcp %s: tool %s: %w after %v", w.where(), call.Tool, ErrTimeout, timeout)
	case err != nil:
		// The server answered with a JSON-RPC error (unknown tool, bad
		// arguments): the session is fine. Anything else (the server
		// died, the transport broke): start a new session next time.
		var werr *jsonrpc.Error
		if !errors.As(err, &werr) {
			w.drop(s)
		}
		return agentkit.Result{}, fmt.Errorf("mcp %s: tool %s: %w", w.where(), call.Tool, err)
	}
	text := resultText(res)
	limit := w.cfg.MaxResponse
	if limit <= 0 {
		limit = DefaultMaxResponse
	}
	if len(text) > limit {
		text = text[:limit] + "\n[truncated]"
	}
	if res.IsError {
		if text == "" {
			text = "(no reason given)"
		}
		return agentkit.Result{}, fmt.Errorf("mcp %s: tool %s: %w: %s", w.where(), call.Tool, ErrToolFailed, text)
	}
	return agentkit.Result{Conclusion: text}, nil
}

// resultText is a tool result as text: its text contents, else its
// structured content as JSON, else a note per other content.
func resultText(res *sdk.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			parts = append(parts, c.Text)
		case *sdk.ImageContent:
			parts = append(parts, fmt.Sprintf("[image %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *sdk.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *sdk.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource %s]", c.URI))
		case *sdk.EmbeddedResource:
			if c.Resource != nil && c.Resource.Text != "" {
				parts = append(parts, c.Resource.Text)
			} else if c.Resource != nil {
				parts = append(parts, fmt.Sprintf("[resource %s]", c.Resource.URI))
			}
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			return string(b)
		}
	}
	return strings.TrimSpace(strings.Join(parts, "\n"))
}

// headerTransport adds fixed headers to each request.
type headerTransport struct{ h http.Header }

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(t.h) > 0 {
		r = r.Clone(r.Context())
		for k, vs := range t.h {
			for _, v := range vs {
				r.Header.Add(k, v)
			}
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}

// logWriter sends a stdio server's stderr to the log, line by line.
type logWriter struct {
	log  *slog.Logger
	prog string
	mu   sync.Mutex
	buf  []byte
}

func (l *logWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := slices.Index(l.buf, '\n')
		if i < 0 {
			break
		}
		if line := strings.TrimSpace(string(l.buf[:i])); line != "" {
			l.log.Debug("mcp server stderr", "server", l.prog, "line", line)
		}
		l.buf = l.buf[i+1:]
	}
	if len(l.buf) > 4096 {
		l.buf = l.buf[:0]
	}
	return len(p), nil
}
