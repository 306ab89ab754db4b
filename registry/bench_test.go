package registry

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/bus/bustest"
	"github.com/ioa-nats/ioa/registry/search"
)

// synthetic returns n cards derived from the dev set: card i is dev card
// i mod 200 under a new name, with the capabilities of another card mixed
// in, so that large registries are not 50 copies of the same 200 texts.
func synthetic(tb testing.TB, n int) ([]search.Doc, []search.EvalQuery) {
	tb.Helper()
	set, err := LoadEvalSet(filepath.Join(devDir, "agents.jsonl"), filepath.Join(devDir, "queries.jsonl"))
	if err != nil {
		tb.Fatal(err)
	}
	dev := set.Agents
	docs := make([]search.Doc, n)
	for i := range docs {
		d, o := dev[i%len(dev)], dev[(i*7+i/len(dev))%len(dev)]
		d.Name = fmt.Sprintf("%s-%d", d.Name, i)
		if i >= len(dev) {
			d.Capabilities = append(slices.Clip(d.Capabilities), o.Capabilities[0])
			d.Description += " Also: " + o.Capabilities[len(o.Capabilities)-1] + "."
		}
		docs[i] = d
	}
	return docs, set.Queries
}

func registerSynthetic(tb testing.TB, b *bus.Bus, docs []search.Doc) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), 5*time.Minute)
	defer cancel()
	if err := RegisterAll(ctx, b.Conn(), b.Subjects(), docs, nil); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkSearch measures one registry.search round trip through NATS
// (default limit 10), reporting the median and 99th percentile latency.
func BenchmarkSearch(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("agents=%d", n), func(b *testing.B) {
			bb := bustest.New(b)
			start(b, bb, Config{MaxAgentsPerConn: n})
			docs, queries := synthetic(b, n)
			registerSynthetic(b, bb, docs)
			nc, subj := bb.Conn(), bb.Subjects()
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				t0 := time.Now()
				names, err := SearchNames(b.Context(), nc, subj, protocol.SearchRequest{Query: queries[i%len(queries)].Query})
				lat = append(lat, time.Since(t0))
				if err != nil || len(names) == 0 {
					b.Fatalf("search: %v (%d results)", err, len(names))
				}
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// BenchmarkRegister measures registrations through NATS, eight in flight,
// on one instance.
func BenchmarkRegister(b *testing.B) {
	bb := bustest.New(b)
	start(b, bb, Config{MaxAgentsPerConn: 1 << 30})
	base, _ := synthetic(b, 1000)
	b.ResetTimer()
	var docs []search.Doc
	for i := range b.N {
		d := base[i%len(base)]
		d.Name = fmt.Sprintf("reg-%d", i)
		docs = append(docs, d)
	}
	t0 := time.Now()
	registerSynthetic(b, bb, docs)
	b.ReportMetric(float64(b.N)/time.Since(t0).Seconds(), "regs/s")
}

// BenchmarkHeartbeat measures heartbeats through NATS, one at a time.
func BenchmarkHeartbeat(b *testing.B) {
	bb := bustest.New(b)
	start(b, bb, Config{})
	nc := bb.Conn()
	register(b, nc, bb, card("beater", "sends heartbeats"))
	t0 := time.Now()
	for b.Loop() {
		call[protocol.HeartbeatReply](b, nc, bb, bus.RegistryHeartbeat, protocol.NameRequest{Name: "beater"})
	}
	b.ReportMetric(float64(b.N)/time.Since(t0).Seconds(), "beats/s")
}

// BenchmarkMemoryPerAgent measures what one registry instance holds per
// agent (view and search index): the heap growth when a second instance
// starts and replays a KV of n agents, so the server's own storage is not
// counted.
func BenchmarkMemoryPerAgent(b *testing.B) {
	const n = 5000
	bb := bustest.New(b)
	start(b, bb, Config{MaxAgentsPerConn: n})
	docs, _ := synthetic(b, n)
	registerSynthetic(b, bb, docs)
	var perAgent float64
	for b.Loop() {
		before := heap()
		s := start(b, bb, Config{})
		if s.Len() != n {
			b.Fatalf("replayed %d agents", s.Len())
		}
		perAgent = float64(heap()-before) / n
		runtime.KeepAlive(s)
		if err := s.Shutdown(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(perAgent, "B/agent")
}

func heap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
