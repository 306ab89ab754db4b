// Package rules is the deterministic policy: no model, the same inputs give
// the same messages. It is the default of the ioa binary, so that a fresh
// machine with no model key does the whole job.
//
// The launcher splits the goal into clauses (Split): at lines, bullets,
// sentences, "; ", ", and", "then", and at a bare "and" or "," only between
// two requests that each start with a verb of a closed list ("convert 30 C
// to F and compute 12 * 12", "convert 5 km to miles, compute 3 * 3", not
// "buy salt and pepper" nor "add 17, 25 and 38"), so that a goal of two
// requests is not given whole to the agent that serves one of them and
// reported done. A sentence that is the data of the one before it stays
// with it: a question without numbers after a statement that has them ("I
// have 3 boxes of 12 eggs. How many eggs in total?"), and a sentence that
// is no request after an instruction whose data follows a colon ("Count
// the words in: The cat sat. The dog ran."). It finds a member for each clause by the registry's ranking, assigns the independent clauses as one async
// task assignment, pauses on them, assigns the dependent clauses ("then
// ...", "... of it") one sync task at a time with the earlier results, and
// concludes with one line per task. The plan (one line per clause and its
// assignee, also in the chat's plan) comes with its first step. Only when a
// person (an agent of type human) is on the team does the launcher first
// state the plan in a discussion and give that person the turn to answer
// it; a program would only answer "ready", and a round of that costs a turn,
// a log entry and a delivery to every member.
//
// A clause that no registered agent matches well enough (the search result's
// match below Config.MinMatch, by default protocol.DefaultMinMatch) is given
// to nobody: the plan lists it as "tN [none] -: clause", and the conclusion
// says that no registered agent can do it and lists it in its undone field,
// which makes the goal's outcome partial or failed. A clause meant for an
// agent but never assigned because the chat ends first (the launcher's last
// turn after turn_limit) is listed in the conclusion's not_started, which
// counts the same way.
package rules
