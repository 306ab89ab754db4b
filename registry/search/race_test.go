//go:build race

package search

// raceEnabled is true when the tests run with the race detector, which
// slows the index down about tenfold.
const raceEnabled = true
