package main

// Credentials: a secure `ioa serve` (the default) lets each identity in only
// with its own .creds file, and lets it read replies only under its own
// inbox prefix, _INBOX.<name> (docs/protocol.md section 16). The role and
// name are read from the user JWT in the file, with the standard library.

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/nats.go"
)

// identity is who a .creds file speaks for.
type identity struct {
	Name string
	Role string // admin, agent, client or observer
}

// readIdentity reads the name and ioa role of a .creds file's user JWT:
// the role is the tag ioa-role:<role>; a JWT with no permissions at all is
// the admin's, one with permissions but no tag an agent's (as the runtime
// reads them).
func readIdentity(file string) (identity, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return identity{}, err
	}
	var tok string
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		if strings.Contains(l, "BEGIN NATS USER JWT") && i+1 < len(lines) {
			tok = strings.TrimSpace(lines[i+1])
			break
		}
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return identity{}, fmt.Errorf("%s: no NATS user JWT in it (want a .creds file from ioa agent add)", file)
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return identity{}, fmt.Errorf("%s: user JWT: %w", file, err)
	}
	type perm struct {
		Allow []string `json:"allow"`
		Deny  []string `json:"deny"`
	}
	var claims struct {
		Name string `json:"name"`
		Nats struct {
			Tags []string `json:"tags"`
			Pub  perm     `json:"pub"`
			Sub  perm     `json:"sub"`
		} `json:"nats"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil {
		return identity{}, fmt.Errorf("%s: user JWT: %w", file, err)
	}
	id := identity{Name: claims.Name, Role: "agent"}
	n := claims.Nats
	if len(n.Pub.Allow)+len(n.Pub.Deny)+len(n.Sub.Allow)+len(n.Sub.Deny) == 0 {
		id.Role = "admin"
	}
	for _, t := range n.Tags {
		if r, ok := strings.CutPrefix(t, "ioa-role:"); ok {
			id.Role = r
		}
	}
	return id, nil
}

// errNoCreds is an agent's creds file that does not exist.
var errNoCreds = errors.New("no credentials")

// agentCredsFile is the creds of agent name in dir, or "" with no dir (an
// insecure server). A missing file is errNoCreds.
func agentCredsFile(dir, name string) (string, error) {
	if dir == "" {
		return "", nil
	}
	file := filepath.Join(dir, name+".creds")
	if _, err := os.Stat(file); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", errNoCreds
		}
		return "", err
	}
	id, err := readIdentity(file)
	if err != nil {
		return "", err
	}
	if id.Role != "admin" && id.Name != name {
		return "", fmt.Errorf("%s holds the credentials of %s %q, not of agent %q: issue them with: ioa agent add %s --data-dir <ioa data dir> --out %s",
			file, id.Role, id.Name, name, name, file)
	}
	return file, nil
}

// missingCreds is the error for agents whose creds are not in dir.
func missingCreds(dir string, names []string) error {
	var cmds strings.Builder
	for _, n := range names {
		fmt.Fprintf(&cmds, "\n  ioa agent add %s --data-dir <ioa data dir> --out %s", n, filepath.Join(dir, n+".creds"))
	}
	return fmt.Errorf("no credentials for agent %q (want %s; %d agent(s) missing): a secure ioa serve admits each agent only with its own .creds, issued by `ioa agent add NAME`:%s",
		names[0], filepath.Join(dir, names[0]+".creds"), len(names), cmds.String())
}

// connect opens a connection as the identity of creds (none: an insecure
// server), receiving replies under _INBOX.<inbox> unless the identity is the
// admin. Asynchronous errors (permission violations, a slow consumer) go to
// onErr: they mean something was refused or dropped.
func connect(url, creds, inbox, label string, onErr func(error)) (*nats.Conn, error) {
	opts := []nats.Option{
		nats.Name("ioa-loadgen " + label),
		nats.MaxReconnects(-1),
		nats.ErrorHandler(func(_ *nats.Conn, s *nats.Subscription, err error) {
			if s != nil {
				err = fmt.Errorf("%s on %s: %w", label, s.Subject, err)
			} else {
				err = fmt.Errorf("%s: %w", label, err)
			}
			onErr(err)
		}),
	}
	if creds != "" {
		opts = append(opts, nats.UserCredentials(creds))
	}
	if inbox != "" {
		opts = append(opts, nats.CustomInboxPrefix("_INBOX."+inbox))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("%s: connect to %s: %w", label, url, err)
	}
	return nc, nil
}
