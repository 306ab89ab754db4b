// Package builtin holds the Go workers compiled into the ioa binary, so a
// configuration can give an agent real skills without a model or a program
// of its own: arithmetic, unit conversion, text statistics, reading files
// from a sandbox folder and writing a Markdown report from earlier results.
// The demo team is made of them.
//
// The calculator and the unit converter answer every expression or
// conversion in the task's own text (its first paragraph; later ones carry
// earlier tasks' results), joined by "; ", so that a task asking for two
// things is not reported done having answered one.
package builtin
