package bus

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// A client refused by its permissions is a warning; the server's own
// errors stay errors.
func TestServerLogLevels(t *testing.T) {
	var buf bytes.Buffer
	a := slogAdapter{slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	a.Errorf("%s - %s", "cid:7", `Subscription Violation - User "ci", Subject "ioa.chat.>", SID 3`)
	a.Errorf(`%s - Permissions Violation for Publish to %q`, "cid:8", "ioa.goal.approve.ci")
	a.Errorf("Error writing to store: %v", "disk full")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{"level=WARN", "level=WARN", "level=ERROR"}
	if len(lines) != len(want) {
		t.Fatalf("logged %q", lines)
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("line %d = %q, want %s", i, lines[i], w)
		}
	}
}
