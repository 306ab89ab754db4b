package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/bus/auth"
	"github.com/ioa-nats/ioa/configs"
	"github.com/ioa-nats/ioa/interop/a2a"
	"github.com/ioa-nats/ioa/telemetry"
)

// a2aFrontDoor is the A2A HTTP server of ioa serve.
type a2aFrontDoor struct {
	door      *a2a.Server
	srv       *http.Server
	done      chan error
	base      string // public base URL
	tokenFile string // "" when no token is required (--insecure)
}

// a2aTokenFile is where a data dir keeps the front door's bearer token.
func a2aTokenFile(dataDir string) string { return filepath.Join(dataDir, "creds", "a2a.token") }

// loadOrCreateToken reads the token file, or writes a new random token
// there (0600) on first start.
func loadOrCreateToken(file string) (string, error) {
	data, err := os.ReadFile(file)
	if err == nil {
		tok := strings.TrimSpace(string(data))
		if !a2a.ValidToken(tok) {
			return "", fmt.Errorf("a2a token file %s: the token must be 16 to 512 characters of A-Z a-z 0-9 . _ ~ + / = -", file)
		}
		return tok, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("a2a token file: %w", err)
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	tok := hex.EncodeToString(b[:])
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return "", fmt.Errorf("a2a token file: %w", err)
	}
	if err := os.WriteFile(file, []byte(tok+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("a2a token file: %w", err)
	}
	return tok, nil
}

// startA2A serves the A2A front door on cfg.A2A.Listen with its own
// connection of the server's (admin) identity; goals go in for the client
// identity cfg.A2A.As.
func startA2A(cfg *configs.Config, b *bus.Bus, log *slog.Logger, metrics *telemetry.Metrics) (*a2aFrontDoor, error) {
	as := cfg.A2A.As
	if as == "" {
		as = "a2a"
	}
	if err := auth.CheckName(as); err != nil {
		return nil, fmt.Errorf("a2a.as: %w", err)
	}
	f := &a2aFrontDoor{}
	var token string
	if !cfg.Bus.Insecure {
		f.tokenFile = cfg.A2A.TokenFile
		if f.tokenFile == "" {
			f.tokenFile = a2aTokenFile(cfg.Bus.DataDir)
		}
		var err error
		if token, err = loadOrCreateToken(f.tokenFile); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("tcp", cfg.A2A.Listen)
	if err != nil {
		return nil, fmt.Errorf("a2a.listen: %w", err)
	}
	f.base = cfg.A2A.PublicURL
	if f.base == "" {
		f.base = "http://" + ln.Addr().String()
	}
	nc, err := b.NewConn("ioa-a2a")
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	f.door, err = a2a.NewServer(a2a.ServerConfig{
		NC: nc, Subj: b.Subjects(), As: as, BaseURL: f.base, Token: token, Coordinator: cfg.Orchestrator.Coordinator,
		Version: version, Logger: log.With("service", "a2a"),
	})
	if err != nil {
		_ = ln.Close()
		nc.Close()
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/", f.door)
	mux.Handle("GET /metrics", metrics.Handler()) // Prometheus text format (package telemetry)
	f.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	f.srv.RegisterOnShutdown(nc.Close)
	f.done = make(chan error, 1)
	go func() { f.done <- f.srv.Serve(ln) }()
	return f, nil
}

func (f *a2aFrontDoor) shutdown(ctx context.Context) {
	f.door.Close()
	_ = f.srv.Shutdown(ctx)
	<-f.done
}
