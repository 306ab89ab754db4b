// Package protocol is the IoA-on-NATS wire contract in Go: the payload types
// of docs/protocol.md, validation of agent names and ids, the error codes carried on
// the wire, and the chat state machine as one pure function, Apply.
//
// It is a leaf package: it imports nothing from this module and reads no clock
// and no random source, so the referee and every agent can fold the same chat
// log to the same state.
package protocol
