package faulttest

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/bus"
	"github.com/nats-io/nats.go/jetstream"
)

// TestFaultProvisionNeverLowersReplicas starts a 3-node cluster with every
// stream at 3 replicas: a process that provisions with the default of 1 is
// refused with a clear error and the streams keep 3, while an agent-side
// connection, which provisions nothing, connects.
func TestFaultProvisionNeverLowersReplicas(t *testing.T) {
	nodes := startCluster(t, 3)
	_, err := bus.Connect(t.Context(), bus.Config{NATSURL: nodes[1].ClientURL()})
	if err == nil || !strings.Contains(err.Error(), "refusing to lower") {
		t.Fatalf("provisioning with 1 replica against 3: %v, want a refusal", err)
	}
	for _, name := range []string{bus.StreamChats, bus.StreamTasks, bus.StreamGoals, "KV_" + bus.BucketGoals} {
		st, err := nodes[0].JetStream().Stream(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		if r := st.CachedInfo().Config.Replicas; r != 3 {
			t.Errorf("%s has %d replicas after the refused start, want 3", name, r)
		}
	}
	agent, err := bus.Connect(t.Context(), bus.Config{NATSURL: nodes[2].ClientURL(), NoProvision: true})
	if err != nil {
		t.Fatalf("an agent-side connection: %v", err)
	}
	agent.Close()
}

// TestFaultProvisionKeepsHandlesValid starts a 3-node cluster (every stream
// and bucket at 3 replicas, read from the leaders) and provisions it again,
// as every `ioa serve` does when it starts: nothing is updated, so handles
// that running processes opened keep working. Provisioning used to turn
// direct gets on and off again on every start, and a process that opened a
// handle in between read with direct gets that no server answered any more
// ("no responders" on every read of the chats it referees).
func TestFaultProvisionKeepsHandlesValid(t *testing.T) {
	nodes := startCluster(t, 3)
	nc := nodes[0].Conn()
	js := nodes[0].JetStream()
	// A stream's create advisory may come after its create was answered:
	// one of a stream the first provisioning made is not the second's.
	existed := map[string]bool{}
	for name := range js.StreamNames(t.Context()).Name() {
		existed[name] = true
	}
	advisories, err := nc.SubscribeSync("$JS.EVENT.ADVISORY.STREAM.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	again, err := bus.Connect(t.Context(), bus.Config{NATSURL: nodes[1].ClientURL(), Replicas: 3})
	if err != nil {
		t.Fatalf("provisioning again: %v", err)
	}
	defer again.Close()
	// A marker stream created after the second provisioning: every advisory
	// before its own came from that provisioning.
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "MARKER", Subjects: []string{"marker"}}); err != nil {
		t.Fatal(err)
	}
	for {
		m, err := advisories.NextMsg(30 * time.Second)
		if err != nil {
			t.Fatalf("the marker's advisory: %v", err)
		}
		var adv struct {
			Stream string `json:"stream"`
			Action string `json:"action"`
		}
		if err := json.Unmarshal(m.Data, &adv); err != nil {
			t.Fatal(err)
		}
		if adv.Stream == "MARKER" {
			break
		}
		if adv.Action == "create" && existed[adv.Stream] {
			continue // the first provisioning's, late
		}
		t.Errorf("provisioning an unchanged deployment: stream %s %s", adv.Stream, adv.Action)
	}
	for _, name := range []string{bus.StreamChats, bus.StreamTasks, bus.StreamGoals, "KV_" + bus.BucketGoals, "KV_" + bus.BucketChats,
		"KV_" + bus.BucketAgents, "KV_" + bus.BucketPresence, "KV_" + bus.BucketLeases, "KV_" + bus.BucketOutcomes} {
		st, err := js.Stream(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		if st.CachedInfo().Config.AllowDirect {
			t.Errorf("%s reads with direct gets on a replicated deployment", name)
		}
	}
}
