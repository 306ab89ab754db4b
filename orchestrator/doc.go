// Package orchestrator is the NATS micro service ioa-orchestrator: it takes
// goals, keeps the goal tree in KV, asks a launcher agent to form a team,
// referees every group chat and enforces the budgets of each goal.
//
// The referee is the only writer of chat logs. It checks each message an
// agent sends to its outbox with protocol.Apply before appending it to the
// chat's JetStream log, stamps the sender from the subject, fans the message
// out to every member's inbox, and writes task results to the task stream
// where triggers wait on them. Chat state lives in KV ioa_chats and is
// written with compare-and-set, and every append names the log position it
// expects, so several orchestrator instances can serve the same chats.
//
// Deadlines (goal timeout, silent speakers, overdue tasks, nudges, members
// gone offline) are checked by one sweep (sweep.go), which visits a chat only
// when its next deadline is due. The same sweep looks again at a goal that
// has waited for a team longer than a launch may take (stall.go). Finished
// tasks are written for the registry's learning off the chats' path
// (outcomes.go).
//
// Every ended goal gets an outcome beside its status (succeeded, partial,
// failed; protocol.GoalOutcome over the chat's final task board and the
// conclusion's undone parts), in its result, its end event and its record.
//
// Readiness: with Config.Expect set, the goal endpoints open only once every
// expected agent is registered and online (Ready is closed then, and the
// <p>.health endpoint answers ready instead of starting), so the first goal
// finds its team. A launcher or member that is expected but not yet
// registered is waited for, up to Config.ExpectTimeout, instead of failing
// the goal.
//
// Telemetry (package telemetry): Config.Metrics counts goals, turns, tasks
// and refusals; with tracing on, each goal is one trace whose root span
// starts at submission (trace.go), and every inbox message carries the
// goal's traceparent header so the members' spans join it.
package orchestrator
