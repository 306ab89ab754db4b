// Package nodetest finds node and the npm packages of interop/node (the
// official A2A JavaScript SDK, an MCP server from npm) for the interop
// tests. `make tools` installs them. Without node the tests skip, unless
// IOA_REQUIRE_NODE is set (CI sets it), when they fail.
package nodetest

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// Dir is interop/node, the folder of package.json and node_modules.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "node")
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
