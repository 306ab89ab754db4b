package auth_test

import (
	"testing"

	"github.com/ioa-nats/ioa/bus/auth"
)

// No identity is issued for the referee's own name: on an outbox subject
// it would speak as the referee.
func TestCheckName(t *testing.T) {
	for name, ok := range map[string]bool{"alice": true, "calc-2": true, "system": false, "Alice": false, "a.b": false, "": false} {
		if err := auth.CheckName(name); (err == nil) != ok {
			t.Errorf("CheckName(%q) = %v, want ok=%v", name, err, ok)
		}
	}
}
