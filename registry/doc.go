// Package registry is the agent registry of docs/protocol.md section 5: the NATS
// micro service ioa-registry, where agents register their cards, keep
// themselves online with heartbeats, and are found by meaning.
//
// The KV bucket ioa_agents is the source of truth and ioa_presence holds the
// heartbeats. Every instance follows both buckets with a KV watch and keeps
// its own search index (package registry/search) from them, so any number of
// instances in one queue group serve the same answers without talking to
// each other, and a restarted instance catches up by replaying the buckets.
//
// The file eval.go measures the service end to end, through NATS, on a
// labelled discovery set (ioa registry eval).
//
// Config.Metrics times searches and counts the index (package telemetry);
// a search that comes with a traceparent header is a span of that trace.
package registry
