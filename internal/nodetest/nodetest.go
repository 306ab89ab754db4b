// Package nodetest finds node and the npm packages of interop/node (the
// official A2A JavaScript SDK, an MCP server from npm) for the interop
// tests. `make tools` installs them. Without node the tests skip, unless
// IOA_REQUIRE_NODE is set (CI sets it), when they fail.
package nodetest

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// Dir is interop/node, the folder of package.json and node_modules.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "interop", "node")
}

// Require returns the node program and interop/node with its packages
// installed, or skips (fails under IOA_REQUIRE_NODE) the test.
func Require(t testing.TB) (node, dir string) {
	t.Helper()
	miss := t.Skipf
	if os.Getenv("IOA_REQUIRE_NODE") != "" {
		miss = t.Fatalf
	}
	node, err := exec.LookPath("node")
	if err != nil {
		miss("node is not installed (make tools installs the interop packages once node and npm are there)")
		return "", ""
	}
	dir = Dir()
	for _, p := range []string{"@a2a-js/sdk", "@modelcontextprotocol/server-filesystem", "express"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", p, "package.json")); err != nil {
			miss("npm package %s is not installed in %s: run make tools", p, dir)
			return "", ""
		}
	}
	return node, dir
}

// Start runs a script of interop/node with node until the test ends, and
// returns the port it printed ("listening <port>" on its first line).
func Start(t testing.TB, node, dir, script string, env ...string) int {
	t.Helper()
	cmd := exec.Command(node, filepath.Join(dir, script))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &syncWriter{w: &stderr}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", script, err)
	}
	t.Cleanup(func() {
		_ = stdin.Close() // the script exits when its stdin ends
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s stderr:\n%s", script, stderr.String())
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	var port int
	if _, perr := fmt.Sscanf(line, "listening %d", &port); err != nil || perr != nil {
		_ = cmd.Process.Kill()
		t.Fatalf("%s did not start (%q, %v): %s", script, line, err, stderr.String())
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	return port
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
