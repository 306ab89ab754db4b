package fuzzworker

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// A fuzz worker's panic on a goroutine of its own is written to its file:
// the case go test's fuzz workers hide. The child process is this test
// binary, told it is a fuzz worker by the flag go test sets for one.
func TestCaptureKeepsAWorkersFatalPanic(t *testing.T) {
	if os.Getenv("FUZZWORKER_TEST_CHILD") != "" {
		if err := flag.Set("test.fuzzworker", "true"); err != nil {
			t.Fatal(err)
		}
		Capture(t)
		os.Stdout.WriteString("before the panic\n")
		done := make(chan struct{})
		go func() { panic("off the target's goroutine") }()
		<-done
	}
	if runtime.GOOS != "linux" {
		t.Skip("Capture does nothing here")
	}
	prefix := filepath.Join(t.TempDir(), "worker")
	cmd := exec.Command(os.Args[0], "-test.run=^TestCaptureKeepsAWorkersFatalPanic$")
	cmd.Env = append(os.Environ(), "FUZZWORKER_TEST_CHILD=1", EnvLog+"="+prefix)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the child did not die: %s", out)
	}
	if strings.Contains(string(out), "panic:") {
		t.Errorf("the panic went to the old stderr: %s", out)
	}
	b, err := os.ReadFile(fmt.Sprintf("%s.%d", prefix, cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"before the panic", "panic: off the target's goroutine", "goroutine "} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the file lacks %q:\n%s", want, b)
		}
	}
}

// Outside a fuzz worker (a plain go test, the fuzz coordinator), Capture
// leaves the output alone even with the variable set.
func TestCaptureOnlyInAWorker(t *testing.T) {
	prefix := filepath.Join(t.TempDir(), "worker")
	t.Setenv(EnvLog, prefix)
	Capture(t)
	if _, err := os.Stat(fmt.Sprintf("%s.%d", prefix, os.Getpid())); !os.IsNotExist(err) {
		t.Fatalf("a plain go test redirected its output (stat: %v)", err)
	}
}
