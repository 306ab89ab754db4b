// Package agentkit builds agents that take part in IoA-on-NATS group chats.
//
// An agent is an AgentCard (what the registry knows), a Worker (does the
// tasks assigned to it) and a Policy (decides whom to team up with and what to
// say when it holds the turn). A Runtime hosts one or more agents on a NATS
// connection: it registers and heartbeats their cards, serves invitations and
// launch requests, keeps one goroutine per chat that folds the chat's log into
// a protocol.Chat replica in seq order, speaks through the agent's outbox when
// the replica says it is the agent's turn, and runs assigned tasks under a
// concurrency limit. A move the referee refuses because the chat moved on
// while the policy decided (a conclusion carries the last seq it was decided
// on, seen_seq, and a task result logged after it refuses it) is decided
// again on the caught-up replica. Everything it does on the wire is in
// docs/protocol.md.
//
// Worker adapters live in agentkit/worker; the deterministic rules policy in
// agentkit/rules.
//
// With tracing on (package telemetry), a hosted agent's team-ups, turns
// and tasks are spans in the trace of the goal they serve: the runtime
// reads the traceparent header of the launch request and of the chat's
// inbox messages, and sends its own on outbox, search and sub-goal
// requests. Off, it costs nothing.
package agentkit
