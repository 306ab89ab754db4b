package faulttest

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/bus/auth"
)

// TestFaultExternalServerTrustsOperator runs the real nats-server binary with
// the configuration fragment ioa writes (auth/nats-server.conf: the operator,
// the system account, a memory resolver), `ioa serve --nats-url` on it with
// the admin credentials, and then, as a user would: a client's credentials
// from `ioa agent add` submit a goal with `ioa goal`, while an agent's
// credentials are held to their subjects by that server.
func TestFaultExternalServerTrustsOperator(t *testing.T) {
	bin := natsServerBinary(t)
	dir := t.TempDir()
	ioa := ioaBinary(t)
	add := func(name, role string) string {
		out := filepath.Join(dir, name+".creds")
		if b, err := exec.Command(ioa, "agent", "add", name, "--role", role, "--data-dir", dir, "--out", out).CombinedOutput(); err != nil {
			t.Fatalf("ioa agent add %s: %v\n%s", name, err, b)
		}
		return out
	}
	admin, client, agent := add("admin", "admin"), add("ci", "client"), add("mallory", "agent")

	addr := freeAddr(t)
	conf := writeFile(t, dir, "server.conf", fmt.Sprintf("listen: %q\njetstream { store_dir: %q }\ninclude %q\n",
		addr, filepath.Join(dir, "js"), filepath.Join("auth", auth.ServerConfigFile)), 0o644)
	startExec(t, "nats-server", nil, bin, "-c", conf)
	url := "nats://" + addr
	var nc *nats.Conn
	waitFor(t, 30*time.Second, "nats-server to accept the admin", func() bool {
		var err error
		nc, err = nats.Connect(url, nats.UserCredentials(admin))
		return err == nil
	})
	defer nc.Close()
	if c, err := nats.Connect(url); err == nil {
		c.Close()
		t.Fatal("the external server accepted a connection with no credentials")
	}

	cfg, err := filepath.Abs("../configs/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	startProc(t, "ioa serve", "serve", "--config", cfg, "--nats-url", url, "--creds", admin, "--data-dir", dir)
	subj, _ := bus.NewSubjects("ioa")
	waitReady(t, nc, subj)

	// The client's goal, with the ioa CLI, on its identity-bound subjects.
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, ioa, "goal", "--json", "--nats-url", url, "--creds", client, "Compute 6 * 7").Output()
	if err != nil {
		t.Fatalf("ioa goal as a client: %v\n%s", err, out)
	}
	var res protocol.GoalResult
	if err := json.Unmarshal(out, &res); err != nil || res.Status != protocol.GoalConcluded || !strings.Contains(res.Conclusion, "42") {
		t.Fatalf("client's goal: %v %+v", err, res)
	}
	st, err := goalGet(nc, subj, res.GoalID)
	if err != nil || st.Submitter != "ci" {
		t.Fatalf("goal %s: submitter %q, %v; want ci", res.GoalID, st.Submitter, err)
	}

	// The agent's credentials are held to its own subjects by that server.
	errs := make(chan error, 8)
	m, err := nats.Connect(url, nats.UserCredentials(agent), nats.CustomInboxPrefix(auth.InboxPrefix("mallory")),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	refused(t, errs, "write a chat log on the external server", "ioa.chat."+st.CommID, func() error {
		return m.Publish("ioa.chat."+st.CommID, []byte(`{}`))
	})
	refused(t, errs, "delete a stream on the external server", "$JS.API.STREAM.DELETE.IOA_CHATS", func() error {
		return m.Publish("$JS.API.STREAM.DELETE.IOA_CHATS", nil)
	})
}
