package protocol

import "regexp"

var (
	nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)
	idRE   = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
)

// SystemSender is the sender the referee stamps on the messages it writes
// itself. No agent may register under this name.
const SystemSender = "system"

// ValidName reports whether s is a legal agent name.
func ValidName(s string) bool { return nameRE.MatchString(s) }

// ValidID reports whether s is a legal goal, chat, task or message id.
func ValidID(s string) bool { return idRE.MatchString(s) }

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
