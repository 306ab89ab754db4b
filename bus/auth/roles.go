package auth

import (
	"fmt"
	"time"

	"github.com/nats-io/jwt/v2"

	"github.com/ioa-nats/ioa/agentkit/protocol"
)

// Role is what an identity may do on the bus.
type Role string

// The roles. Admin is the operator and the runtime's own services; the
// others are for programs the operator does not control.
const (
	// Admin may use every subject, JetStream and KV included.
	Admin Role = "admin"
	// Agent NAME may speak in its chats (publish under <p>.agent.NAME.>),
	// register and heartbeat NAME, form
	// the team of a goal it launches, submit sub-goals, search the registry,
	// and receive on <p>.agent.NAME.> and its own reply inboxes.
	Agent Role = "agent"
	// Client NAME may submit goals, get, list and cancel its own, follow
	// their events, and search the registry.
	Client Role = "client"
	// Observer may read everything and change nothing: chats, task
	// results, goal events, the goal and registry read endpoints, and the
	// runtime's streams.
	Observer Role = "observer"
)

// Roles lists the roles, for flags and errors.
var Roles = []Role{Admin, Agent, Client, Observer}

// ParseRole checks a role name.
func ParseRole(s string) (Role, error) {
	for _, r := range Roles {
		if string(r) == s {
			return r, nil
		}
	}
	return "", fmt.Errorf("role %q is not admin, agent, client or observer", s)
}

// CheckName reports whether name can be an identity's name: it becomes a
// subject token, so it follows the rule of agent names.
func CheckName(name string) error {
	if !protocol.ValidName(name) {
		return fmt.Errorf("identity name %q must match [a-z0-9][a-z0-9_-]{0,63}", name)
	}
	if name == protocol.SystemSender {
		// The referee's own name: the runtime refuses every agent subject
		// under it (bus.Subjects.ParseAgent), so say so when issuing, not
		// at the first message.
		return fmt.Errorf("identity name %q is reserved for the referee", name)
	}
	return nil
}

// InboxPrefix is where an identity receives the replies to its requests.
// Non-admin identities must use it (nats.CustomInboxPrefix, or the nats
// CLI's --inbox-prefix): they may subscribe to no other inbox, so no one
// reads another identity's replies.
func InboxPrefix(name string) string { return "_INBOX." + name }

// Endpoints whose subject names the caller: the service takes the caller's
// identity from the last token, and the server lets each identity publish
// only to its own. They are documented in docs/protocol.md.
var (
	registryWrites = []string{"register", "heartbeat", "deregister"}
	registryReads  = []string{"search", "get", "list"}
	goalEndpoints  = []string{"submit", "get", "list", "cancel"}
)

// responseWindow bounds how long an identity may answer a request it
// received (a launch request is answered once its team has formed).
const responseWindow = 10 * time.Minute

// Permissions are the subject permissions of identity name with role under
// subject prefix p.
func Permissions(role Role, name, p string) (jwt.Permissions, error) {
	if err := CheckName(name); err != nil && role != Admin {
		return jwt.Permissions{}, err
	}
	var perm jwt.Permissions
	inbox := InboxPrefix(name) + ".>"
	health := p + ".health" // readiness, for every role
	switch role {
	case Admin:
		perm.Pub.Allow.Add(">")
		perm.Sub.Allow.Add(">")
	case Agent:
		a := p + ".agent." + name
		// Its own subtree: the outbox, history and chats requests (and its
		// own inboxes, which fools no one but itself).
		// goal.approve: a person (an agent of type human) answers the goals
		// that wait on it; the orchestrator checks it is the one named.
		perm.Pub.Allow.Add(a+".>", p+".teamup."+name, p+".goal.submit."+name, p+".goal.approve."+name, health)
		for _, e := range registryWrites {
			perm.Pub.Allow.Add(p + ".registry." + e + "." + name)
		}
		for _, e := range registryReads {
			perm.Pub.Allow.Add(p + ".registry." + e)
		}
		perm.Sub.Allow.Add(a+".>", inbox)
		perm.Resp = &jwt.ResponsePermission{MaxMsgs: 1, Expires: responseWindow}
	case Client:
		for _, e := range goalEndpoints {
			perm.Pub.Allow.Add(p + ".goal." + e + "." + name)
		}
		perm.Pub.Allow.Add(health)
		for _, e := range registryReads {
			perm.Pub.Allow.Add(p + ".registry." + e)
		}
		perm.Sub.Allow.Add(inbox)
	case Observer:
		perm.Pub.Allow.Add(p+".goal.get", p+".goal.list", health)
		for _, e := range registryReads {
			perm.Pub.Allow.Add(p + ".registry." + e)
		}
		// Reading the streams: info, message gets and (ordered) consumers.
		perm.Pub.Allow.Add("$JS.API.INFO", "$JS.API.STREAM.NAMES", "$JS.API.STREAM.LIST", "$JS.FC.>")
		for _, s := range []string{"IOA_CHATS", "IOA_TASKS", "IOA_GOALS"} {
			perm.Pub.Allow.Add("$JS.API.STREAM.INFO."+s, "$JS.API.STREAM.MSG.GET."+s, "$JS.API.DIRECT.GET."+s+".>",
				"$JS.API.DIRECT.GET."+s, "$JS.API.CONSUMER.CREATE."+s+".>", "$JS.API.CONSUMER.CREATE."+s,
				"$JS.API.CONSUMER.INFO."+s+".*", "$JS.API.CONSUMER.MSG.NEXT."+s+".*")
		}
		perm.Sub.Allow.Add(inbox, p+".chat.>", p+".task.>", p+".goal.*.events", p+".goal.*.result")
	default:
		return jwt.Permissions{}, fmt.Errorf("unknown role %q", role)
	}
	return perm, nil
}
