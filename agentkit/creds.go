package agentkit

import (
	"github.com/nats-io/nats.go"

	"github.com/ioa-nats/ioa/bus/auth"
)

// CredsOptions are the NATS connection options for an agent's credentials
// (a .creds file from `ioa agent add`): the credentials themselves, and the
// reply inboxes of its identity, the only ones a secure server lets it
// read. An empty file gives no options (an insecure server).
func CredsOptions(credsFile string) ([]nats.Option, error) {
	if credsFile == "" {
		return nil, nil
	}
	id, err := auth.ReadIdentity(credsFile)
	if err != nil {
		return nil, err
	}
	opts := []nats.Option{nats.UserCredentials(credsFile)}
	if id.Role != auth.Admin {
		opts = append(opts, nats.CustomInboxPrefix(auth.InboxPrefix(id.Name)))
	}
	return opts, nil
}
