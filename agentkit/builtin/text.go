package builtin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/ioa-nats/ioa/agentkit"
)

// maxFileBytes bounds what the file workers read.
const maxFileBytes = 1 << 20

// fileRE is a file named in a task: a name with a text file's extension
// ("notes.txt", "sub/b.md"), or a path that starts at a folder ("/etc/passwd",
// "../x", "~/x"), which sandboxFile then refuses rather than ignores.
var fileRE = regexp.MustCompile(`(?:^|[\s"'(\x60])((?:~|\.{1,2})?/[\w\-./]*\w|[\w\-./]+\.(?:txt|md|csv|json|log|yaml|yml)\b)`)

// namedFile is a file read from the sandbox.
type namedFile struct {
	name string
	data []byte
}

// sandboxFiles reads every file named in the task's own text (its first
// paragraph) from the sandbox; when that names none, the first file its
// later paragraphs (earlier tasks' results) name, so that "count its
// words" after "read notes.txt" counts notes.txt. It fails on the first
// file it cannot read, and on paths that leave the sandbox.
func sandboxFiles(sandbox, text string) ([]namedFile, error) {
	own, rest, _ := strings.Cut(text, "\n\n")
	var names []string
	for _, m := range fileRE.FindAllStringSubmatch(own, -1) {
		if !slices.Contains(names, m[1]) {
			names = append(names, m[1])
		}
	}
	if m := fileRE.FindStringSubmatch(rest); len(names) == 0 && m != nil {
		names = append(names, m[1])
	}
	var files []namedFile
	for _, name := range names {
		path, data, err := sandboxFile(sandbox, name)
		if err != nil {
			return nil, err
		}
		files = append(files, namedFile{path, data})
	}
	return files, nil
}

// sandboxFile reads one file inside the sandbox and returns the path it
// read: a bare name that is not at the sandbox's top is looked for in its
// folders ("todo.md" for notes/todo.md), and read when exactly one file has
// that name.
func sandboxFile(sandbox, name string) (string, []byte, error) {
	if sandbox == "" {
		return "", nil, fmt.Errorf("no sandbox folder is configured to read %s from", name)
	}
	if !filepath.IsLocal(name) {
		return "", nil, fmt.Errorf("read %s: only files inside the sandbox folder %s can be read", name, sandbox)
	}
	root, err := os.OpenRoot(sandbox)
	if err != nil {
		return "", nil, fmt.Errorf("sandbox: %w", err)
	}
	defer root.Close()
	path := filepath.Clean(name)
	f, err := root.Open(path)
	if errors.Is(err, fs.ErrNotExist) && !strings.ContainsRune(path, filepath.Separator) {
		switch found := findInFolders(root.FS(), path); len(found) {
		case 0:
		case 1:
			path = found[0]
			f, err = root.Open(path)
		default:
			return "", nil, fmt.Errorf("read %s: %d files in the sandbox folder %s have that name (%s); name one with its folder", name, len(found), sandbox, strings.Join(found, ", "))
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil, fmt.Errorf("read %s: there is no such file in the sandbox folder %s", name, sandbox)
	}
	if err != nil {
		return "", nil, fmt.Errorf("read %s: %w", name, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return "", nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > maxFileBytes {
		return "", nil, fmt.Errorf("%s is larger than %d bytes", path, maxFileBytes)
	}
	return filepath.ToSlash(path), data, nil
}

// maxWalk bounds the entries findInFolders looks at: a sandbox is a working
// folder, not a disk to search.
const maxWalk = 10_000

// findInFolders lists the files named base in the folders of fsys, up to
// maxWalk entries in.
func findInFolders(fsys fs.FS, base string) []string {
	var found []string
	seen := 0
	_ = fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if seen++; err != nil || seen > maxWalk {
			return fs.SkipAll
		}
		if !d.IsDir() && d.Name() == base {
			found = append(found, p)
		}
		return nil
	})
	return found
}

type textStats struct{ sandbox string }

// statsWordRE is what a task asking for text statistics says: a task given
// to the text analyst by a loose match ("Translate this sentence into
// French") is refused rather than answered with counts that would pass for
// done.
var statsWordRE = regexp.MustCompile(`(?i)\b(count(s|ing)?|how\s+many|number\s+of|statistics|stats|frequen\w*|most\s+(?:common|often|used)|appears?\s+most|analy[sz]\w*|length|how\s+long)\b`)

func (w textStats) Run(_ context.Context, t agentkit.Task) (agentkit.Result, error) {
	own, _, _ := strings.Cut(t.TaskDesc, "\n\n")
	if !statsWordRE.MatchString(own) && !statsWordRE.MatchString(t.TaskAbstract) {
		return agentkit.Result{}, fmt.Errorf("%q does not ask for text statistics: the text analyst only counts words, sentences, lines and characters", firstLine(own))
	}
	files, err := sandboxFiles(w.sandbox, t.TaskDesc)
	if err != nil {
		return agentkit.Result{}, err
	}
	if len(files) == 0 && !quotedRE.MatchString(own) && !theWordRE.MatchString(own) {
		// "How many lines are in the todo list?"
		if files, err = fileNamedByStem(w.sandbox, own); err != nil {
			return agentkit.Result{}, err
		}
	}
	if len(files) == 0 {
		files = textsOf(t.TaskDesc)
	}
	stats := make([]string, len(files))
	for i, f := range files {
		stats[i] = f.name + ": " + textStatsOf(string(f.data))
	}
	return agentkit.Result{Conclusion: strings.Join(stats, "; ")}, nil
}

// quotedRE is a text in quotes: "…", “…”, or '…' opened after a space and
// closed before one (so that the apostrophes of "what's" quote nothing).
var quotedRE = regexp.MustCompile(`"([^"]+)"|“([^”]+)”|(?:^|\s)'([^'\n]+)'(?:[\s.,;:!?)]|$)`)

// theWordRE is a word a task names to analyse: "the letters in the word
// banana".
var theWordRE = regexp.MustCompile(`(?i)\bthe\s+(?:word|name)\s+([\p{L}\d'-]+)`)

// textsOf is what a task that names no file asks about: each text it
// quotes in its own paragraph ("How many characters are in "hello
// world"?"), else the word it names ("the word banana"), else what follows
// its first colon, else the task itself.
func textsOf(desc string) []namedFile {
	own, _, _ := strings.Cut(desc, "\n\n")
	var texts []namedFile
	for _, m := range quotedRE.FindAllStringSubmatch(own, -1) {
		q := m[1] + m[2] + m[3]
		texts = append(texts, namedFile{strconv.Quote(firstLine(q)), []byte(q)})
	}
	if len(texts) > 0 {
		return texts
	}
	if m := theWordRE.FindStringSubmatch(own); m != nil {
		return []namedFile{{strconv.Quote(m[1]), []byte(m[1])}}
	}
	text := desc
	if _, after, ok := strings.Cut(text, ":"); ok {
		text = after
	}
	return []namedFile{{"the text", []byte(text)}}
}

// sentenceRE ends a sentence; text after the last end is one more.
var sentenceRE = regexp.MustCompile(`[.!?]+(\s|$)`)

func textStatsOf(text string) string {
	words := strings.FieldsFunc(text, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '\'' })
	ends := sentenceRE.FindAllStringIndex(text, -1)
	sentences := len(ends)
	if tail := text; len(ends) > 0 {
		tail = text[ends[len(ends)-1][1]:]
		if strings.TrimSpace(tail) != "" {
			sentences++
		}
	} else if len(words) > 0 {
		sentences = 1
	}
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
	lines := strings.Count(strings.TrimRight(text, "\n"), "\n")
	if strings.TrimSpace(text) != "" {
		lines++
	}
	out := fmt.Sprintf("%s, %s, %s, %s", count(len(words), "word"), count(sentences, "sentence"), count(lines, "line"), count(len([]rune(text)), "character"))
	if len(top) > 0 {
		out += "; most frequent: " + strings.Join(top, ", ")
	}
	return out
}

type fileReader struct{ sandbox string }

func (w fileReader) Run(_ context.Context, t agentkit.Task) (agentkit.Result, error) {
	files, err := sandboxFiles(w.sandbox, t.TaskDesc)
	if err != nil {
		return agentkit.Result{}, err
	}
	own, _, _ := strings.Cut(t.TaskDesc, "\n\n")
	if len(files) == 0 && !listingRE.MatchString(own) {
		if files, err = fileNamedByStem(w.sandbox, own); err != nil { // "Open the todo list"
			return agentkit.Result{}, err
		}
	}
	if len(files) == 0 {
		return w.list(own)
	}
	out := make([]string, len(files))
	for i, f := range files {
		content := strings.TrimSpace(string(f.data))
		if len(content) > 2000 {
			content = content[:2000] + "…"
		}
		out[i] = f.name + ":\n" + content
	}
	return agentkit.Result{Conclusion: strings.Join(out, "\n\n")}, nil
}

// listingRE is a task that asks for a list of files, not for one of them.
var listingRE = regexp.MustCompile(`(?i)^\W*(?:list|ls)\b|\b(?:files|folders?|director(?:y|ies))\b`)

// list lists the sandbox's top, or the folder the task names ("list the
// files in notes"); a folder's name ends in "/".
func (w fileReader) list(own string) (agentkit.Result, error) {
	root, err := os.OpenRoot(w.sandbox)
	if err != nil {
		return agentkit.Result{}, errors.New("no file named in the task, and the sandbox cannot be listed")
	}
	defer root.Close()
	dir := "."
	words := strings.FieldsFunc(own, func(r rune) bool { return unicode.IsSpace(r) || strings.ContainsRune(",;:!?\"'", r) })
	for _, word := range slices.Backward(words) { // "list the files in notes": the last folder named
		word = strings.Trim(word, "./")
		if word == "" || !filepath.IsLocal(word) {
			continue
		}
		if fi, err := root.Stat(word); err == nil && fi.IsDir() {
			dir = filepath.Clean(word)
			break
		}
	}
	entries, err := fs.ReadDir(root.FS(), filepath.ToSlash(dir))
	if err != nil {
		return agentkit.Result{}, fmt.Errorf("list %s: %w", dir, err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name()+"/")
		} else {
			names = append(names, e.Name())
		}
	}
	where := "the sandbox folder " + w.sandbox
	if dir != "." {
		where = "the folder " + filepath.ToSlash(dir) + "/"
	}
	if len(names) == 0 { // "files: " read as a list cut short
		return agentkit.Result{Conclusion: where + " has no files"}, nil
	}
	if dir != "." {
		return agentkit.Result{Conclusion: "files in " + filepath.ToSlash(dir) + "/: " + strings.Join(names, ", ")}, nil
	}
	return agentkit.Result{Conclusion: "files: " + strings.Join(names, ", ")}, nil
}

// fileNamedByStem reads the one file at the sandbox's top whose name
// without its extension is a word of the task before any colon (after one
// comes the data: "count the words in: my notes" names no file); none when
// no file or several are.
func fileNamedByStem(sandbox, own string) ([]namedFile, error) {
	head, _, _ := strings.Cut(own, ": ")
	name, ok := fileByStem(sandbox, head)
	if !ok {
		return nil, nil
	}
	path, data, err := sandboxFile(sandbox, name)
	if err != nil {
		return nil, err
	}
	return []namedFile{{path, data}}, nil
}

// fileByStem is the one file at the sandbox's top whose name without its
// extension is a word of text ("todo" for todo.txt); ok is false when none
// or several are.
func fileByStem(sandbox, text string) (string, bool) {
	entries, err := os.ReadDir(sandbox)
	if err != nil {
		return "", false
	}
	words := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '-' && r != '_' }) {
		words[w] = true
	}
	var found []string
	for _, e := range entries {
		stem := strings.TrimSuffix(e.Name(), filepath.Ext(e.Name()))
		if !e.IsDir() && stem != e.Name() && words[strings.ToLower(stem)] {
			found = append(found, e.Name())
		}
	}
	if len(found) != 1 {
		return "", false
	}
	return found[0], true
}

// count writes n and its noun, plural unless n is 1.
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
