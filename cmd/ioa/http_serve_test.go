package main

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ioa-nats/ioa/configs"
	"github.com/ioa-nats/ioa/internal/stacktest"
)

func httpConfig(t *testing.T, listen string) *configs.Config {
	t.Helper()
	cfg, err := configs.Defaults()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Bus.DataDir, cfg.A2A.Listen = t.TempDir(), listen
	return cfg
}

func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// One listener serves the console and the A2A front door; off loopback the
// console answers nothing but its login page without the token.
func TestHTTPServesConsoleAndA2A(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{})
	f, err := startHTTP(httpConfig(t, "0.0.0.0:0"), s.Bus, slog.New(slog.DiscardHandler), nil)
	if err != nil || f == nil {
		t.Fatalf("startHTTP: %v", err)
	}
	t.Cleanup(func() { f.shutdown(t.Context()) })
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(f.base, "http://"))
	base := "http://127.0.0.1:" + port
	if f.loopback || f.consoleToken == "" || strings.Contains(f.consoleURL(), f.consoleToken) {
		t.Errorf("off loopback: loopback=%v token=%q url=%s (the URL must not carry the token)", f.loopback, f.consoleToken, f.consoleURL())
	}
	if code, body := get(t, base+"/", ""); code != 200 || !strings.Contains(body, "login-form") {
		t.Errorf("console page: %d", code)
	}
	if code, _ := get(t, base+"/api/goals", ""); code != 401 {
		t.Errorf("console API without the token: %d, want 401", code)
	}
	if code, body := get(t, base+"/api/goals", f.consoleToken); code != 200 || !strings.Contains(body, `"goals"`) {
		t.Errorf("console API with the token: %d %s", code, body)
	}
	if code, body := get(t, base+"/.well-known/agent-card.json", ""); code != 200 || !strings.Contains(body, `"name":"ioa"`) {
		t.Errorf("A2A card: %d %.200s", code, body)
	}
}

// The default address may be taken (another ioa serve): serve goes on
// without HTTP. An address asked for explicitly must be free.
func TestHTTPAddressTaken(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if _, err := startHTTP(httpConfig(t, ln.Addr().String()), s.Bus, slog.New(slog.DiscardHandler), nil); err == nil || !strings.Contains(err.Error(), "--http") {
		t.Errorf("an explicit address in use: %v, want an error naming --http", err)
	}
	if busy, err := net.Listen("tcp", defaultHTTP); err == nil {
		defer busy.Close()
	}
	// Whoever holds the default address, this one cannot have it.
	f, err := startHTTP(httpConfig(t, defaultHTTP), s.Bus, slog.New(slog.DiscardHandler), nil)
	if err != nil || f != nil {
		t.Errorf("the default address in use: %v %v, want no server and no error", f, err)
	}
	if got := httpListen(httpConfig(t, "none")); got != "" {
		t.Errorf("none: %q", got)
	}
}

// Several ioa serve starting on one data dir agree on one token.
func TestTokenCreatedOnce(t *testing.T) {
	file := filepath.Join(t.TempDir(), "creds", "console.token")
	toks := make(chan string, 8)
	for range 8 {
		go func() {
			tok, err := loadOrCreateToken(file)
			if err != nil {
				t.Error(err)
			}
			toks <- tok
		}()
	}
	first := <-toks
	for range 7 {
		if tok := <-toks; tok != first || len(tok) != 64 {
			t.Errorf("tokens differ: %q and %q", first, tok)
		}
	}
	if info, err := os.Stat(file); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("token file: %v %v", info, err)
	}
	if again, err := loadOrCreateToken(file); err != nil || again != first {
		t.Errorf("read again: %q %v", again, err)
	}
}
