package search

import (
	"fmt"
	"os"
	"testing"
)

// TestSweep prints quality across option settings; run with SEARCH_SWEEP=1.
func TestSweep(t *testing.T) {
	if os.Getenv("SEARCH_SWEEP") == "" {
		t.Skip("set SEARCH_SWEEP=1")
	}
	docs, qs, _ := loadDev(t)
	for _, wd := range []float64{0.4, 0.5, 0.6, 0.7} {
		for _, ew := range []float64{0.3, 0.5} {
			r := evalIndex(t, buildIndex(t, docs, WithDenseWeight(wd), WithExpansionWeight(ew)), qs, len(docs))
			o := r.Overall
			fmt.Printf("wd=%.1f ew=%.1f  top1=%.3f top10=%.3f MRR=%.3f MR=%.1f | para %.3f ind %.3f\n", wd, ew, o.Top1, o.Top10, o.MRR, o.MeanRank, r.ByDifficulty["paraphrase"].MRR, r.ByDifficulty["indirect"].MRR)
		}
	}
}
