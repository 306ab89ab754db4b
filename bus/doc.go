// Package bus is the runtime's connection to NATS: it starts nats-server
// in-process with JetStream (Start) or connects to an existing server or
// cluster (Connect), creates the streams and KV buckets of the protocol
// idempotently, builds subjects from validated tokens, and decodes and
// answers requests with the protocol's strict JSON and error conventions.
//
// Everything above this package sees the same *Bus whether NATS runs in the
// process or elsewhere. With the embedded server, connections go through
// memory, with writes buffered in front of the server's pipe (inProcess):
// nats.go writes while it holds the connection's lock, and a write to a pipe
// waits for the server to read it.
//
// The codec's JSON is github.com/segmentio/encoding/json: the encoding/json
// API, behaviour and error types (aliases), three to four times faster at
// decoding the protocol's messages. Every logged message is decoded by each
// member of its chat, so this was a tenth of the CPU of a goal. For the same
// reason PublishAcked stores a message in a stream and decodes the
// acknowledgement with that codec: the jetstream client's PublishMsg decodes
// it with encoding/json, half of a chat append's CPU.
package bus
