//go:build !unix

package main

import (
	"runtime/metrics"
	"time"
)

// processCPU is the CPU time this process has used, as the Go runtime
// estimates it (all CPU time less idle).
func processCPU() time.Duration {
	s := []metrics.Sample{{Name: "/cpu/classes/total:cpu-seconds"}, {Name: "/cpu/classes/idle:cpu-seconds"}}
	metrics.Read(s)
	return time.Duration((s[0].Value.Float64() - s[1].Value.Float64()) * float64(time.Second))
}
