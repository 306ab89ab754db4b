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
// The bucket ioa_outcomes holds, under each agent's name, the latest tasks
// it finished and how (RecordOutcomes; the orchestrator queues one whenever a
// task result is logged, and writes an agent's queued ones together). Every instance follows it too and hands it to its
// index, which learns from it what the agent can do beyond its card.
//
// A card the index cannot take because a remote embedder failed is retried
// in the background (retry.go) until the embedder answers; with
// Config.VectorDir the vectors of a remote embedder are kept on disk and a
// restarted instance re-uses them.
//
// Searches only read the index and take CPU, so the search endpoint handles
// up to GOMAXPROCS at once (bus.Concurrently); the writes go one at a time.
//
// The file eval.go measures the service end to end, through NATS, on a
// labelled discovery set (ioa registry eval).
//
// Config.Metrics times searches and counts the index (package telemetry);
// a search that comes with a traceparent header is a span of that trace.
package registry
