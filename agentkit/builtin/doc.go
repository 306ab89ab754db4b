// Package builtin holds the Go workers compiled into the ioa binary, so a
// configuration can give an agent real skills without a model or a program
// of its own: arithmetic, unit conversion, text statistics, reading files
// from a sandbox folder and writing a Markdown report from earlier results.
// The demo team is made of them.
package builtin
