package search

import "regexp"

// A task names files ("Count the words in notes.txt", "Read sub/b.md"). A
// file's name is the task's data, not a skill, and its extension is a word
// no card holds; both would only skew a match.

var (
	// fileNameRE is a file's name by its extension; group 1 is the name
	// without it.
	fileNameRE = regexp.MustCompile(`(?i)\b([\w\-]+)\.(?:txt|md|csv|tsv|json|log|ya?ml|xml|html?|pdf|docx?|xlsx?|ini|toml)\b`)
	// pathRE is a word with a folder in it ("sub/b.md", "/etc/hosts").
	pathRE = regexp.MustCompile(`\S*/\S*`)
)

// withFileWord writes the word "file" for the extension of each file name
// of a query: "Read sub/b.md" asks for a file, and no card says "md" (the
// extension only diluted the match). The name's own words stay; readings
// also searches the text without them.
func withFileWord(text string) string {
	return fileNameRE.ReplaceAllString(text, "$1 file")
}

// withoutFileNames leaves out the paths and file names of a task that an
// agent concluded, before the registry learns its words (learnedText).
func withoutFileNames(text string) string {
	return fileNameRE.ReplaceAllString(pathRE.ReplaceAllString(text, " "), " ")
}
