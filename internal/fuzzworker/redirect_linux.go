package fuzzworker

import (
	"os"
	"syscall"
)

// redirect points file descriptors 1 and 2 at path, so that what the Go
// runtime writes there on a fatal panic (it writes to the descriptor, not
// to os.Stderr) lands in the file.
func redirect(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, fd := range []int{1, 2} {
		if err := syscall.Dup3(int(f.Fd()), fd, 0); err != nil {
			return err
		}
	}
	return nil
}
