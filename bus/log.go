package bus

import (
	"context"
	"fmt"
	"log/slog"
)

// slogAdapter routes nats-server's logs to slog; debug and trace are dropped
// so the server does not flood the runtime's log.
type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) Noticef(format string, v ...any) { a.log(slog.LevelDebug, format, v...) }
func (a slogAdapter) Warnf(format string, v ...any)   { a.log(slog.LevelWarn, format, v...) }
func (a slogAdapter) Fatalf(format string, v ...any)  { a.log(slog.LevelError, format, v...) }
func (a slogAdapter) Errorf(format string, v ...any)  { a.log(slog.LevelError, format, v...) }
func (a slogAdapter) Debugf(string, ...any)           {}
func (a slogAdapter) Tracef(string, ...any)           {}

func (a slogAdapter) log(level slog.Level, format string, v ...any) {
	if a.l.Enabled(context.Background(), level) {
		a.l.Log(context.Background(), level, "nats-server: "+fmt.Sprintf(format, v...))
	}
}
