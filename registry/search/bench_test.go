package search

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// syntheticDocs makes n cards by sampling words and capabilities of the dev set.
func syntheticDocs(b testing.TB, n int) ([]Doc, []string) {
	docs, qs, _ := loadDev(b)
	var words, caps, tags []string
	for _, d := range docs {
		words = append(words, strings.Fields(d.Description)...)
		caps = append(caps, d.Capabilities...)
		tags = append(tags, d.Tags...)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func(xs []string, k int) []string {
		out := make([]string, k)
		for i := range out {
			out[i] = xs[rng.IntN(len(xs))]
		}
		return out
	}
	out := make([]Doc, n)
	for i := range out {
		out[i] = Doc{
			Name:         fmt.Sprintf("agent-%06d", i),
			Description:  strings.Join(pick(words, 20), " "),
			Capabilities: pick(caps, 4),
			Tags:         pick(tags, 3),
		}
	}
	texts := make([]string, len(qs))
	for i, q := range qs {
		texts[i] = q.Query
	}
	return out, texts
}

func BenchmarkSearch(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			docs, texts := syntheticDocs(b, n)
			ix, err := NewIndex(nil)
			if err != nil {
				b.Fatal(err)
			}
			// The lexicon's tables are per process, not per card: load them
			// before measuring.
			if err := ix.Upsert(b.Context(), Doc{Name: "warm-up", Description: "warm up"}); err != nil {
				b.Fatal(err)
			}
			if err := ix.Delete(b.Context(), "warm-up"); err != nil {
				b.Fatal(err)
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			start := time.Now()
			for _, d := range docs {
				if err := ix.Upsert(b.Context(), d); err != nil {
					b.Fatal(err)
				}
			}
			build := time.Since(start)
			runtime.GC()
			runtime.ReadMemStats(&after)
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				t0 := time.Now()
				if _, err := ix.Search(b.Context(), Query{Texts: []string{texts[i%len(texts)]}, Limit: 10}); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			b.StopTimer()
			slices.Sort(lat)
			q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
			b.ReportMetric(q(0.50), "p50-ms")
			b.ReportMetric(q(0.99), "p99-ms")
			b.ReportMetric(float64(n)/build.Seconds(), "upserts/s")
			b.ReportMetric(build.Seconds(), "build-s")
			b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(n), "heap-B/doc")
		})
	}
}

func BenchmarkEmbedQuery(b *testing.B) {
	e := LocalEmbedder()
	for b.Loop() {
		if _, err := e(b.Context(), "Which of our subscribers look likely to cancel soon, based on how often they log in?"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSearchFewCards times a search of an index as small as a
// development runtime's (six short cards, one shard): what a launcher's
// team-up pays per clause when the registry holds only its team.
func BenchmarkSearchFewCards(b *testing.B) {
	ix, err := NewIndex(nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, d := range []Doc{
		{Name: "counter", Description: "Counts apples in a basket."},
		{Name: "painter", Description: "Paints fences in bright colours."},
		{Name: "writer", Description: "Writes a summary of earlier results."},
		{Name: "coordinator", Description: "Leads teams: splits a goal and assigns its parts."},
		{Name: "member-1", Description: "bench member one"},
		{Name: "member-2", Description: "bench member two"},
	} {
		if err := ix.Upsert(b.Context(), d); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		if _, err := ix.Search(b.Context(), Query{Texts: []string{"Count the apples"}, Limit: 5}); err != nil {
			b.Fatal(err)
		}
	}
}
