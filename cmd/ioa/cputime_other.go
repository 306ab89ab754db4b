//go:build !unix

package main

import "time"

// cpuTime cannot be read on this system.
func cpuTime() (time.Duration, bool) { return 0, false }
