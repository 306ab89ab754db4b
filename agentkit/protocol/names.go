package protocol

// Names match ^[a-z0-9][a-z0-9_-]{0,63}$ and ids ^[A-Za-z0-9_-]{1,64}$;
// they are checked byte by byte rather than with package regexp because
// every message checks several (a regexp match was 1.5% of a busy runtime's
// CPU).

// SystemSender is the sender the referee stamps on the messages it writes
// itself. No agent may register under this name (AgentCard.Validate), and
// no agent subject is built or parsed for it (bus.Subjects).
const SystemSender = "system"

// ValidName reports whether s is a legal agent name.
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > 64 || s[0] == '_' || s[0] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// ValidID reports whether s is a legal goal, chat, task or message id.
func ValidID(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// CheckName returns an ErrInvalid error naming the field when s is not a
// legal agent name.
func CheckName(field, s string) error {
	if !ValidName(s) {
		return Errorf(ErrInvalid, "%s %q is not a valid agent name (want ^[a-z0-9][a-z0-9_-]{0,63}$)", field, s)
	}
	return nil
}

// CheckID returns an ErrInvalid error naming the field when s is not a legal id.
func CheckID(field, s string) error {
	if !ValidID(s) {
		return Errorf(ErrInvalid, "%s %q is not a valid id (want ^[A-Za-z0-9_-]{1,64}$)", field, s)
	}
	return nil
}
