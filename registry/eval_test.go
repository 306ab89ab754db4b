package registry

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ioa-nats/ioa/bus/bustest"
)

const devDir = "search/testdata/discovery-dev"

// The service passes the index's ranking through faithfully: measured end to
// end through NATS, it beats the plain BM25 baseline on the dev set. The
// quality targets themselves are asserted by package search.
func TestEvalThroughService(t *testing.T) {
	if testing.Short() {
		t.Skip("400 searches through NATS")
	}
	set, err := LoadEvalSet(filepath.Join(devDir, "agents.jsonl"), filepath.Join(devDir, "queries.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := RunEval(t.Context(), bustest.New(t), Config{}, set, nil)
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	if err := res.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", table.String())
	s, base := res.Service.Overall, res.Baseline.Overall
	if s.N != len(set.Queries) || base.N != len(set.Queries) {
		t.Fatalf("evaluated %d and %d queries, want %d", s.N, base.N, len(set.Queries))
	}
	if s.Top1 <= base.Top1 || s.Top10 <= base.Top10 || s.MRR <= base.MRR {
		t.Errorf("service (top1 %.3f top10 %.3f MRR %.3f) does not beat BM25 (top1 %.3f top10 %.3f MRR %.3f)",
			s.Top1, s.Top10, s.MRR, base.Top1, base.Top10, base.MRR)
	}
}
