package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/configs"
	"github.com/ioa-nats/ioa/console"
	"github.com/ioa-nats/ioa/interop/a2a"
	"github.com/ioa-nats/ioa/telemetry"
)

// defaultHTTP is where ioa serve listens for HTTP unless told otherwise
// (--http, a2a.listen, $IOA_HTTP_LISTEN; "" or "none" turn it off).
const defaultHTTP = "127.0.0.1:8080"

// httpFrontDoor is the HTTP server of ioa serve: the web console at / and
// the A2A front door at its paths. mux is where more routes go (/metrics).
type httpFrontDoor struct {
	mux  *http.ServeMux
	srv  *http.Server
	done chan error
	base string // public base URL
	// loopback says the listener is on a loopback address and not
	// published under another URL: only this machine reaches it.
	loopback bool

	door      *a2a.Server
	tokenFile string // the A2A bearer token's file; "" when none is required (--insecure)

	console          *console.Server
	consoleToken     string // "" when the console needs no login (--insecure)
	consoleTokenFile string
	conns            []*nats.Conn
}

// consoleTokenFile is where a data dir keeps the console's login token.
func consoleTokenFile(dataDir string) string {
	return filepath.Join(dataDir, "creds", "console.token")
}

// httpListen is the configured HTTP address, "" when HTTP is off.
func httpListen(cfg *configs.Config) string {
	if cfg.A2A.Listen == "none" {
		return ""
	}
	return cfg.A2A.Listen
}

// isLoopback reports whether a listener's host is a loopback address.
func isLoopback(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// startHTTP serves the console, the A2A front door and /metrics on
// cfg.A2A.Listen.
// When the address is the default one and it is taken (another ioa serve
// on this machine), it logs that and returns nil, nil: HTTP is a
// convenience there, not a reason to fail.
func startHTTP(cfg *configs.Config, b *bus.Bus, log *slog.Logger, metrics *telemetry.Metrics) (_ *httpFrontDoor, err error) {
	addr := httpListen(cfg)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if addr == defaultHTTP {
			log.Warn("web console and A2A off: the default HTTP address is taken; choose another with --http HOST:PORT", "addr", addr, "err", err)
			return nil, nil
		}
		return nil, fmt.Errorf("--http (a2a.listen) %s: %w", addr, err)
	}
	// A loopback listener behind a proxy (a2a.public_url set) is reached
	// from elsewhere: it gets the login of any other address.
	f := &httpFrontDoor{mux: http.NewServeMux(), loopback: isLoopback(ln.Addr()) && cfg.A2A.PublicURL == ""}
	defer func() {
		if err != nil {
			_ = ln.Close()
			f.closeConns()
		}
	}()
	f.base = cfg.A2A.PublicURL
	if f.base == "" {
		f.base = "http://" + ln.Addr().String()
	}
	door, nc, tokenFile, err := newA2A(cfg, b, f.base, log)
	if err != nil {
		return nil, err
	}
	f.door, f.tokenFile = door, tokenFile
	f.conns = append(f.conns, nc)

	if !cfg.Bus.Insecure {
		f.consoleTokenFile = consoleTokenFile(cfg.Bus.DataDir)
		if f.consoleToken, err = loadOrCreateToken(f.consoleTokenFile); err != nil {
			return nil, err
		}
	}
	cnc, err := b.NewConn("ioa-console")
	if err != nil {
		return nil, err
	}
	f.conns = append(f.conns, cnc)
	f.console, err = console.New(console.Config{
		NC: cnc, Subjects: b.Subjects(), Token: f.consoleToken,
		// On loopback only this machine's users reach it: they may look
		// without the token; acting always needs it.
		ViewWithoutLogin: f.loopback,
		Logger:           log.With("service", "console"),
	})
	if err != nil {
		return nil, err
	}
	for _, p := range console.Routes() {
		f.mux.Handle(p, f.console)
	}
	f.mux.Handle("GET /metrics", metrics.Handler()) // Prometheus text format (package telemetry)
	// Everything else is the A2A front door's (/.well-known/..., /a2a,
	// /agents/...).
	f.mux.Handle("/", f.door)

	f.srv = &http.Server{Handler: f.mux, ReadHeaderTimeout: 10 * time.Second}
	f.done = make(chan error, 1)
	go func() { f.done <- f.srv.Serve(ln) }()
	return f, nil
}

// consoleURL is the address to open: with the token on loopback, so the
// person who started ioa serve is logged in by opening it.
func (f *httpFrontDoor) consoleURL() string {
	if f.consoleToken != "" && f.loopback {
		return f.base + "/?token=" + f.consoleToken
	}
	return f.base + "/"
}

func (f *httpFrontDoor) closeConns() {
	for _, nc := range f.conns {
		nc.Close()
	}
}

func (f *httpFrontDoor) shutdown(ctx context.Context) {
	if f.console != nil {
		f.console.Close() // ends the live streams, which Shutdown would wait for
	}
	if f.door != nil {
		f.door.Close()
	}
	if f.srv != nil {
		_ = f.srv.Shutdown(ctx)
		if err := <-f.done; err != nil && !errors.Is(err, http.ErrServerClosed) {
			slog.Default().Debug("http server", "err", err)
		}
	}
	f.closeConns()
}
