package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/bus/auth"
	"github.com/ioa-nats/ioa/configs"
)

// Timeouts of the client commands: connecting must fail fast when nothing
// listens, and a request that nobody answers must not hang a script.
const (
	clientConnectTimeout = 2 * time.Second
	clientRequestTimeout = 10 * time.Second
)

// clientConn is a command's connection to a running ioa (ioa serve, or any
// NATS server the runtime uses).
type clientConn struct {
	nc   *nats.Conn
	subj bus.Subjects
	url  string
	cfg  *configs.Config
	id   auth.Identity // who the credentials speak for; the admin with none
	// The server's permissions violations come apart from the request they
	// refuse, which would only see no reply: requests in flight register
	// here (subject -> cancel) to end at once with the server's reason.
	mu       sync.Mutex
	inFlight map[string]context.CancelCauseFunc
}

// deniedError is a request the server refused to let these credentials send.
type deniedError struct{ msg string }

func (e deniedError) Error() string { return e.msg }

// refused ends the requests in flight on the subject a permissions
// violation names.
func (c *clientConn) refused(err error) {
	msg := err.Error()
	i := strings.IndexByte(msg, '"')
	j := strings.LastIndexByte(msg, '"')
	if i < 0 || j <= i {
		return
	}
	subject := msg[i+1 : j]
	c.mu.Lock()
	cancel := c.inFlight[subject]
	c.mu.Unlock()
	if cancel != nil {
		cancel(deniedError{fmt.Sprintf("the server refused %s (%s) to send on %s: %s", c.id.Name, c.id.Role, subject, strings.TrimPrefix(msg, "nats: permissions violation: "))})
	}
}

// whileAllowed is ctx, ended early if the server refuses subject.
func (c *clientConn) whileAllowed(ctx context.Context, subject string) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	c.mu.Lock()
	if c.inFlight == nil {
		c.inFlight = map[string]context.CancelCauseFunc{}
	}
	c.inFlight[subject] = cancel
	c.mu.Unlock()
	return ctx, func() {
		c.mu.Lock()
		delete(c.inFlight, subject)
		c.mu.Unlock()
		cancel(nil)
	}
}

// goalSubject is a goal endpoint's subject for this identity: the plain
// form for the admin (and an insecure server), the identity-bound form
// otherwise, which a secure server lets it use.
func (c *clientConn) goalSubject(endpoint string) string {
	subject := c.subj.Goal(endpoint)
	if c.id.Role == auth.Admin || c.id.Role == auth.Observer && endpoint != bus.GoalSubmit && endpoint != bus.GoalCancel {
		return subject
	}
	if bound, err := c.subj.As(subject, c.id.Name); err == nil {
		return bound
	}
	return subject
}

// streams reports whether the identity may read the runtime's streams (to
// follow a goal live); clients and agents may not.
func (c *clientConn) streams() bool { return c.id.Role == auth.Admin || c.id.Role == auth.Observer }

// credsFor picks the credentials of a command: --creds / $IOA_CREDS /
// bus.creds_file, else the admin credentials a local secure server keeps in
// its data dir, else none (an insecure server).
func credsFor(cfg *configs.Config) string {
	if cfg.Bus.CredsFile != "" {
		return cfg.Bus.CredsFile
	}
	if admin := bus.AdminCredsFile(cfg.Bus.DataDir); fileExists(admin) {
		return admin
	}
	return ""
}

// natsOptions are the connection options of credentials: the creds, the
// identity's own reply inboxes, and the CA a TLS server is checked with.
func natsOptions(cfg *configs.Config, creds string) ([]nats.Option, auth.Identity, error) {
	id := auth.Identity{Name: "admin", Role: auth.Admin}
	if creds != "" {
		var err error
		if id, err = auth.ReadIdentity(creds); err != nil {
			return nil, id, err
		}
	}
	opts, err := agentkit.CredsOptions(creds)
	if err != nil {
		return nil, id, err
	}
	if cfg.Bus.TLS.CAFile != "" {
		opts = append(opts, nats.RootCAs(cfg.Bus.TLS.CAFile))
	}
	return opts, id, nil
}

func fileExists(name string) bool {
	st, err := os.Stat(name)
	return err == nil && !st.IsDir()
}

// dialClient connects to the NATS of the configuration the command's flags
// select: bus.nats_url when set (--nats-url, $IOA_NATS_URL, $NATS_URL), else
// the embedded server's listener (bus.listen).
func dialClient(cmd *cobra.Command) (*clientConn, error) {
	cfg, err := loadConfig(cmd)
	if err != nil {
		return nil, err
	}
	url, err := clientURL(cfg)
	if err != nil {
		return nil, err
	}
	subj, err := bus.NewSubjects(cfg.Bus.Prefix)
	if err != nil {
		return nil, err
	}
	creds := credsFor(cfg)
	copts, id, err := natsOptions(cfg, creds)
	if err != nil {
		return nil, err
	}
	c := &clientConn{subj: subj, url: url, cfg: cfg, id: id}
	opts := append([]nats.Option{nats.Name("ioa-cli"), nats.Timeout(clientConnectTimeout),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrPermissionViolation) {
				c.refused(err)
				return
			}
			fmt.Fprintf(os.Stderr, "ioa: nats: %v\n", err)
		}),
		// A command following a goal would otherwise sit silent while the
		// server is away: say so, and when it is back.
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				fmt.Fprintf(os.Stderr, "ioa: lost the connection to NATS at %s (%v); reconnecting…\n", url, err)
			}
		}),
		nats.ReconnectHandler(func(*nats.Conn) {
			fmt.Fprintf(os.Stderr, "ioa: reconnected to NATS at %s\n", url)
		})}, copts...)
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		if errors.Is(err, nats.ErrNoServers) || isDialError(err) {
			return nil, fmt.Errorf("cannot reach NATS at %s: is \"ioa serve\" running? (or pass --nats-url)", url)
		}
		if errors.Is(err, nats.ErrAuthorization) || strings.Contains(strings.ToLower(err.Error()), "authorization") {
			if creds == "" {
				return nil, fmt.Errorf("NATS at %s requires credentials: pass --creds FILE (ioa serve wrote the admin's to <data-dir>/creds/admin.creds; ioa agent add makes others)", url)
			}
			return nil, fmt.Errorf("NATS at %s refused the credentials in %s: were they issued by this server's data dir?", url, creds)
		}
		return nil, fmt.Errorf("cannot connect to NATS at %s: %v", url, err)
	}
	c.nc = nc
	return c, nil
}

func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op)
}

// clientURL is where a client finds the runtime's NATS.
func clientURL(cfg *configs.Config) (string, error) {
	if cfg.Bus.NATSURL != "" {
		return cfg.Bus.NATSURL, nil
	}
	listen := cfg.Bus.Listen
	if listen == "" {
		listen = bus.DefaultListen
	}
	if listen == bus.NoListen {
		return "", errors.New("the embedded server has no listener (bus.listen is \"none\"): pass --nats-url")
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("bus.listen %q is not host:port", listen)
	}
	switch host {
	case "", "0.0.0.0", "::":
		host = "127.0.0.1" // a wildcard listener is reached on loopback
	}
	return "nats://" + net.JoinHostPort(host, port), nil
}

// Close ends the connection.
func (c *clientConn) Close() { c.nc.Close() }

// request sends a request to a runtime service and decodes its reply; errors
// come back as one line a person can act on.
func (c *clientConn) request(ctx context.Context, subject string, in, out any) error {
	return c.requestWithin(ctx, clientRequestTimeout, subject, in, out)
}

// requestWithin is request with its own timeout.
func (c *clientConn) requestWithin(ctx context.Context, timeout time.Duration, subject string, in, out any) error {
	ctx, done := c.whileAllowed(ctx, subject)
	defer done()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return c.explain(ctx, subject, timeout, bus.Request(ctx, c.nc, subject, in, out))
}

// submit sends a goal without wait. It always carries an idempotency key
// (a random one unless the user gave one), so a request or answer lost on
// the way is sent again within the timeout instead of waited for.
func (c *clientConn) submit(ctx context.Context, req protocol.GoalRequest, out *protocol.SubmitReply) error {
	if req.IdempotencyKey == "" {
		req.IdempotencyKey = rand.Text()
	}
	return c.requestAgain(ctx, c.goalSubject(bus.GoalSubmit), clientRequestTimeout, clientRequestTimeout/4, req, out)
}

// requestAgain is requestWithin for a request safe to send twice: one
// whose answer has not come within each is sent again (bus.RequestAgain).
func (c *clientConn) requestAgain(ctx context.Context, subject string, timeout, each time.Duration, in, out any) error {
	ctx, done := c.whileAllowed(ctx, subject)
	defer done()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return c.explain(ctx, subject, timeout, bus.RequestAgain(ctx, c.nc, subject, each, in, out))
}

// explain turns a request's error into one for people; ctx is the
// request's, whose cause says whether the server refused it.
func (c *clientConn) explain(ctx context.Context, subject string, timeout time.Duration, err error) error {
	var pe *protocol.Error
	var denied deniedError
	switch {
	case err == nil:
		return nil
	case errors.As(context.Cause(ctx), &denied):
		return denied
	case errors.Is(err, protocol.ErrUnavailable):
		return fmt.Errorf("no service answers on %s at %s: is \"ioa serve\" running there, and ready (ioa serve --check)?", subject, c.url)
	case errors.As(err, &pe) && pe.Message != "":
		return plainError{pe.Message, err}
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("no reply on %s within %s", subject, timeout)
	}
	return err
}

// plainError shows a protocol error by its message alone, for people, and
// keeps its code for errors.Is.
type plainError struct {
	msg string
	err error
}

func (e plainError) Error() string { return e.msg }
func (e plainError) Unwrap() error { return e.err }

// writeJSON prints v as indented JSON, for scripts.
func writeJSON(w io.Writer, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", data)
	return err
}

// isTerminal reports whether w is a terminal; colour and rewritten progress
// lines are for people, never for pipes and files.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// renderOptionsFor picks the output style for w: colour and a live progress
// line on a terminal (colour unless NO_COLOR is set), plain lines elsewhere.
func renderOptionsFor(w io.Writer) renderOptions {
	tty := isTerminal(w)
	opt := renderOptions{Live: tty, Color: tty && os.Getenv("NO_COLOR") == "", Width: 120}
	if tty {
		opt.Width = 100
		if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n >= 40 {
			opt.Width = n
		}
	}
	return opt
}

// show asks one service for one record and prints it as JSON or, for
// people, with write: the shape of `ioa agents get` and `ioa goals get`.
func show[T any](cmd *cobra.Command, asJSON bool, subject func(*clientConn) string, req any, write func(io.Writer, palette, T)) error {
	c, err := dialClient(cmd)
	if err != nil {
		return err
	}
	defer c.Close()
	var v T
	if err := c.request(cmd.Context(), subject(c), req, &v); err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if asJSON {
		return writeJSON(out, v)
	}
	write(out, palette{renderOptionsFor(out).Color}, v)
	return nil
}
