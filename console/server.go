package console

import (
	"crypto/subtle"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
)

//go:embed static
var staticFiles embed.FS

// Config is what a console needs.
type Config struct {
	// NC is the console's NATS connection. Its identity must read the
	// streams and may publish anywhere (the admin's): the console speaks on
	// the goal subjects and on people's outboxes.
	NC       *nats.Conn
	Subjects bus.Subjects
	// Token grants the operator role (submit, cancel, answer as a person).
	// Empty means no login at all: everyone is an operator (ioa serve
	// --insecure).
	Token string
	// ViewWithoutLogin lets requests without the token read (the viewer
	// role); ioa serve sets it when it listens on a loopback address.
	// Otherwise every request without the token gets 401.
	ViewWithoutLogin bool
	// RequestTimeout bounds each request to the services (default 10s).
	RequestTimeout time.Duration
	Logger         *slog.Logger
}

// Server is the console: an http.Handler. Mount it at "/" of a mux, after
// any more specific routes (A2A, /metrics).
type Server struct {
	cfg  Config
	js   jetstream.JetStream
	mux  *http.ServeMux
	log  *slog.Logger
	done chan struct{}
	once sync.Once
}

// Role is what a request may do.
type Role string

const (
	RoleNone     Role = ""         // not logged in, and viewing needs a login
	RoleViewer   Role = "viewer"   // read only
	RoleOperator Role = "operator" // read, submit, cancel, answer as a person
)

// cookieName holds the token in the browser after a login.
const cookieName = "ioa_console"

// maxBody bounds a request body.
const maxBody = 1 << 20

// New checks cfg and returns the console.
func New(cfg Config) (*Server, error) {
	if cfg.NC == nil {
		return nil, errors.New("console: nil NATS connection")
	}
	if cfg.Subjects.Prefix() == "" {
		return nil, errors.New("console: no subject prefix")
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	js, err := jetstream.New(cfg.NC)
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	s := &Server{cfg: cfg, js: js, log: cfg.Logger, mux: http.NewServeMux(), done: make(chan struct{})}
	assets, err := fs.Sub(staticFiles, "static")
	if err != nil {
		return nil, err
	}
	files := http.FileServerFS(assets)
	s.mux.HandleFunc("GET /{$}", s.serveIndex)
	s.mux.Handle("GET /static/", http.StripPrefix("/static/", files))
	s.mux.HandleFunc("GET /api/me", s.serveMe)
	s.mux.HandleFunc("POST /api/login", s.serveLogin)
	s.mux.HandleFunc("POST /api/logout", s.serveLogout)
	s.mux.HandleFunc("GET /api/agents", s.read(s.serveAgents))
	s.mux.HandleFunc("GET /api/search", s.read(s.serveSearch))
	s.mux.HandleFunc("GET /api/goals", s.read(s.serveGoals))
	s.mux.HandleFunc("POST /api/goals", s.write(s.serveSubmit))
	s.mux.HandleFunc("GET /api/goals/{id}", s.read(s.serveGoal))
	s.mux.HandleFunc("POST /api/goals/{id}/cancel", s.write(s.serveCancel))
	s.mux.HandleFunc("POST /api/goals/{id}/approve", s.write(s.serveApprove))
	s.mux.HandleFunc("POST /api/goals/{id}/say", s.write(s.serveSay))
	s.mux.HandleFunc("POST /api/goals/{id}/tasks/{task}/result", s.write(s.serveTaskResult))
	s.mux.HandleFunc("GET /api/goals/{id}/live", s.read(s.serveGoalLive))
	s.mux.HandleFunc("GET /api/live", s.read(s.serveGoalsLive))
	s.mux.HandleFunc("GET /api/people", s.read(s.servePeople))
	s.mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		if allow := s.allowed(r); len(allow) > 0 {
			// This catch-all hides the mux's own 405 for a known path.
			w.Header().Set("Allow", strings.Join(allow, ", "))
			writeError(w, http.StatusMethodNotAllowed, "invalid", fmt.Sprintf("%s %s: use %s", r.Method, r.URL.Path, strings.Join(allow, " or ")))
			return
		}
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no API %s %s", r.Method, r.URL.Path))
	})
	return s, nil
}

// allowed lists the methods the API answers on r's path, if any.
func (s *Server) allowed(r *http.Request) []string {
	var out []string
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := s.mux.Handler(probe); pattern != "" && pattern != "/api/" {
			out = append(out, m)
		}
	}
	return out
}

// Routes lists the patterns the console answers, for a mux that also
// serves other things: mount each at the console.
func Routes() []string { return []string{"GET /{$}", "GET /static/", "/api/"} }

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "no-referrer")
	s.mux.ServeHTTP(w, r)
}

// Close ends the live streams (SSE) it serves.
func (s *Server) Close() { s.once.Do(func() { close(s.done) }) }

// RoleOf says what a request may do.
func (s *Server) RoleOf(r *http.Request) Role {
	if s.cfg.Token == "" {
		return RoleOperator
	}
	tok := ""
	if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") {
		tok = strings.TrimSpace(strings.TrimPrefix(h, "Bearer "))
	} else if c, err := r.Cookie(cookieName); err == nil {
		tok = c.Value
	}
	if tok != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(s.cfg.Token)) == 1 {
		return RoleOperator
	}
	return s.anonymous()
}

// anonymous is the role of a request without the token.
func (s *Server) anonymous() Role {
	switch {
	case s.cfg.Token == "":
		return RoleOperator
	case s.cfg.ViewWithoutLogin:
		return RoleViewer
	}
	return RoleNone
}

// wrongBearer says whether the request carries an Authorization token that
// is not the console's: a client sending one means to log in, and is told
// it failed rather than served as a viewer (or refused as one). A stale
// cookie is not checked: the page then shows its login.
func (s *Server) wrongBearer(r *http.Request) bool {
	h := r.Header.Get("Authorization")
	if s.cfg.Token == "" || h == "" {
		return false
	}
	tok, ok := strings.CutPrefix(h, "Bearer ")
	return !ok || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(tok)), []byte(s.cfg.Token)) != 1
}

const wrongTokenMsg = "the Authorization token is not this console's: use the console token that ioa serve printed (Authorization: Bearer TOKEN)"

func (s *Server) read(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.wrongBearer(r) {
			writeError(w, http.StatusUnauthorized, "unauthorized", wrongTokenMsg)
			return
		}
		if s.RoleOf(r) == RoleNone {
			writeError(w, http.StatusUnauthorized, "unauthorized", "log in with the console token that ioa serve printed (Authorization: Bearer TOKEN)")
			return
		}
		h(w, r)
	}
}

func (s *Server) write(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.wrongBearer(r) {
			writeError(w, http.StatusUnauthorized, "unauthorized", wrongTokenMsg)
			return
		}
		switch s.RoleOf(r) {
		case RoleNone:
			writeError(w, http.StatusUnauthorized, "unauthorized", "log in with the console token that ioa serve printed (Authorization: Bearer TOKEN)")
			return
		case RoleViewer:
			writeError(w, http.StatusForbidden, "forbidden", "viewers may only look; log in with the console token to submit, cancel or answer")
			return
		}
		// A JSON body cannot be sent cross-site without a CORS preflight,
		// which this server never grants; with the SameSite=Strict cookie
		// that stops CSRF. A request without a body needs no type.
		ct := r.Header.Get("Content-Type")
		if (ct != "" || r.ContentLength != 0) && !strings.HasPrefix(ct, "application/json") {
			writeError(w, http.StatusUnsupportedMediaType, "invalid", "send the body as Content-Type: application/json")
			return
		}
		h(w, r)
	}
}

func (s *Server) serveIndex(w http.ResponseWriter, r *http.Request) {
	// ?token=... (the URL ioa serve prints) logs in and is taken out of
	// the address bar at once.
	if tok := r.URL.Query().Get("token"); tok != "" {
		if s.cfg.Token != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(s.cfg.Token)) == 1 {
			s.setCookie(w, r, tok)
		}
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	data, err := staticFiles.ReadFile("static/index.html")
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
	_, _ = w.Write(data)
}

func (s *Server) setCookie(w http.ResponseWriter, r *http.Request, tok string) {
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: tok, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil, MaxAge: 30 * 24 * 3600,
	})
}

func (s *Server) serveMe(w http.ResponseWriter, r *http.Request) {
	role := s.RoleOf(r)
	writeJSON(w, http.StatusOK, map[string]any{
		"role": role, "can_write": role == RoleOperator, "login_required": s.cfg.Token != "", "prefix": s.cfg.Subjects.Prefix(),
	})
}

func (s *Server) serveLogin(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Token string `json:"token"`
	}
	if !decodeBody(w, r, &in) {
		return
	}
	if s.cfg.Token == "" {
		writeJSON(w, http.StatusOK, map[string]any{"role": RoleOperator})
		return
	}
	if subtle.ConstantTimeCompare([]byte(strings.TrimSpace(in.Token)), []byte(s.cfg.Token)) != 1 {
		writeError(w, http.StatusUnauthorized, "unauthorized", "wrong token")
		return
	}
	s.setCookie(w, r, s.cfg.Token)
	writeJSON(w, http.StatusOK, map[string]any{"role": RoleOperator})
}

func (s *Server) serveLogout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	writeJSON(w, http.StatusOK, map[string]any{"role": s.anonymous()})
}

// decodeBody reads a strict JSON body into v, or answers 400/413 itself.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("the body is over %d bytes", maxBody))
			return false
		}
		writeError(w, http.StatusBadRequest, "invalid", "the body is not the expected JSON: "+err.Error())
		return false
	}
	if _, err := dec.Token(); err != io.EOF {
		writeError(w, http.StatusBadRequest, "invalid", "the body has more than one JSON value")
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers {"error":{"code","message"}}, the shape of the
// services' errors on NATS.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

// writeServiceError passes a service's error on with its status.
func writeServiceError(w http.ResponseWriter, err error) {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		status := pe.Status
		if status < 400 || status > 599 {
			status = http.StatusBadGateway
		}
		writeError(w, status, pe.Code, pe.Message)
		return
	}
	writeError(w, http.StatusBadGateway, "unavailable", err.Error())
}
