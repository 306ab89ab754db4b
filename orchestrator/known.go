package orchestrator

import (
	"sync"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/segmentio/encoding/json"
)

// knownGoals keeps the last goal record this instance wrote and its KV
// revision, for the goals it is running, so that updateGoal can write with
// compare-and-set without reading the record first. A copy that is not the
// latest only costs the refused write and the read it saved. The record is
// kept encoded: each get decodes a copy of its own.
type knownGoals struct {
	mu   sync.Mutex
	byID map[string]knownGoal
}

type knownGoal struct {
	data []byte
	rev  uint64
}

// maxKnownGoals bounds the copies kept; past it they are all let go (each
// is only a saved read).
const maxKnownGoals = 4096

func (k *knownGoals) get(id string) (protocol.GoalStatus, uint64, bool) {
	k.mu.Lock()
	g, ok := k.byID[id]
	k.mu.Unlock()
	var st protocol.GoalStatus
	if !ok || json.Unmarshal(g.data, &st) != nil {
		return st, 0, false
	}
	return st, g.rev, true
}

// put keeps st, encoded as data, at rev; an ended goal is let go (it is
// rarely written again).
func (k *knownGoals) put(id string, st protocol.GoalStatus, data []byte, rev uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if protocol.GoalEnded(st.Status) {
		delete(k.byID, id)
		return
	}
	if k.byID == nil || len(k.byID) >= maxKnownGoals {
		k.byID = map[string]knownGoal{}
	}
	k.byID[id] = knownGoal{data: data, rev: rev}
}

func (k *knownGoals) drop(id string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.byID, id)
}
