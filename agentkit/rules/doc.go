// Package rules is the deterministic policy: no model, the same inputs give
// the same messages. It is the default of the ioa binary, so that a fresh
// machine with no model key does the whole job.
//
// The launcher splits the goal into clauses (Split), finds a member for each
// by the registry's ranking, states the plan in a discussion, assigns the
// independent clauses as one async task assignment, pauses on them, assigns
// the dependent clauses ("then ...", "... of it") one sync task at a time
// with the earlier results, and concludes with one line per task.
//
// A clause that no registered agent matches well enough (the search result's
// match below Config.MinMatch, by default protocol.DefaultMinMatch) is given
// to nobody: the plan lists it as "tN [none] -: clause", and the conclusion
// says that no registered agent can do it and lists it in its undone field,
// which makes the goal's outcome partial or failed.
package rules
