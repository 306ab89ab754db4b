package builtin

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"unicode"

	"github.com/ioa-nats/ioa/agentkit"
)

// maxFileBytes bounds what the file workers read.
const maxFileBytes = 1 << 20

var fileRE = regexp.MustCompile(`[\w\-./]+\.(?:txt|md|csv|json|log|yaml|yml)\b`)

// sandboxFile finds a file named in the task and opens it inside the
// sandbox; paths that leave the sandbox are refused.
func sandboxFile(sandbox, text string) (string, []byte, error) {
	name := fileRE.FindString(text)
	if name == "" {
		return "", nil, nil
	}
	if sandbox == "" {
		return name, nil, fmt.Errorf("no sandbox folder is configured to read %s from", name)
	}
	root, err := os.OpenRoot(sandbox)
	if err != nil {
		return name, nil, fmt.Errorf("sandbox: %w", err)
	}
	defer root.Close()
	f, err := root.Open(filepath.Clean(name))
	if errors.Is(err, fs.ErrNotExist) {
		return name, nil, fmt.Errorf("read %s: there is no such file in the sandbox folder %s", name, sandbox)
	}
	if err != nil {
		return name, nil, fmt.Errorf("read %s: %w", name, err)
	}
	defer f.Close()
	buf := make([]byte, maxFileBytes+1)
	n, _ := f.Read(buf)
	for n < len(buf) {
		m, err := f.Read(buf[n:])
		n += m
		if err != nil || m == 0 {
			break
		}
	}
	if n > maxFileBytes {
		return name, nil, fmt.Errorf("%s is larger than %d bytes", name, maxFileBytes)
	}
	return name, buf[:n], nil
}

type textStats struct{ sandbox string }

func (w textStats) Run(_ context.Context, t agentkit.Task) (agentkit.Result, error) {
	name, data, err := sandboxFile(w.sandbox, t.TaskDesc)
	if err != nil {
		return agentkit.Result{}, err
	}
	text := string(data)
	if name == "" {
		// No file: the text is what follows a colon, or the task itself.
		text = t.TaskDesc
		if _, after, ok := strings.Cut(text, ":"); ok {
			text = after
		}
		name = "the text"
	}
	words := strings.FieldsFunc(text, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '\'' })
	sentences := len(regexp.MustCompile(`[.!?]+(\s|$)`).FindAllString(text, -1))
	freq := map[string]int{}
	for _, wd := range words {
		if len(wd) > 3 {
			freq[strings.ToLower(wd)]++
		}
	}
	top := make([]string, 0, len(freq))
	for wd := range freq {
		top = append(top, wd)
	}
	sort.Slice(top, func(i, j int) bool {
		if freq[top[i]] != freq[top[j]] {
			return freq[top[i]] > freq[top[j]]
		}
		return top[i] < top[j]
	})
	if len(top) > 3 {
		top = top[:3]
	}
	for i, wd := range top {
		top[i] = fmt.Sprintf("%s (%d)", wd, freq[wd])
	}
	return agentkit.Result{Conclusion: fmt.Sprintf("%s: %d words, %d sentences, %d characters; most frequent: %s",
		name, len(words), sentences, len([]rune(text)), strings.Join(top, ", "))}, nil
}

type fileReader struct{ sandbox string }

func (w fileReader) Run(_ context.Context, t agentkit.Task) (agentkit.Result, error) {
	name, data, err := sandboxFile(w.sandbox, t.TaskDesc)
	if err != nil {
		return agentkit.Result{}, err
	}
	if name == "" {
		entries, err := os.ReadDir(w.sandbox)
		if err != nil {
			return agentkit.Result{}, errors.New("no file named in the task, and the sandbox cannot be listed")
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return agentkit.Result{Conclusion: "files: " + strings.Join(names, ", ")}, nil
	}
	content := strings.TrimSpace(string(data))
	if len(content) > 2000 {
		content = content[:2000] + "…"
	}
	return agentkit.Result{Conclusion: name + ":\n" + content}, nil
}
