package bus

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioa-nats/ioa/bus/auth"
	"github.com/ioa-nats/ioa/internal/backoff"
)

// DefaultListen is where the embedded server accepts clients, so that the
// nats CLI works with its own defaults.
const DefaultListen = "127.0.0.1:4222"

// NoListen as Config.Listen runs the embedded server with no network
// listener: only in-process connections reach it.
const NoListen = "none"

// Config says how to reach NATS. The zero value starts an embedded server on
// DefaultListen with its store in ./data.
type Config struct {
	// NATSURL, when set, connects to an existing server or cluster
	// (comma-separated URLs) instead of starting one.
	NATSURL string
	// CredsFile authenticates to an external server (a NATS .creds file).
	// An embedded secure server uses DataDir/creds/admin.creds when it is
	// empty.
	CredsFile string
	// Secure makes the embedded server require credentials: it trusts the
	// operator kept in DataDir/auth (created on first start) and every
	// identity gets only its role's subjects (package auth). The runtime's
	// own in-process connections use the admin credentials.
	Secure bool
	// NoProvision leaves the streams and buckets alone: only the runtime's
	// services (admin) provision them; agents and clients never do.
	NoProvision bool
	// InboxPrefix is where this connection's replies arrive; a non-admin
	// identity may only subscribe to auth.InboxPrefix(its name).
	InboxPrefix string
	// TLS, when CertFile is set, serves the client and websocket
	// listeners over TLS; CAFile alone makes connections to an external
	// server verify it against that CA.
	TLS TLS
	// DataDir holds the embedded server's JetStream store.
	DataDir string
	// Ephemeral stores JetStream in a fresh temporary directory that
	// Shutdown removes, instead of DataDir: for programs and tests that
	// embed a runtime for one run.
	Ephemeral bool
	// Listen is the embedded server's client address, host:port; "none" for
	// no listener, port 0 for a random one.
	Listen string
	// MonitorListen, when set, serves the NATS monitoring endpoints (host:port).
	MonitorListen string
	// WebsocketListen, when set, accepts websocket clients (host:port, no TLS).
	WebsocketListen string
	// Prefix is the first token of every subject; "ioa" by default.
	Prefix string
	// Replicas of streams and buckets; 1 by default, 3 on a cluster.
	// Provisioning never lowers the replicas of an existing stream.
	Replicas int
	// Retention bounds what the streams and the goal and chat buckets
	// keep.
	Retention Retention
	// MaxMessageBytes bounds request and message bodies; 64 KiB by default.
	MaxMessageBytes int
	// Name names the connection (shown by the server's monitoring).
	Name string
	// ServerName names the embedded server (stable across restarts). In a
	// cluster every node needs its own.
	ServerName string
	// Cluster, when Cluster.Listen is set, makes the embedded server a node
	// of a NATS cluster (routes between servers; JetStream clustered, so
	// Replicas can be up to the number of nodes). Only Start uses it.
	Cluster Cluster
	// Logger receives the bus's own logs; nil discards them.
	Logger *slog.Logger
}

// Retention bounds the runtime's stored state: each of IOA_CHATS,
// IOA_TASKS and IOA_GOALS drops messages older than MaxAge, and its oldest
// ones beyond MaxBytes; goal and chat records not written for MaxAge
// expire. Zero values mean no limit.
type Retention struct {
	MaxAge   time.Duration
	MaxBytes int64
}

// TLS configures certificates: the embedded server's (CertFile, KeyFile)
// and the CA that clients verify servers with (CAFile).
type TLS struct {
	CertFile string
	KeyFile  string
	CAFile   string
}

// AdminCredsFile is where a secure embedded server keeps the admin
// credentials, under its data dir.
func AdminCredsFile(dataDir string) string { return filepath.Join(dataDir, "creds", "admin.creds") }

// AuthDir is where a data dir keeps its operator, account and keys.
func AuthDir(dataDir string) string { return filepath.Join(dataDir, "auth") }

// Cluster joins an embedded server to a NATS cluster.
type Cluster struct {
	// Name is the cluster's name, the same on every node; "ioa" by default.
	Name string
	// Listen is where this node accepts routes from the others, host:port.
	Listen string
	// Routes are the other nodes' route URLs (nats-route://host:port); a
	// node's own URL in the list is ignored by the server.
	Routes []string
}

// provisionWait bounds how long Start and Connect retry provisioning while
// a cluster elects its JetStream meta leader and places the replicas.
const provisionWait = 60 * time.Second

// provisionAttempt bounds one pass of provisioning. It is short on purpose:
// when several processes create the same replicated stream at once,
// nats-server (2.15) answers only the first request and lets the others
// time out; the next pass finds the stream and updates it at once.
const provisionAttempt = 3 * time.Second

// storeRetries is how many more passes provisioning makes after the server
// could not create a stream's store (API error 10049). On a fresh store
// nats-server before 2.15.3 tidied the account's storage directory while it
// enabled JetStream (it removed an empty one), and a stream created at that
// moment failed with "mkdir …/streams: no such file or directory": one CI
// run of a first `ioa serve` start hit it. The embedded server is 2.15.3,
// which makes the directory first; an external one may be older. A store
// that cannot be made (a full disk, a read-only directory) still fails,
// after these passes.
const storeRetries = 3

func (c Config) withDefaults() Config {
	if c.Prefix == "" {
		c.Prefix = "ioa"
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = 64 << 10
	}
	if c.DataDir == "" {
		c.DataDir = "data"
	}
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.Name == "" {
		c.Name = "ioa"
	}
	if c.ServerName == "" {
		c.ServerName = "ioa"
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Bus is a connection to NATS with JetStream, and the embedded server when
// the bus started one.
type Bus struct {
	cfg      Config
	srv      *server.Server // nil when connected to an external server
	nc       *nats.Conn
	js       jetstream.JetStream
	subjects Subjects
	codec    Codec

	mu     sync.Mutex
	extra  []*nats.Conn
	closed bool
}

// Open starts an embedded server, or connects to cfg.NATSURL when it is set.
func Open(ctx context.Context, cfg Config) (*Bus, error) {
	if cfg.NATSURL != "" {
		return Connect(ctx, cfg)
	}
	return Start(ctx, cfg)
}

// Start runs nats-server in this process with JetStream on a file store
// under cfg.DataDir, connects to it over the in-process pipe and provisions
// the protocol's streams and buckets.
func Start(ctx context.Context, cfg Config) (_ *Bus, err error) {
	cfg = cfg.withDefaults()
	if cfg.Ephemeral {
		if cfg.DataDir, err = os.MkdirTemp("", "ioa-bus-"); err != nil {
			return nil, fmt.Errorf("bus: data dir: %w", err)
		}
		defer func() {
			if err != nil {
				os.RemoveAll(cfg.DataDir)
			}
		}()
	}
	opts := &server.Options{
		ServerName:         cfg.ServerName,
		JetStream:          true,
		StoreDir:           filepath.Join(cfg.DataDir, "jetstream"),
		NoSigs:             true,
		MaxPayload:         int32(max(cfg.MaxMessageBytes*2, 1<<20)),
		JetStreamMaxMemory: 256 << 20,
	}
	if cfg.Listen == NoListen {
		opts.DontListen = true
	} else {
		host, port, err := splitHostPort(cfg.Listen)
		if err != nil {
			return nil, fmt.Errorf("bus: listen: %w", err)
		}
		opts.Host, opts.Port = host, port
		if err := portFree(host, port); err != nil {
			return nil, fmt.Errorf("bus: cannot listen on %s: %w (is another ioa serve or nats-server running? use --listen with another port, or --nats-url to use that server)", cfg.Listen, err)
		}
	}
	if cfg.Cluster.Listen != "" {
		host, port, err := splitHostPort(cfg.Cluster.Listen)
		if err != nil {
			return nil, fmt.Errorf("bus: cluster listen: %w", err)
		}
		opts.Cluster.Name, opts.Cluster.Host, opts.Cluster.Port = cfg.Cluster.Name, host, port
		if opts.Cluster.Name == "" {
			opts.Cluster.Name = "ioa"
		}
		opts.Routes = server.RoutesFromStr(strings.Join(cfg.Cluster.Routes, ","))
	}
	if cfg.MonitorListen != "" {
		host, port, err := splitHostPort(cfg.MonitorListen)
		if err != nil {
			return nil, fmt.Errorf("bus: monitor listen: %w", err)
		}
		opts.HTTPHost, opts.HTTPPort = host, port
	}
	var tlsConf *tls.Config
	if cfg.TLS.CertFile != "" {
		if tlsConf, err = server.GenTLSConfig(&server.TLSConfigOpts{CertFile: cfg.TLS.CertFile, KeyFile: cfg.TLS.KeyFile, CaFile: cfg.TLS.CAFile}); err != nil {
			return nil, fmt.Errorf("bus: tls: %w", err)
		}
		opts.TLS, opts.TLSConfig, opts.TLSTimeout = true, tlsConf, 2
	}
	if cfg.WebsocketListen != "" {
		host, port, err := splitHostPort(cfg.WebsocketListen)
		if err != nil {
			return nil, fmt.Errorf("bus: websocket listen: %w", err)
		}
		opts.Websocket.Host, opts.Websocket.Port = host, port
		opts.Websocket.NoTLS = tlsConf == nil
		opts.Websocket.TLSConfig = tlsConf
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("bus: data dir: %w", err)
	}
	if cfg.Secure {
		if err := trustOperator(opts, &cfg); err != nil {
			return nil, err
		}
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("bus: embedded server: %w", err)
	}
	srv.SetLoggerV2(slogAdapter{cfg.Logger}, false, false, false)
	go srv.Start()
	if !waitReady(ctx, srv) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, fmt.Errorf("bus: embedded server not ready (is %s already in use? try --listen 127.0.0.1:0 or --nats-url)", cfg.Listen)
	}
	b := &Bus{cfg: cfg, srv: srv}
	if err := b.init(ctx); err != nil {
		b.shutdownServer()
		return nil, err
	}
	cfg.Logger.Info("embedded NATS started", "client_url", b.ClientURL(), "store", opts.StoreDir)
	return b, nil
}

// trustOperator puts the embedded server in operator mode: it trusts the
// data dir's operator (created on first start), resolves its two accounts
// from memory, and the bus's own connections use the admin credentials,
// written on first start.
func trustOperator(opts *server.Options, cfg *Config) error {
	a, err := auth.LoadOrCreate(AuthDir(cfg.DataDir))
	if err != nil {
		return fmt.Errorf("bus: %w", err)
	}
	res := &server.MemAccResolver{}
	for pub, tok := range a.AccountJWTs() {
		if err := res.Store(pub, tok); err != nil {
			return fmt.Errorf("bus: account %s: %w", pub, err)
		}
	}
	opts.TrustedOperators = []*jwt.OperatorClaims{a.Operator()}
	opts.AccountResolver = res
	opts.SystemAccount = a.SystemAccount()
	if cfg.CredsFile == "" {
		cfg.CredsFile = AdminCredsFile(cfg.DataDir)
		if _, err := os.Stat(cfg.CredsFile); errors.Is(err, os.ErrNotExist) {
			if err := a.WriteCreds(cfg.CredsFile, auth.Identity{Name: "admin", Role: auth.Admin}, cfg.Prefix); err != nil {
				return fmt.Errorf("bus: admin credentials: %w", err)
			}
		}
	}
	// The server writes its operator's account JWTs nowhere: an external
	// nats-server is told to trust the same operator with this fragment.
	if err := a.WriteServerConfig(); err != nil {
		return fmt.Errorf("bus: %w", err)
	}
	return nil
}

func waitReady(ctx context.Context, srv *server.Server) bool {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if srv.ReadyForConnections(100 * time.Millisecond) {
			return true
		}
	}
	return false
}

// Connect uses an existing NATS server or cluster at cfg.NATSURL and
// provisions the protocol's streams and buckets there.
func Connect(ctx context.Context, cfg Config) (*Bus, error) {
	cfg = cfg.withDefaults()
	if cfg.NATSURL == "" {
		return nil, errors.New("bus: connect: no NATS URL")
	}
	b := &Bus{cfg: cfg}
	if err := b.init(ctx); err != nil {
		return nil, err
	}
	return b, nil
}

func (b *Bus) init(ctx context.Context) error {
	b.subjects = Subjects{prefix: b.cfg.Prefix}
	b.codec = Codec{MaxBytes: b.cfg.MaxMessageBytes}
	nc, err := b.dial(b.cfg.Name)
	if err != nil {
		return err
	}
	b.nc = nc
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return fmt.Errorf("bus: jetstream: %w", err)
	}
	b.js = js
	if b.cfg.NoProvision {
		return nil
	}
	if err := b.provisionRetry(ctx); err != nil {
		nc.Close()
		return err
	}
	return nil
}

// provisionRetry provisions, retrying for up to provisionWait while
// JetStream is not ready: a cluster that is still forming has no meta
// leader, and replicated resources need enough peers to have joined. Each
// pass keeps what the ones before created, so passes make progress.
func (b *Bus) provisionRetry(ctx context.Context) error {
	deadline := time.Now().Add(provisionWait)
	pace := backoff.New(100*time.Millisecond, time.Second)
	storeFails := 0
	for {
		pctx, cancel := context.WithTimeout(ctx, provisionAttempt)
		err := b.provision(pctx)
		cancel()
		if err == nil {
			return nil
		}
		again := jetStreamNotReady(err)
		if storeCreateFailed(err) && storeFails < storeRetries {
			storeFails++
			again = true
		}
		if !again || time.Now().Add(pace.Pause()).After(deadline) {
			return err
		}
		b.cfg.Logger.Info("JetStream could not provision yet; provisioning again", "err", err, "in", pace.Pause())
		if !pace.Wait(ctx) {
			return err
		}
	}
}

// storeCreateFailed reports the server's "error creating store for stream".
func storeCreateFailed(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == 10049
}

// jetStreamNotReady reports errors that a forming cluster gives before it
// has a meta leader and enough peers.
func jetStreamNotReady(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) {
		return true
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case 10008, // JetStream system temporarily unavailable (no meta leader yet)
			10009, // cluster can not handle request
			10023: // insufficient resources (too few peers have joined)
			return true
		}
	}
	msg := err.Error()
	for _, s := range []string{"insufficient resources", "no meta leader", "no suitable peers", "temporarily unavailable"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

func (b *Bus) dial(name string, extra ...nats.Option) (*nats.Conn, error) {
	log := b.cfg.Logger
	opts := []nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.RetryOnFailedConnect(false),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("NATS disconnected", "conn", name, "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { log.Info("NATS reconnected", "conn", name, "url", nc.ConnectedUrl()) }),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subj := ""
			if sub != nil {
				subj = sub.Subject
			}
			log.Warn("NATS async error", "conn", name, "subject", subj, "err", err)
		}),
	}
	if b.srv != nil {
		opts = append(opts, nats.InProcessServer(inProcess{b.srv}))
		if b.cfg.TLS.CertFile != "" {
			// An in-memory pipe to this process's own server: there is no
			// network to verify the certificate against.
			opts = append(opts, nats.Secure(&tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12})) //nolint:gosec
		}
	}
	if b.cfg.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(b.cfg.CredsFile))
	}
	if b.cfg.InboxPrefix != "" {
		opts = append(opts, nats.CustomInboxPrefix(b.cfg.InboxPrefix))
	}
	if b.cfg.TLS.CAFile != "" && b.srv == nil {
		opts = append(opts, nats.RootCAs(b.cfg.TLS.CAFile))
	}
	opts = append(opts, extra...)
	url := b.cfg.NATSURL
	if b.srv != nil {
		url = b.srv.ClientURL()
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("bus: connect %s: %w", url, err)
	}
	return nc, nil
}

// NewConn opens another connection to the same NATS (in-process when the
// server is embedded). The bus closes it on Shutdown. Services use their own
// connection so that one's slow consumer cannot stall another.
func (b *Bus) NewConn(name string) (*nats.Conn, error) { return b.NewConnWith(name) }

// NewConnWith is NewConn with more options, which win over the bus's own:
// another identity's credentials and inbox prefix, for example.
func (b *Bus) NewConnWith(name string, opts ...nats.Option) (*nats.Conn, error) {
	nc, err := b.dial(name, opts...)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		nc.Close()
		return nil, errors.New("bus: closed")
	}
	b.extra = append(b.extra, nc)
	return nc, nil
}

// Conn is the bus's main connection.
func (b *Bus) Conn() *nats.Conn { return b.nc }

// JetStream is the JetStream context of the main connection.
func (b *Bus) JetStream() jetstream.JetStream { return b.js }

// Subjects builds this bus's subjects.
func (b *Bus) Subjects() Subjects { return b.subjects }

// Codec decodes request bodies with this bus's size limit.
func (b *Bus) Codec() Codec { return b.codec }

// Config returns the configuration with defaults filled in.
func (b *Bus) Config() Config { return b.cfg }

// Embedded reports whether the bus runs its own server.
func (b *Bus) Embedded() bool { return b.srv != nil }

// ClientURL is where other processes reach this NATS: the embedded server's
// listener, or the external URL. It is empty for an embedded server with no
// listener.
func (b *Bus) ClientURL() string {
	if b.srv == nil {
		return b.cfg.NATSURL
	}
	if b.cfg.Listen == NoListen {
		return ""
	}
	return b.srv.ClientURL()
}

// Server returns the embedded server, or nil.
func (b *Bus) Server() *server.Server { return b.srv }

// Shutdown drains every connection the bus opened, so in-flight messages are
// delivered, then stops the embedded server. It is safe to call twice.
func (b *Bus) Shutdown(ctx context.Context) error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	conns := append([]*nats.Conn{}, b.extra...)
	b.mu.Unlock()
	conns = append(conns, b.nc)
	var errs []error
	for _, nc := range conns {
		if err := Drain(ctx, nc); err != nil {
			errs = append(errs, err)
		}
	}
	b.shutdownServer()
	return errors.Join(errs...)
}

// Close is Shutdown with a short grace period.
func (b *Bus) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return b.Shutdown(ctx)
}

// Drain lets the replies and messages still in flight on nc go out, then
// closes it; past ctx's deadline it closes nc at once.
func Drain(ctx context.Context, nc *nats.Conn) error {
	if nc == nil || nc.IsClosed() {
		return nil
	}
	closed := make(chan struct{})
	nc.SetClosedHandler(func(*nats.Conn) { close(closed) })
	if err := nc.Drain(); err != nil {
		nc.Close()
		return nil
	}
	select {
	case <-closed:
		return nil
	case <-ctx.Done():
		nc.Close()
		return fmt.Errorf("bus: drain: %w", ctx.Err())
	}
}

func (b *Bus) shutdownServer() {
	if b.srv != nil {
		b.srv.Shutdown()
		b.srv.WaitForShutdown()
		if b.cfg.Ephemeral {
			os.RemoveAll(b.cfg.DataDir)
		}
	}
}

// portFree tells early, and clearly, that the client port is taken; the
// embedded server would only log it.
func portFree(host string, port int) error {
	if port <= 0 {
		return nil
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return err
	}
	return l.Close()
}

func splitHostPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("%q: want host:port", addr)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("%q: bad port", addr)
	}
	if port == 0 {
		port = -1 // nats-server's "random port"
	}
	return host, port, nil
}
