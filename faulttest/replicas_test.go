package faulttest

import (
	"strings"
	"testing"

	"github.com/ioa-nats/ioa/bus"
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
