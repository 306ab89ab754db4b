// Package faulttest holds the runtime's fault, abuse and soak tests: crash
// targets run as child processes (the ioa binary) so that they can be
// killed with SIGKILL or stopped with SIGSTOP, while the test checks from
// outside that no acknowledged message is lost or logged twice and that
// every goal ends. It has no code of its own; run the group with
//
//	go test -race -run TestFault ./faulttest
//
// and the soak with
//
//	go test ./faulttest -run TestSoak -soak=10m -soak-goals=50 -v
package faulttest
