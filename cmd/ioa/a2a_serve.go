package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/bus/auth"
	"github.com/ioa-nats/ioa/configs"
	"github.com/ioa-nats/ioa/interop/a2a"
)

// a2aTokenFile is where a data dir keeps the front door's bearer token.
func a2aTokenFile(dataDir string) string { return filepath.Join(dataDir, "creds", "a2a.token") }

// loadOrCreateToken reads the token file, or writes a new random token
// there (0600) on first start.
func loadOrCreateToken(file string) (string, error) {
	data, err := os.ReadFile(file)
	if err == nil {
		tok := strings.TrimSpace(string(data))
		if !a2a.ValidToken(tok) {
			return "", fmt.Errorf("token file %s: the token must be 16 to 512 characters of A-Z a-z 0-9 . _ ~ + / = -", file)
		}
		return tok, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("token file: %w", err)
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	tok := hex.EncodeToString(b[:])
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	// Written aside and linked into place: several ioa serve starting on
	// one data dir never read a half-written token, and all use the first.
	tmp, err := os.CreateTemp(filepath.Dir(file), ".token-*")
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(tok + "\n")
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	if err := os.Link(tmp.Name(), file); err != nil {
		if errors.Is(err, os.ErrExist) {
			return loadOrCreateToken(file)
		}
		return "", fmt.Errorf("token file: %w", err)
	}
	return tok, nil
}

// newA2A builds the A2A front door for the HTTP server at base, with its
// own connection of the server's (admin) identity; goals go in for the
// client identity cfg.A2A.As. tokenFile is "" when no token is required
// (--insecure).
func newA2A(cfg *configs.Config, b *bus.Bus, base string, log *slog.Logger) (door *a2a.Server, nc *nats.Conn, tokenFile string, err error) {
	as := cfg.A2A.As
	if as == "" {
		as = "a2a"
	}
	if err := auth.CheckName(as); err != nil {
		return nil, nil, "", fmt.Errorf("a2a.as: %w", err)
	}
	var token string
	if !cfg.Bus.Insecure {
		tokenFile = cfg.A2A.TokenFile
		if tokenFile == "" {
			tokenFile = a2aTokenFile(cfg.Bus.DataDir)
		}
		if token, err = loadOrCreateToken(tokenFile); err != nil {
			return nil, nil, "", err
		}
	}
	nc, err = b.NewConn("ioa-a2a")
	if err != nil {
		return nil, nil, "", err
	}
	door, err = a2a.NewServer(a2a.ServerConfig{
		NC: nc, Subj: b.Subjects(), As: as, BaseURL: base, Token: token, Coordinator: cfg.Orchestrator.Coordinator,
		Version: version, Logger: log.With("service", "a2a"),
	})
	if err != nil {
		nc.Close()
		return nil, nil, "", err
	}
	return door, nc, tokenFile, nil
}
