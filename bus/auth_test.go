package bus_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/bus/auth"
	"github.com/ioa-nats/ioa/bus/bustest"
)

// dialAs connects over TCP with creds and reports the server's permission
// errors on the returned channel.
func dialAs(t *testing.T, url, creds string, id auth.Identity) (*nats.Conn, chan error) {
	t.Helper()
	errs := make(chan error, 16)
	opts := []nats.Option{nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		select {
		case errs <- err:
		default:
		}
	})}
	if creds != "" {
		opts = append(opts, nats.UserCredentials(creds))
	}
	if id.Role != auth.Admin && id.Name != "" {
		opts = append(opts, nats.CustomInboxPrefix(auth.InboxPrefix(id.Name)))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatalf("connect as %v: %v", id, err)
	}
	t.Cleanup(nc.Close)
	return nc, errs
}

func wantViolation(t *testing.T, errs chan error, what string) {
	t.Helper()
	select {
	case err := <-errs:
		if !errors.Is(err, nats.ErrPermissionViolation) && !strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
			t.Fatalf("%s: got %v, want a permissions violation", what, err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: the server did not refuse it", what)
	}
}

func TestSecureServerEnforcesRoles(t *testing.T) {
	dir := t.TempDir()
	b := bustest.New(t, func(c *bus.Config) { c.DataDir = dir; c.Secure = true })
	url := b.ClientURL()

	// No credentials: refused at connect.
	if nc, err := nats.Connect(url); err == nil {
		nc.Close()
		t.Fatal("connected with no credentials")
	}
	// A JWT from another operator: refused at connect.
	foreign, err := auth.LoadOrCreate(filepath.Join(t.TempDir(), "auth"))
	if err != nil {
		t.Fatal(err)
	}
	fcreds := filepath.Join(t.TempDir(), "foreign.creds")
	if err := foreign.WriteCreds(fcreds, auth.Identity{Name: "admin", Role: auth.Admin}, "ioa"); err != nil {
		t.Fatal(err)
	}
	if nc, err := nats.Connect(url, nats.UserCredentials(fcreds)); err == nil {
		nc.Close()
		t.Fatal("connected with a foreign operator's credentials")
	}

	a, err := auth.Load(bus.AuthDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	creds := filepath.Join(t.TempDir(), "alice.creds")
	alice := auth.Identity{Name: "alice", Role: auth.Agent}
	if err := a.WriteCreds(creds, alice, "ioa"); err != nil {
		t.Fatal(err)
	}
	got, err := auth.ReadIdentity(creds)
	if err != nil || got != alice {
		t.Fatalf("ReadIdentity = %v, %v; want %v", got, err, alice)
	}
	admin, err := auth.ReadIdentity(bus.AdminCredsFile(dir))
	if err != nil || admin.Role != auth.Admin {
		t.Fatalf("admin creds read as %v, %v", admin, err)
	}

	nc, errs := dialAs(t, url, creds, alice)
	// Its own outbox is allowed: the admin sees the message.
	adm, _ := dialAs(t, url, bus.AdminCredsFile(dir), admin)
	sub, err := adm.SubscribeSync("ioa.agent.*.out.*")
	if err != nil {
		t.Fatal(err)
	}
	adm.Flush()
	if err := nc.Publish("ioa.agent.alice.out.c1", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if m, err := sub.NextMsg(5 * time.Second); err != nil || m.Subject != "ioa.agent.alice.out.c1" {
		t.Fatalf("own outbox: %v %v", m, err)
	}
	for _, subj := range []string{"ioa.agent.bob.out.c1", "ioa.agent.bob.in.c1", "ioa.chat.c1", "ioa.task.c1.t1",
		"$JS.API.STREAM.DELETE.IOA_CHATS", "$JS.API.STREAM.INFO.IOA_CHATS", "$KV.ioa_goals.g1", "ioa.registry.register", "ioa.registry.register.bob",
		// The orchestrators' internal forwarding subject and lease bucket.
		"ioa.ref.o1", "$KV.ioa_leases.p.0"} {
		nc.Publish(subj, []byte("{}"))
		wantViolation(t, errs, "publish "+subj)
	}
	for _, subj := range []string{"ioa.chat.>", "ioa.agent.bob.>", "_INBOX.>", "ioa.>"} {
		if _, err := nc.SubscribeSync(subj); err != nil {
			t.Fatal(err)
		}
		wantViolation(t, errs, "subscribe "+subj)
	}
	// Nothing it published to a forbidden subject reached a subscriber.
	if m, err := sub.NextMsg(200 * time.Millisecond); err == nil {
		t.Fatalf("forbidden publish delivered: %s", m.Subject)
	}
}

func TestInsecureServerNeedsNoCreds(t *testing.T) {
	b := bustest.New(t)
	nc, err := nats.Connect(b.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
}
