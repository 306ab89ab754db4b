package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRegistryEvalBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		// The default worlds are found from the repository's root only.
		{[]string{"registry", "eval"}, "run from the repository's root"},
		{[]string{"registry", "eval", "--agents", "a.jsonl"}, "--agents and --queries go together"},
		{[]string{"registry", "eval", "--world", t.TempDir()}, "agents.jsonl"},
	} {
		root := newRootCmd()
		root.SetArgs(c.args)
		root.SetOut(new(bytes.Buffer))
		root.SetErr(new(bytes.Buffer))
		if err := root.ExecuteContext(t.Context()); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error with %q", c.args, err, c.want)
		}
	}
}

// A small slice of the dev set runs end to end through the command.
func TestRegistryEval(t *testing.T) {
	dev := "../../registry/search/testdata/discovery-dev"
	dir := t.TempDir()
	agents, names := jsonlHead(t, filepath.Join(dev, "agents.jsonl"), 30, nil)
	queries, _ := jsonlHead(t, filepath.Join(dev, "queries.jsonl"), 20, func(line map[string]any) bool { return names[line["gold"].(string)] })
	ap, qp := filepath.Join(dir, "agents.jsonl"), filepath.Join(dir, "queries.jsonl")
	for p, data := range map[string][]byte{ap: agents, qp: queries} {
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out, errOut bytes.Buffer
	root := newRootCmd()
	// Twice: as one world's files and as a world directory.
	root.SetArgs([]string{"registry", "eval", "--agents", ap, "--queries", qp})
	root.SetOut(&out)
	root.SetErr(&errOut)
	if err := root.ExecuteContext(t.Context()); err != nil {
		t.Fatalf("eval: %v\n%s", err, errOut.String())
	}
	root = newRootCmd()
	root.SetArgs([]string{"registry", "eval", "--world", dir})
	root.SetOut(&out)
	root.SetErr(&errOut)
	if err := root.ExecuteContext(t.Context()); err != nil {
		t.Fatalf("eval --world: %v\n%s", err, errOut.String())
	}
	if n := strings.Count(out.String(), "30 agents, 20 queries"); n != 2 {
		t.Errorf("%d tables, want 2:\n%s", n, out.String())
	}
	if !strings.Contains(out.String(), "== "+filepath.Base(dir)) {
		t.Errorf("no heading for the world:\n%s", out.String())
	}
	for _, want := range []string{"30 agents, 20 queries", "ioa-registry (via NATS)", "BM25 baseline", "overall", "Top@1", "MRR"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if !strings.Contains(errOut.String(), "search   20/20") {
		t.Errorf("no progress on stderr: %q", errOut.String())
	}
}

// jsonlHead returns up to n lines of a jsonl file that keep accepts, and the
// names they carry.
func jsonlHead(t *testing.T, path string, n int, keep func(map[string]any) bool) ([]byte, map[string]bool) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out bytes.Buffer
	names := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() && len(names) < n {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatal(err)
		}
		if keep != nil && !keep(line) {
			continue
		}
		name, _ := line["name"].(string)
		if name == "" {
			name, _ = line["id"].(string)
		}
		names[name] = true
		out.Write(sc.Bytes())
		out.WriteByte('\n')
	}
	return out.Bytes(), names
}
