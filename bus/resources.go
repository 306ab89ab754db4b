package bus

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Names of the JetStream resources of docs/protocol.md section 12.
const (
	StreamChats  = "IOA_CHATS"
	StreamTasks  = "IOA_TASKS"
	StreamGoals  = "IOA_GOALS"
	BucketAgents = "ioa_agents"
	BucketGoals  = "ioa_goals"
	BucketChats  = "ioa_chats"
	// BucketPresence (an addition to the v1 protocol) holds the registry's
	// heartbeats apart from the cards, in memory: a heartbeat never
	// rewrites a card, and liveness needs no disk.
	BucketPresence = "ioa_presence"
	// BucketLeases (internal, admin only) holds the orchestrator instances'
	// partition leases and presence: which instance referees which chats.
	BucketLeases = "ioa_leases"
	// BucketOutcomes (an addition to the v1 protocol) holds, under each
	// agent's name, the latest tasks it finished and how: the registry's
	// evidence of what an agent can do beyond its card.
	BucketOutcomes = "ioa_outcomes"
)

// presenceMaxAge only collects leftovers: liveness is computed from the
// heartbeat's time stamp and the TTL, not from expiry.
const presenceMaxAge = 24 * time.Hour

// How long JetStream remembers a stream's Nats-Msg-Id values. The server
// keeps about 100 bytes per id for the window, so the window is memory that
// grows with the write rate: at 400 goals/s (27 ids each in IOA_CHATS and
// IOA_GOALS) ten minutes would hold some 600 MB. A chat entry or goal event
// is only ever sent again while its writer settles a lost ack (settleFor,
// 20 s) or resends an event (15.5 s); a task result may be published again
// by an instance that took its chat over, and keeps the longer window.
const (
	dedupWindow      = 2 * time.Minute
	dedupWindowTasks = 10 * time.Minute
)

// provision creates or updates the streams and buckets, so starting twice,
// or many processes starting at once, is harmless.
func (b *Bus) provision(ctx context.Context) error {
	s := b.subjects
	maxMsg := int32(b.cfg.MaxMessageBytes * 2) // stored messages carry stamps beyond the body
	streams := []jetstream.StreamConfig{
		{Name: StreamChats, Subjects: []string{s.AllChats()}, Description: "IoA chat logs", MaxMsgSize: maxMsg, AllowDirect: true},
		{Name: StreamTasks, Subjects: []string{s.AllTasks()}, Description: "IoA task results (triggers)", MaxMsgSize: maxMsg, AllowDirect: true},
		{Name: StreamGoals, Subjects: []string{s.AllGoalEvents(), s.AllGoalResults()}, Description: "IoA goal events and results", MaxMsgSize: maxMsg, AllowDirect: true},
	}
	for _, sc := range streams {
		if err := b.checkOwner(ctx, sc); err != nil {
			return err
		}
		if err := b.checkReplicas(ctx, sc.Name); err != nil {
			return err
		}
		sc.Storage = jetstream.FileStorage
		sc.Replicas = b.cfg.Replicas
		sc.AllowDirect = directGets(b.cfg.Replicas)
		sc.Duplicates = dedupWindow
		if sc.Name == StreamTasks {
			sc.Duplicates = dedupWindowTasks
		}
		if age := b.cfg.Retention.MaxAge; age > 0 && sc.Duplicates > age {
			sc.Duplicates = age // the server refuses a window longer than the age
		}
		sc.MaxAge, sc.MaxBytes, sc.Discard = b.cfg.Retention.MaxAge, b.cfg.Retention.MaxBytes, jetstream.DiscardOld
		if err := b.ensureStream(ctx, sc); err != nil {
			return fmt.Errorf("bus: stream %s: %w", sc.Name, err)
		}
	}
	for _, kc := range []jetstream.KeyValueConfig{
		// Cards live as long as their agents are registered: a long-lived
		// agent heartbeats (in ioa_presence) and never rewrites its card.
		{Bucket: BucketAgents, Description: "IoA agent cards (registry source of truth)"},
		// Goal and chat records are rewritten on every change, so an entry
		// older than the retention age belongs to a goal long ended.
		{Bucket: BucketGoals, Description: "IoA goal tree and status", TTL: b.cfg.Retention.MaxAge},
		{Bucket: BucketChats, Description: "IoA chat referee state", TTL: b.cfg.Retention.MaxAge},
		// An agent's outcomes are rewritten whenever it finishes a task;
		// one idle for the retention age has nothing recent to say.
		{Bucket: BucketOutcomes, Description: "IoA agents' finished tasks (registry outcome learning)", TTL: b.cfg.Retention.MaxAge},
	} {
		if err := b.checkReplicas(ctx, "KV_"+kc.Bucket); err != nil {
			return err
		}
		kc.Storage = jetstream.FileStorage
		kc.Replicas = b.cfg.Replicas
		kc.MaxValueSize = maxMsg * 4
		if err := b.ensureBucket(ctx, kc); err != nil {
			return fmt.Errorf("bus: bucket %s: %w", kc.Bucket, err)
		}
	}
	presence := jetstream.KeyValueConfig{
		Bucket: BucketPresence, Description: "IoA agent heartbeats (registry liveness)",
		TTL: presenceMaxAge, Storage: jetstream.MemoryStorage, Replicas: b.cfg.Replicas,
	}
	if err := b.checkReplicas(ctx, "KV_"+presence.Bucket); err != nil {
		return err
	}
	if err := b.ensureBucket(ctx, presence); err != nil {
		return fmt.Errorf("bus: bucket %s: %w", presence.Bucket, err)
	}
	// Leases live seconds and are renewed all the time: memory, like
	// presence; a lost bucket only means every partition is taken afresh.
	leases := jetstream.KeyValueConfig{
		Bucket: BucketLeases, Description: "IoA orchestrator partition leases (internal)",
		TTL: presenceMaxAge, Storage: jetstream.MemoryStorage, Replicas: b.cfg.Replicas,
	}
	if err := b.checkReplicas(ctx, "KV_"+leases.Bucket); err != nil {
		return err
	}
	if err := b.ensureBucket(ctx, leases); err != nil {
		return fmt.Errorf("bus: bucket %s: %w", leases.Bucket, err)
	}
	return nil
}

// directGets is whether the streams of a deployment with this many
// replicas are read with direct gets. A direct get is answered by any
// replica, and a follower may not have applied a write its leader has
// acknowledged: the orchestrator would not find a goal it has just created,
// or a chat it has just started. With direct gets off, reads go to the
// leader, which costs a little latency and keeps read-after-write.
func directGets(replicas int) bool { return replicas <= 1 }

// ensureStream creates a stream, or updates an existing one whose settings
// differ: an update that changes nothing still goes through the cluster's
// meta leader and tells every replica to reload.
func (b *Bus) ensureStream(ctx context.Context, sc jetstream.StreamConfig) error {
	st, err := b.js.Stream(ctx, sc.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		_, err = b.js.CreateStream(ctx, sc)
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return b.ensureStream(ctx, sc) // another process created it a moment ago
		}
		return err
	}
	if err != nil {
		return err
	}
	have := st.CachedInfo().Config
	want := have
	want.Subjects, want.Description, want.MaxMsgSize = sc.Subjects, sc.Description, sc.MaxMsgSize
	want.Replicas, want.Duplicates, want.AllowDirect = sc.Replicas, sc.Duplicates, sc.AllowDirect
	want.MaxAge, want.MaxBytes, want.Discard = sc.MaxAge, sc.MaxBytes, sc.Discard
	if want.MaxBytes == 0 {
		want.MaxBytes = -1 // what the server stores for "no limit"
	}
	if reflect.DeepEqual(have, want) {
		return nil
	}
	_, err = b.js.UpdateStream(ctx, want)
	return err
}

// ensureBucket creates a bucket, or brings an existing one's settings in
// line without going through CreateOrUpdateKeyValue: that would turn
// direct gets on for a moment on every start, and a process that opens the
// bucket in that moment reads with direct gets for good, which no server
// answers once they are off again ("no responders" on every read).
func (b *Bus) ensureBucket(ctx context.Context, kc jetstream.KeyValueConfig) error {
	st, err := b.js.Stream(ctx, "KV_"+kc.Bucket)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		// Created as CreateKeyValue would, but with direct gets as
		// directGets says from the start: turning them off afterwards
		// would strand the handles other processes open meanwhile.
		_, err = b.js.CreateStream(ctx, kvStream(kc))
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return b.ensureBucket(ctx, kc) // another process created it a moment ago
		}
		return err
	}
	if err != nil {
		return err
	}
	have := st.CachedInfo().Config
	want := have
	want.Description, want.Replicas, want.MaxAge = kc.Description, kc.Replicas, kc.TTL
	if kc.MaxValueSize != 0 {
		want.MaxMsgSize = kc.MaxValueSize
	}
	want.AllowDirect = directGets(kc.Replicas)
	if reflect.DeepEqual(have, want) {
		return nil
	}
	_, err = b.js.UpdateStream(ctx, want)
	return err
}

// checkReplicas refuses to lower the replicas of an existing stream: a
// process started with the default (1) against a cluster provisioned with 3
// would otherwise quietly take the streams' redundancy away.
func (b *Bus) checkReplicas(ctx context.Context, stream string) error {
	st, err := b.js.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("bus: stream %s: %w", stream, err)
	}
	if have := st.CachedInfo().Config.Replicas; have > b.cfg.Replicas {
		return fmt.Errorf("bus: stream %s has %d replicas and this process asks for %d: refusing to lower them; set bus.replicas to %d (IOA_BUS_REPLICAS=%d), or change the stream with the nats CLI if fewer are meant",
			stream, have, b.cfg.Replicas, have, have)
	}
	return nil
}

// checkOwner refuses to take over a stream that another deployment, with
// another subject prefix, created on the same NATS account: the names of the
// streams and buckets are fixed (docs/protocol.md section 12), so two prefixes cannot
// share an account, and updating the stream would silently cut the other
// deployment off its own logs.
func (b *Bus) checkOwner(ctx context.Context, want jetstream.StreamConfig) error {
	st, err := b.js.Stream(ctx, want.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("bus: stream %s: %w", want.Name, err)
	}
	if have := st.CachedInfo().Config.Subjects; !slices.Equal(have, want.Subjects) {
		return fmt.Errorf("bus: stream %s on this NATS account serves %s, not %s: another deployment with a different bus.prefix uses it; give each prefix its own account or server, or use its prefix",
			want.Name, strings.Join(have, " "), strings.Join(want.Subjects, " "))
	}
	return nil
}

// KV opens one of the protocol's buckets.
func (b *Bus) KV(ctx context.Context, bucket string) (jetstream.KeyValue, error) {
	kv, err := b.js.KeyValue(ctx, bucket)
	if err != nil {
		return nil, fmt.Errorf("bus: bucket %s: %w", bucket, err)
	}
	return kv, nil
}

// kvStream is the stream of a bucket as nats.go's CreateKeyValue (v1.55)
// makes it, with direct gets as directGets says.
func kvStream(kc jetstream.KeyValueConfig) jetstream.StreamConfig {
	history := int64(max(kc.History, 1))
	maxBytes, maxMsgSize := kc.MaxBytes, kc.MaxValueSize
	if maxBytes == 0 {
		maxBytes = -1
	}
	if maxMsgSize == 0 {
		maxMsgSize = -1
	}
	dup := 2 * time.Minute
	if kc.TTL > 0 && kc.TTL < dup {
		dup = kc.TTL
	}
	replicas := max(kc.Replicas, 1)
	return jetstream.StreamConfig{
		Name: "KV_" + kc.Bucket, Description: kc.Description, Subjects: []string{"$KV." + kc.Bucket + ".>"},
		MaxMsgsPerSubject: history, MaxBytes: maxBytes, MaxAge: kc.TTL, MaxMsgSize: maxMsgSize,
		Storage: kc.Storage, Replicas: replicas, AllowRollup: true, DenyDelete: true, Duplicates: dup,
		MaxMsgs: -1, MaxConsumers: -1, AllowDirect: directGets(replicas), Discard: jetstream.DiscardNew,
	}
}
