package registry

import (
	"context"
	"encoding/json"
	"hash/fnv"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/registry/search"
)

// fakeEmbedder is an OpenAI-compatible /v1/embeddings server: a text's
// vector is its bag of hashed words. While down it answers 503.
type fakeEmbedder struct {
	*httptest.Server
	down  atomic.Bool
	mu    sync.Mutex
	calls []string // inputs answered
}

func newFakeEmbedder(t *testing.T) *fakeEmbedder {
	f := &fakeEmbedder{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/embeddings" || r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		if f.down.Load() {
			http.Error(w, `{"error":{"message":"overloaded"}}`, http.StatusServiceUnavailable)
			return
		}
		var req struct{ Input, Model string }
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Input == "" {
			http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
			return
		}
		vec := make([]float32, 64)
		for _, word := range strings.FieldsFunc(strings.ToLower(req.Input), func(r rune) bool { return r < 'a' || r > 'z' }) {
			h := fnv.New32a()
			h.Write([]byte(word))
			vec[h.Sum32()%64]++
		}
		var n float64
		for _, x := range vec {
			n += float64(x * x)
		}
		for i := range vec {
			vec[i] /= float32(math.Sqrt(max(n, 1)))
		}
		f.mu.Lock()
		f.calls = append(f.calls, req.Input)
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "model": req.Model,
			"data": []map[string]any{{"object": "embedding", "index": 0, "embedding": vec}}})
	}))
	t.Cleanup(f.Close)
	return f
}

// cardCalls counts the embedding requests whose text contains s.
func (f *fakeEmbedder) cardCalls(s string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if strings.Contains(c, s) {
			n++
		}
	}
	return n
}

// Cards registered while the embedding service is down are indexed in the
// background once it answers, and their vectors, kept on disk, are not asked
// for again by a restarted instance.
func TestRemoteEmbedderRecovers(t *testing.T) {
	f := newFakeEmbedder(t)
	f.down.Store(true)
	cfg := Config{
		Embedder:   search.OpenAIEmbedder(f.URL+"/v1", "test-key", "fake-embed"),
		EmbedderID: "openai " + f.URL + " fake-embed", VectorDir: t.TempDir(),
		RetryInterval: 20 * time.Millisecond, RetryMax: 200 * time.Millisecond,
	}
	b, s := newRegistry(t, cfg)
	nc := b.Conn()
	register(t, nc, b, fleet[1]) // translator
	register(t, nc, b, fleet[2]) // sql-writer
	eventually(t, 5*time.Second, "both cards pending", func() bool { return s.Pending() == 2 })
	// Searching needs the embedder too: unavailable, not an empty answer.
	wantError(t, raw(t, nc, b, "search", []byte(`{"query":"translate a letter into French"}`)), 503, protocol.ErrUnavailable.Code)

	f.down.Store(false)
	eventually(t, 10*time.Second, "the pending cards indexed", func() bool { return s.Pending() == 0 })
	got := searchNames(t, nc, b, protocol.SearchRequest{Query: "translate text into French", IncludeOffline: true})
	if len(got) != 2 || got[0] != "translator" {
		t.Fatalf("after recovery: %v, want translator first of both", got)
	}

	// A restart on the same store re-uses the vectors of the cards.
	before := f.cardCalls(fleet[1].Description)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	s2 := start(t, b, cfg)
	if got := searchVia(t, s2, protocol.SearchRequest{Query: "write an SQL query for my database", IncludeOffline: true}); len(got) != 2 || got[0] != "sql-writer" {
		t.Fatalf("after restart: %v, want sql-writer first of both", got)
	}
	if after := f.cardCalls(fleet[1].Description); after != before {
		t.Errorf("the restarted instance embedded the translator card again (%d calls, %d before)", after, before)
	}
	if s2.Pending() != 0 {
		t.Errorf("%d pending after restart", s2.Pending())
	}
}
