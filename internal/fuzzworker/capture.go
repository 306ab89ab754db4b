package fuzzworker

import (
	"flag"
	"fmt"
	"os"
	"testing"
)

// EnvLog names the path prefix of the workers' output files; each worker
// writes <prefix>.<pid>.
const EnvLog = "IOA_FUZZ_WORKER_LOG"

// Capture sends this process's standard output and error to
// $IOA_FUZZ_WORKER_LOG.<pid> if it is a fuzz worker and the variable is
// set, and does nothing otherwise (a plain go test, the fuzz coordinator).
// It takes any testing.TB so that its own test can call it; fuzz tests pass
// their *testing.F.
func Capture(f testing.TB) {
	prefix := os.Getenv(EnvLog)
	if prefix == "" || !isWorker() {
		return
	}
	if err := redirect(fmt.Sprintf("%s.%d", prefix, os.Getpid())); err != nil {
		f.Logf("fuzzworker: keeping the worker's output: %v", err)
	}
}

// isWorker reports whether go test started this process as a fuzz worker.
func isWorker() bool {
	fl := flag.Lookup("test.fuzzworker")
	return fl != nil && fl.Value.String() == "true"
}
