package bus

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
)

// slogAdapter routes nats-server's logs to slog; debug and trace are dropped
// so the server does not flood the runtime's log.
type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) Noticef(format string, v ...any) { a.log(slog.LevelDebug, format, v...) }
func (a slogAdapter) Warnf(format string, v ...any)   { a.log(slog.LevelWarn, format, v...) }
func (a slogAdapter) Fatalf(format string, v ...any)  { a.log(slog.LevelError, format, v...) }

// Errorf logs at error, but a client refused by its permissions at warn:
// the server did its job, nothing in it failed, and with credentials per
// identity every denied subscribe or publish was an ERROR line in the log.
func (a slogAdapter) Errorf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	level := slog.LevelError
	if strings.Contains(msg, "Permissions Violation") || strings.Contains(msg, "Subscription Violation") ||
		strings.Contains(msg, "Authorization Violation") {
		level = slog.LevelWarn
	}
	a.log(level, "%s", msg)
}
func (a slogAdapter) Debugf(string, ...any) {}
func (a slogAdapter) Tracef(string, ...any) {}

func (a slogAdapter) log(level slog.Level, format string, v ...any) {
	if a.l.Enabled(context.Background(), level) {
		a.l.Log(context.Background(), level, "nats-server: "+fmt.Sprintf(format, v...))
	}
}
