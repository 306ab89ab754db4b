package bus

import (
	"fmt"
	"strings"

	"github.com/ioa-nats/ioa/agentkit/protocol"
)

// Subjects builds the protocol's subjects under one prefix. Every token that
// comes from outside (names, ids) is validated, so no input can become a
// wildcard or an extra token.
type Subjects struct{ prefix string }

// NewSubjects returns builders for prefix; it must be a valid subject token
// sequence such as "ioa" or "team1.ioa".
func NewSubjects(prefix string) (Subjects, error) {
	if err := ValidPrefix(prefix); err != nil {
		return Subjects{}, err
	}
	return Subjects{prefix: prefix}, nil
}

// ValidPrefix checks a subject prefix: dot-separated tokens of letters,
// digits, '_' and '-'.
func ValidPrefix(prefix string) error {
	if prefix == "" {
		return fmt.Errorf("subject prefix is empty")
	}
	for _, tok := range strings.Split(prefix, ".") {
		if !protocol.ValidID(tok) {
			return fmt.Errorf("subject prefix %q: token %q must match [A-Za-z0-9_-]{1,64}", prefix, tok)
		}
	}
	return nil
}

// Prefix is the first token(s) of every subject.
func (s Subjects) Prefix() string { return s.prefix }

// Registry endpoints and their subjects (docs/protocol.md section 5).
const (
	RegistryRegister   = "register"
	RegistryDeregister = "deregister"
	RegistryHeartbeat  = "heartbeat"
	RegistryGet        = "get"
	RegistryList       = "list"
	RegistrySearch     = "search"
)

// Goal endpoints (docs/protocol.md section 6).
const (
	GoalSubmit = "submit"
	GoalGet    = "get"
	GoalList   = "list"
	GoalCancel = "cancel"
	// GoalApprove answers a goal awaiting a person's approval.
	GoalApprove = "approve"
)

// Registry is the subject of a registry endpoint, e.g. ioa.registry.search.
func (s Subjects) Registry(endpoint string) string { return s.prefix + ".registry." + endpoint }

// RegistryGroup is the micro group of the registry endpoints.
func (s Subjects) RegistryGroup() string { return s.prefix + ".registry" }

// Goal is the subject of a goal endpoint, e.g. ioa.goal.submit.
func (s Subjects) Goal(endpoint string) string { return s.prefix + ".goal." + endpoint }

// GoalGroup is the micro group of the goal endpoints.
func (s Subjects) GoalGroup() string { return s.prefix + ".goal" }

// GoalEvents is where a goal's events are published.
func (s Subjects) GoalEvents(goalID string) (string, error) {
	if err := protocol.CheckID("goal_id", goalID); err != nil {
		return "", err
	}
	return s.prefix + ".goal." + goalID + ".events", nil
}

// GoalResult is where a goal's result is published.
func (s Subjects) GoalResult(goalID string) (string, error) {
	if err := protocol.CheckID("goal_id", goalID); err != nil {
		return "", err
	}
	return s.prefix + ".goal." + goalID + ".result", nil
}

// AllGoalEvents matches every goal's events.
func (s Subjects) AllGoalEvents() string { return s.prefix + ".goal.*.events" }

// AllGoalResults matches every goal's result.
func (s Subjects) AllGoalResults() string { return s.prefix + ".goal.*.result" }

// Health is the orchestrator's readiness subject, e.g. ioa.health.
func (s Subjects) Health() string { return s.prefix + ".health" }

// Ref is where orchestrator instance id takes the work that another
// instance forwards to it (messages of the chats it owns). Internal: only the
// admin identity may publish there.
func (s Subjects) Ref(instance string) (string, error) {
	if err := protocol.CheckID("instance", instance); err != nil {
		return "", err
	}
	return s.prefix + ".ref." + instance, nil
}

// Teamup is the orchestrator's team-up subject.
func (s Subjects) Teamup() string { return s.prefix + ".teamup" }

// Agent subject kinds: the last-but-one or last token after <p>.agent.<name>.
const (
	AgentLaunch  = "launch"
	AgentInvite  = "invite"
	AgentOut     = "out"
	AgentIn      = "in"
	AgentHistory = "history"
	AgentChats   = "chats"
)

// AgentLaunchSubject is where an agent serves launch requests.
func (s Subjects) AgentLaunchSubject(name string) (string, error) {
	return s.agent(name, AgentLaunch, "")
}

// AgentInviteSubject is where an agent serves invitations.
func (s Subjects) AgentInviteSubject(name string) (string, error) {
	return s.agent(name, AgentInvite, "")
}

// Outbox is where an agent sends its messages for a chat.
func (s Subjects) Outbox(name, commID string) (string, error) { return s.agent(name, AgentOut, commID) }

// Inbox is where an agent receives a chat's logged messages.
func (s Subjects) Inbox(name, commID string) (string, error) { return s.agent(name, AgentIn, commID) }

// History is where an agent asks for a chat's past messages.
func (s Subjects) History(name, commID string) (string, error) {
	return s.agent(name, AgentHistory, commID)
}

// OpenChats is where an agent asks which open chats it is a member of (to
// rejoin them after a restart).
func (s Subjects) OpenChats(name string) (string, error) { return s.agent(name, AgentChats, "") }

// AllOpenChats matches every agent's open-chats request.
func (s Subjects) AllOpenChats() string { return s.prefix + ".agent.*.chats" }

// AgentInboxes matches all chat inboxes of one agent.
func (s Subjects) AgentInboxes(name string) (string, error) {
	if err := checkAgent(name); err != nil {
		return "", err
	}
	return s.prefix + ".agent." + name + ".in.*", nil
}

// AllOutboxes matches every agent's outbox (the referee listens here).
func (s Subjects) AllOutboxes() string { return s.prefix + ".agent.*.out.*" }

// AllHistory matches every agent's history requests.
func (s Subjects) AllHistory() string { return s.prefix + ".agent.*.history.*" }

// checkAgent checks the name token of an agent subject: a legal agent name,
// and not protocol.SystemSender. The referee stamps the sender from an
// outbox subject's name, so an outbox under its own name would speak as the
// referee; the referee writes its messages to the log directly and has no
// agent subjects.
func checkAgent(name string) error {
	if err := protocol.CheckName("agent", name); err != nil {
		return err
	}
	return notReferee(name)
}

// notReferee refuses the referee's own name for an agent subject.
func notReferee(name string) error {
	if name == protocol.SystemSender {
		return protocol.Errorf(protocol.ErrForbidden, "agent name %q is reserved for the referee", name)
	}
	return nil
}

func (s Subjects) agent(name, kind, commID string) (string, error) {
	if err := checkAgent(name); err != nil {
		return "", err
	}
	subj := s.prefix + ".agent." + name + "." + kind
	if commID != "" || kind == AgentOut || kind == AgentIn || kind == AgentHistory {
		if err := protocol.CheckID("comm_id", commID); err != nil {
			return "", err
		}
		subj += "." + commID
	}
	return subj, nil
}

// AgentSubject is a parsed <p>.agent.<name>.<kind>[.<comm_id>] subject.
type AgentSubject struct {
	Name   string
	Kind   string
	CommID string
}

// ParseAgent parses an agent subject under this prefix; the referee uses it
// to stamp the sender from the subject rather than the body. A subject named
// for the referee (protocol.SystemSender) gets ErrForbidden, whatever its kind.
func (s Subjects) ParseAgent(subject string) (AgentSubject, error) {
	rest, ok := strings.CutPrefix(subject, s.prefix+".agent.")
	if !ok {
		return AgentSubject{}, protocol.Errorf(protocol.ErrInvalid, "subject %q is not an agent subject", subject)
	}
	toks := strings.Split(rest, ".")
	var a AgentSubject
	switch len(toks) {
	case 2:
		a = AgentSubject{Name: toks[0], Kind: toks[1]}
	case 3:
		a = AgentSubject{Name: toks[0], Kind: toks[1], CommID: toks[2]}
	default:
		return AgentSubject{}, protocol.Errorf(protocol.ErrInvalid, "subject %q has the wrong number of tokens", subject)
	}
	if !protocol.ValidName(a.Name) || (len(toks) == 3 && !protocol.ValidID(a.CommID)) {
		return AgentSubject{}, protocol.Errorf(protocol.ErrInvalid, "subject %q has an invalid name or id", subject)
	}
	// ValidName checked the syntax; only the referee's name is left.
	if err := notReferee(a.Name); err != nil {
		return AgentSubject{}, err
	}
	return a, nil
}

// Chat is the log subject of a chat.
func (s Subjects) Chat(commID string) (string, error) {
	if err := protocol.CheckID("comm_id", commID); err != nil {
		return "", err
	}
	return s.prefix + ".chat." + commID, nil
}

// AllChats matches every chat log.
func (s Subjects) AllChats() string { return s.prefix + ".chat.>" }

// Task is the trigger subject of one task's results.
func (s Subjects) Task(commID, taskID string) (string, error) {
	if err := protocol.CheckID("comm_id", commID); err != nil {
		return "", err
	}
	if err := protocol.CheckID("task_id", taskID); err != nil {
		return "", err
	}
	return s.prefix + ".task." + commID + "." + taskID, nil
}

// AllTasks matches every task result.
func (s Subjects) AllTasks() string { return s.prefix + ".task.>" }

// As is the identity-bound form of an endpoint's subject: the caller's name
// as one more token (<p>.registry.register.<name>, <p>.goal.submit.<name>,
// <p>.teamup.<name>). A secure server lets each identity publish only to
// the forms that carry its own name, so the service knows who asks without
// trusting the body. The plain form is the admin's.
func (s Subjects) As(endpointSubject, name string) (string, error) {
	if err := protocol.CheckName("caller", name); err != nil {
		return "", err
	}
	return endpointSubject + "." + name, nil
}

// Caller returns the caller named by an identity-bound subject of endpoint
// (a plain subject such as <p>.goal.submit): the token after it, or "" when
// subject is the plain form.
func Caller(endpointSubject, subject string) (string, error) {
	if subject == endpointSubject {
		return "", nil
	}
	name, ok := strings.CutPrefix(subject, endpointSubject+".")
	if !ok || !protocol.ValidName(name) {
		return "", protocol.Errorf(protocol.ErrInvalid, "subject %q does not name a caller of %s", subject, endpointSubject)
	}
	return name, nil
}
