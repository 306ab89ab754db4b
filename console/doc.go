// Package console is ioa's web console: an http.Handler that ioa serve
// mounts at / of its HTTP server (--http, 127.0.0.1:8080 by default), beside
// the A2A front door.
//
// Pages (plain HTML and a little vanilla JavaScript, embedded with embed.FS;
// no CDN, no build step; usable at phone width):
//
//   - Goals: a paged list with a status filter, redrawn when a goal is
//     accepted, forms its team or ends; submit and cancel.
//   - A goal: its chat as it happens (sender, type, state after, next
//     speaker, content), the chat's state and turn, the task board
//     (assignees, states, attempts, durations), the nested sub-goals as a
//     tree, and the usage (LLM calls, tokens) per agent and for the goal.
//   - Agents: the registry's cards with online state, and a search box
//     that shows each result's score and match (ioa.registry.search).
//   - People: the members of type human and what waits on each of them.
//
// Everything live comes from NATS, never from polling: a goal's page is a
// Server-Sent Events stream fed by JetStream ordered consumers on the
// goal's events (IOA_GOALS) and on each chat's log (IOA_CHATS), replayed
// from the start, so a page opened late, or after a restart of ioa serve,
// shows the whole story. The console folds each chat with protocol.Apply,
// the same pure function the referee runs, and sends the resulting state
// (ChatState) after every message.
//
// People. A member of type human is a person: agentkit keeps its card
// registered and online and accepts its invitations, but nothing answers
// its turns and tasks. The chat's state says when it holds the turn ("your
// turn") or has running tasks ("input required"); the console shows a form
// there and sends the person's move or task result on the person's outbox
// (<p>.agent.<name>.out.<comm_id>), so the referee checks and logs it like
// any member's. The wait is state in the log, bounded by the speaker and
// task timeouts: restarting ioa serve or closing the browser loses nothing.
//
// Access. Config.Token grants the operator role (submit, cancel, answer as
// a person). Without it a request is a viewer (read only) when
// Config.ViewWithoutLogin is set (ioa serve sets it on a loopback address),
// and is refused with 401 otherwise. The token comes as a bearer header,
// or as the cookie that POST /api/login (the login form) or opening
// /?token=... sets (HttpOnly, SameSite=Strict). A bearer header with a
// token that is not the console's gets 401, not a viewer's answer. Writes need a JSON body or
// none, so a cross-site form cannot post. Errors are JSON,
// {"error":{"code","message"}}, with the HTTP status of the code; a path the
// API has, asked with another method, gets 405 and an Allow header.
//
// The JSON API (all under /api):
//
//	GET  /me                           the caller's role
//	POST /login  {"token"}             sets the login cookie; POST /logout clears it
//	GET  /agents?offset&limit&online=1 registry.list
//	GET  /search?q&limit&offline=1     registry.search: results with score and match
//	GET  /goals?status&offset&limit    goal.list, one page, newest first; "more" says if another follows
//	POST /goals {"goal","team","timeout"}          goal.submit → 202 {"goal_id","status"}, with
//	                                   "timeout" and "note" when the server lowered the timeout to
//	                                   its limit (its submit reply says the timeout in force); 404 for
//	                                   a team member not registered, 409 for one offline (goal.submit
//	                                   refuses them before recording the goal)
//	GET  /goals/{id}                   goal.get
//	POST /goals/{id}/cancel            goal.cancel; 409 when the goal had already ended otherwise
//	POST /goals/{id}/say {"as","type","content","next_speaker","seen_seq"} a person's turn move
//	POST /goals/{id}/tasks/{task}/result {"status","conclusion"}      a person's task result
//	GET  /goals/{id}/live              SSE: goal, result, message, chat (ChatState) events
//	GET  /live                         SSE: goal events (accepted, team formed, ended) of every goal
//	GET  /people                       the people and the running goals waiting on each
package console
