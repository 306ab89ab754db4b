// Package fuzzworker keeps what a fuzz worker prints.
//
// go test -fuzz runs the target in worker processes whose output it
// discards. A panic on the target's own goroutine is recovered and
// reported with its input, but one on any other goroutine (a service the
// target started, a library's worker) kills the worker, and all go test
// says is "fuzzing process hung or terminated unexpectedly", with an input
// that may well pass when run alone. Capture, called at the top of a fuzz
// test, sends the worker's standard output and error to a file of its own
// when IOA_FUZZ_WORKER_LOG names a path prefix (scripts/fuzz.sh sets it and
// prints the files when a target fails), so the panic can be read.
package fuzzworker
