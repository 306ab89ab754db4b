//go:build !unix

package worker

import "os/exec"

// killGroup: without process groups, cancellation kills the program only.
func killGroup(*exec.Cmd) {}
