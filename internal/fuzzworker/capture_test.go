package fuzzworker

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// A panic on a goroutine of its own, in a process whose output was
// redirected, is written to the file: the case go test's fuzz workers hide.
func TestRedirectKeepsAFatalPanic(t *testing.T) {
	if path := os.Getenv("FUZZWORKER_TEST_PANIC"); path != "" {
		if err := redirect(path); err != nil {
			t.Fatal(err)
		}
		os.Stdout.WriteString("before the panic\n")
		done := make(chan struct{})
		go func() { panic("off the target's goroutine") }()
		<-done
	}
	if runtime.GOOS != "linux" {
		t.Skip("redirect does nothing here")
	}
	path := filepath.Join(t.TempDir(), "worker")
	cmd := exec.Command(os.Args[0], "-test.run=^TestRedirectKeepsAFatalPanic$")
	cmd.Env = append(os.Environ(), "FUZZWORKER_TEST_PANIC="+path)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the child did not die: %s", out)
	}
	if strings.Contains(string(out), "panic:") {
		t.Errorf("the panic went to the old stderr: %s", out)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"before the panic", "panic: off the target's goroutine", "goroutine "} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the file lacks %q:\n%s", want, b)
		}
	}
}

// Outside a fuzz worker, Capture leaves the output alone.
func TestCaptureOnlyInAWorker(t *testing.T) {
	if isWorker() {
		t.Fatal("a plain go test is not a fuzz worker")
	}
}
