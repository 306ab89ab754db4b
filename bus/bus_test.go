package bus_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/bus/bustest"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

func TestStartProvisionsResourcesAndKeepsData(t *testing.T) {
	dir := t.TempDir()
	ctx := t.Context()
	cfg := bus.Config{DataDir: dir, Listen: "127.0.0.1:0"}
	b, err := bus.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	js := b.JetStream()
	var streams []string
	for name := range js.StreamNames(ctx).Name() {
		if !strings.HasPrefix(name, "KV_") {
			streams = append(streams, name)
		}
	}
	slices.Sort(streams)
	if want := []string{bus.StreamChats, bus.StreamGoals, bus.StreamTasks}; !slices.Equal(streams, want) {
		t.Fatalf("streams = %v, want %v", streams, want)
	}
	var buckets []string
	for name := range js.KeyValueStoreNames(ctx).Name() {
		buckets = append(buckets, name)
	}
	slices.Sort(buckets)
	if want := []string{bus.BucketAgents, bus.BucketChats, bus.BucketGoals, bus.BucketLeases, bus.BucketOutcomes, bus.BucketPresence}; !slices.Equal(buckets, want) {
		t.Fatalf("buckets = %v, want %v", buckets, want)
	}
	kv, err := b.KV(ctx, bus.BucketAgents)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "alpha", []byte(`{"name":"alpha"}`)); err != nil {
		t.Fatal(err)
	}
	subj, _ := b.Subjects().Chat("c1")
	if _, err := js.Publish(ctx, subj, []byte(`{"seq":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	// Start again on the same store: the data is still there and
	// provisioning a second time changes nothing.
	b2, err := bus.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	kv2, _ := b2.KV(ctx, bus.BucketAgents)
	e, err := kv2.Get(ctx, "alpha")
	if err != nil || string(e.Value()) != `{"name":"alpha"}` {
		t.Fatalf("kv after restart: %v %q", err, e)
	}
	st, err := b2.JetStream().Stream(ctx, bus.StreamChats)
	if err != nil {
		t.Fatal(err)
	}
	if n := st.CachedInfo().State.Msgs; n != 1 {
		t.Fatalf("chat stream has %d messages after restart, want 1", n)
	}
}

func TestConnectToExternalServer(t *testing.T) {
	ext := bustest.New(t, func(c *bus.Config) { c.Prefix = "ext" }) // stands in for an existing nats-server
	b, err := bus.Open(t.Context(), bus.Config{NATSURL: ext.ClientURL(), Prefix: "ext"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Embedded() {
		t.Fatal("Open with a URL started a server")
	}
	// The resources exist on the external server under the prefix.
	st, err := ext.JetStream().Stream(t.Context(), bus.StreamChats)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.CachedInfo().Config.Subjects; !slices.Equal(got, []string{"ext.chat.>"}) {
		t.Fatalf("subjects = %v", got)
	}
	// Another prefix on the same account would take the fixed-name streams
	// over: it is refused, and the streams stay as they were.
	_, err = bus.Open(t.Context(), bus.Config{NATSURL: ext.ClientURL(), Prefix: "other"})
	if err == nil || !strings.Contains(err.Error(), "serves ext.chat.>, not other.chat.>") {
		t.Fatalf("a second prefix on the account: %v", err)
	}
	st, err = ext.JetStream().Stream(t.Context(), bus.StreamChats)
	if err != nil || !slices.Equal(st.CachedInfo().Config.Subjects, []string{"ext.chat.>"}) {
		t.Fatalf("after the refusal: %v %v", st.CachedInfo().Config.Subjects, err)
	}
}

func TestNoListenerStillServesInProcess(t *testing.T) {
	b := bustest.New(t, func(c *bus.Config) { c.Listen = bus.NoListen })
	if b.ClientURL() != "" {
		t.Fatalf("ClientURL = %q, want empty without a listener", b.ClientURL())
	}
	nc, err := b.NewConn("second")
	if err != nil {
		t.Fatal(err)
	}
	sub, err := nc.SubscribeSync("x.y")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := b.Conn().Publish("x.y", []byte("hi")); err != nil {
		t.Fatal(err)
	}
	m, err := sub.NextMsg(nats.DefaultTimeout)
	if err != nil || string(m.Data) != "hi" {
		t.Fatalf("got %v %v", m, err)
	}
}

func TestStartFailsClearlyWhenPortTaken(t *testing.T) {
	a := bustest.New(t)
	addr := a.ClientURL()[len("nats://"):]
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	_, err := bus.Start(ctx, bus.Config{DataDir: t.TempDir(), Listen: addr})
	if err == nil {
		t.Fatal("second server on the same port started")
	}
}

func TestEphemeralStoreIsRemoved(t *testing.T) {
	b, err := bus.Start(t.Context(), bus.Config{Ephemeral: true, Listen: bus.NoListen})
	if err != nil {
		t.Fatal(err)
	}
	dir := b.Config().DataDir
	if _, err := os.Stat(filepath.Join(dir, "jetstream")); err != nil {
		t.Fatalf("no store in %s: %v", dir, err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("ephemeral store %s still there after Close: %v", dir, err)
	}
}

func TestProvisionAppliesRetention(t *testing.T) {
	dir := t.TempDir()
	b := bustest.New(t, func(c *bus.Config) {
		c.DataDir = dir
		c.Retention = bus.Retention{MaxAge: 48 * time.Hour, MaxBytes: 1 << 30}
	})
	ctx := t.Context()
	for _, name := range []string{bus.StreamChats, bus.StreamTasks, bus.StreamGoals} {
		st, err := b.JetStream().Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if c := st.CachedInfo().Config; c.MaxAge != 48*time.Hour || c.MaxBytes != 1<<30 {
			t.Errorf("%s: max_age %v, max_bytes %d", name, c.MaxAge, c.MaxBytes)
		}
		// The duplicate window is memory per id written within it: short
		// where only a settling writer sends again.
		want := 2 * time.Minute
		if name == bus.StreamTasks {
			want = 10 * time.Minute
		}
		if c := st.CachedInfo().Config; c.Duplicates != want {
			t.Errorf("%s: duplicate window %v, want %v", name, c.Duplicates, want)
		}
	}
	// A retention shorter than a window shortens the window: the server
	// refuses a stream whose window is longer than its age.
	short := bustest.New(t, func(c *bus.Config) { c.Retention = bus.Retention{MaxAge: 90 * time.Second} })
	st, err := short.JetStream().Stream(ctx, bus.StreamTasks)
	if err != nil {
		t.Fatal(err)
	}
	if c := st.CachedInfo().Config; c.Duplicates != 90*time.Second {
		t.Errorf("retention 90s: task window %v, want 90s", c.Duplicates)
	}
	kv, err := b.JetStream().KeyValue(ctx, bus.BucketGoals)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := kv.Status(ctx); st.TTL() != 48*time.Hour {
		t.Errorf("goal records expire after %v, want 48h", st.TTL())
	}
}

// A stream store the server could not create is tried again: nats-server
// before 2.15.3 could be tidying the account's directory while it enabled
// JetStream, and a stream created at that moment failed once (a CI run of a
// first ioa serve start); an external server may still be such a version.
// Here a file stands where the account's streams directory goes, so the
// first create fails; it is taken away when the bus says it will provision
// again, and the next pass creates every stream.
func TestProvisionRetriesAStoreTheServerCouldNotCreate(t *testing.T) {
	store := t.TempDir()
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: store, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	defer srv.Shutdown()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	streams := filepath.Join(store, "jetstream", "$G", "streams")
	if err := os.RemoveAll(streams); err != nil { // made by the server since 2.15.3
		t.Fatal(err)
	}
	if err := os.WriteFile(streams, []byte("in the way"), 0o644); err != nil {
		t.Fatal(err)
	}
	var retries atomic.Int32
	logger := onLog("JetStream could not provision yet; provisioning again", func() {
		if retries.Add(1) == 1 {
			_ = os.Remove(streams)
		}
	})
	b, err := bus.Connect(t.Context(), bus.Config{NATSURL: srv.ClientURL(), Logger: logger})
	if err != nil {
		t.Fatalf("provisioning after a store the server could not create: %v", err)
	}
	defer b.Close()
	if n := retries.Load(); n != 1 {
		t.Errorf("provisioned again %d times, want 1", n)
	}
	for _, name := range []string{bus.StreamChats, bus.StreamTasks, bus.StreamGoals} {
		if _, err := b.JetStream().Stream(t.Context(), name); err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
	}
}

// onLog is a logger that calls do for each record whose message is msg.
func onLog(msg string, do func()) *slog.Logger {
	return slog.New(logFunc(func(r slog.Record) {
		if r.Message == msg {
			do()
		}
	}))
}

type logFunc func(slog.Record)

func (f logFunc) Enabled(context.Context, slog.Level) bool      { return true }
func (f logFunc) Handle(_ context.Context, r slog.Record) error { f(r); return nil }
func (f logFunc) WithAttrs([]slog.Attr) slog.Handler            { return f }
func (f logFunc) WithGroup(string) slog.Handler                 { return f }
