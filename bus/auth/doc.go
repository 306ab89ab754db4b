// Package auth is the runtime's identity and permission model, built on
// NATS's own decentralized auth: an operator, one account for the runtime
// (and a system account), and a user JWT per identity, each signed with
// nkeys and handed out as a standard .creds file (what nsc writes, what
// `nats --creds` and nats.UserCredentials read).
//
// An identity has a name and a role. The role decides, through the user
// JWT's subject permissions, what the server lets it publish and subscribe
// to, so no service has to trust what a message body says about its
// sender: an agent can only send on its own outbox, register its own name,
// and receive on its own subjects and its own reply inboxes.
//
// The Authority keeps its keys and JWTs in a directory (the data dir's
// auth/), created on first use; the embedded server trusts its operator, and
// an external nats-server trusts it with the configuration ServerConfig
// writes.
package auth
