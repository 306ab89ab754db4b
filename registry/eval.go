package registry

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/registry/search"
)

// EvalSet is a labelled discovery set: agent cards and the tasks that each
// need one of them (the format of registry/search/testdata/discovery-dev).
type EvalSet struct {
	Agents  []search.Doc
	Queries []search.EvalQuery
}

// LoadEvalSet reads an agents.jsonl and a queries.jsonl file.
func LoadEvalSet(agentsPath, queriesPath string) (EvalSet, error) {
	var set EvalSet
	f, err := os.Open(agentsPath)
	if err != nil {
		return set, fmt.Errorf("registry: eval: %w", err)
	}
	defer f.Close()
	if set.Agents, err = search.LoadAgents(f); err != nil {
		return set, fmt.Errorf("registry: eval: %s: %w", agentsPath, err)
	}
	g, err := os.Open(queriesPath)
	if err != nil {
		return set, fmt.Errorf("registry: eval: %w", err)
	}
	defer g.Close()
	if set.Queries, err = search.LoadQueries(g); err != nil {
		return set, fmt.Errorf("registry: eval: %s: %w", queriesPath, err)
	}
	if len(set.Agents) == 0 || len(set.Queries) == 0 {
		return set, fmt.Errorf("registry: eval: %d agents and %d queries: both must be non-empty", len(set.Agents), len(set.Queries))
	}
	return set, nil
}

// Progress is told how far a long step has come.
type Progress func(step string, done, total int)

// EvalResult is the service's ranking quality beside the BM25 baseline's on
// the same set.
type EvalResult struct {
	Service, Baseline search.Report
	Agents, Queries   int
	// Limit is the search limit the service was asked for; an agent it did
	// not return ranks Agents+1, like one the baseline did not match.
	Limit                  int
	RegisterTime, EvalTime time.Duration
}

// RunEval starts a registry instance on b with cfg, registers every agent of
// set through registry.register, runs every query through registry.search
// (at the largest allowed limit, offline agents included so that a long run
// is not cut short by the heartbeat TTL) and scores the rankings beside
// search.BM25Baseline's. The instance is shut down before RunEval returns.
func RunEval(ctx context.Context, b *bus.Bus, cfg Config, set EvalSet, progress Progress) (EvalResult, error) {
	if progress == nil {
		progress = func(string, int, int) {}
	}
	cfg.MaxAgentsPerConn = max(cfg.MaxAgentsPerConn, len(set.Agents))
	svc, err := New(b, cfg)
	if err != nil {
		return EvalResult{}, err
	}
	if err := svc.Start(ctx); err != nil {
		return EvalResult{}, err
	}
	defer svc.Shutdown(context.WithoutCancel(ctx))

	res := EvalResult{Agents: len(set.Agents), Queries: len(set.Queries), Limit: min(svc.cfg.MaxResults, len(set.Agents))}
	nc := b.Conn()
	subj := b.Subjects()
	start := time.Now()
	if err := RegisterAll(ctx, nc, subj, set.Agents, func(done, total int) { progress("register", done, total) }); err != nil {
		return res, err
	}
	res.RegisterTime = time.Since(start)

	start = time.Now()
	done := 0
	res.Service, err = search.Evaluate(set.Queries, len(set.Agents), func(q search.EvalQuery) ([]string, error) {
		names, err := SearchNames(ctx, nc, subj, protocol.SearchRequest{Query: q.Query, Limit: res.Limit, IncludeOffline: true})
		done++
		progress("search", done, len(set.Queries))
		return names, err
	})
	if err != nil {
		return res, fmt.Errorf("registry: eval: %w", err)
	}
	res.EvalTime = time.Since(start)

	base := search.NewBM25Baseline(set.Agents)
	res.Baseline, err = search.Evaluate(set.Queries, len(set.Agents), func(q search.EvalQuery) ([]string, error) {
		return base.Rank(q.Query), nil
	})
	if err != nil {
		return res, fmt.Errorf("registry: eval: baseline: %w", err)
	}
	return res, nil
}

// registerParallel is how many registrations RegisterAll keeps in flight.
const registerParallel = 8

// RegisterAll registers docs as agent cards through registry.register on nc,
// several at a time, calling progress after each one.
func RegisterAll(ctx context.Context, nc *nats.Conn, subj bus.Subjects, docs []search.Doc, progress func(done, total int)) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		done int
		next = make(chan search.Doc)
	)
	for range registerParallel {
		wg.Go(func() {
			for d := range next {
				card := protocol.AgentCard{Name: d.Name, Description: d.Description, Capabilities: d.Capabilities, Type: d.Type, Tags: d.Tags}
				if err := bus.Request(ctx, nc, subj.Registry(bus.RegistryRegister), card, nil); err != nil {
					cancel(fmt.Errorf("registry: register %s: %w", d.Name, err))
					continue
				}
				mu.Lock()
				done++
				if progress != nil {
					progress(done, len(docs))
				}
				mu.Unlock()
			}
		})
	}
feed:
	for _, d := range docs {
		select {
		case next <- d:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err := context.Cause(ctx); err != nil && ctx.Err() != nil {
		return err
	}
	return nil
}

// SearchNames asks registry.search and returns the names of the results,
// best first.
func SearchNames(ctx context.Context, nc *nats.Conn, subj bus.Subjects, req protocol.SearchRequest) ([]string, error) {
	var reply protocol.SearchReply
	if err := bus.Request(ctx, nc, subj.Registry(bus.RegistrySearch), req, &reply); err != nil {
		return nil, err
	}
	names := make([]string, len(reply.Results))
	for i, r := range reply.Results {
		names[i] = r.Name
	}
	return names, nil
}

// WriteTable prints the service's metrics beside the baseline's, overall
// and per difficulty.
func (r EvalResult) WriteTable(w io.Writer) error {
	keys := make([]string, 0, len(r.Service.ByDifficulty))
	for k := range r.Service.ByDifficulty {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	ew := &errWriter{w: w}
	ew.printf("%d agents, %d queries; service searched through NATS at limit %d (register %s, search %s)\n\n",
		r.Agents, r.Queries, r.Limit, r.RegisterTime.Round(time.Millisecond), r.EvalTime.Round(time.Millisecond))
	ew.printf("%-11s %4s | %-29s | %-29s\n", "", "", "ioa-registry (via NATS)", "BM25 baseline")
	ew.printf("%-11s %4s | %6s %6s %7s %6s | %6s %6s %7s %6s\n", "difficulty", "n", "Top@1", "Top@10", "MR", "MRR", "Top@1", "Top@10", "MR", "MRR")
	row := func(name string, s, b search.Metrics) {
		ew.printf("%-11s %4d | %6.3f %6.3f %7.1f %6.3f | %6.3f %6.3f %7.1f %6.3f\n",
			name, s.N, s.Top1, s.Top10, s.MeanRank, s.MRR, b.Top1, b.Top10, b.MeanRank, b.MRR)
	}
	row("overall", r.Service.Overall, r.Baseline.Overall)
	for _, k := range keys {
		row(k, r.Service.ByDifficulty[k], r.Baseline.ByDifficulty[k])
	}
	return ew.err
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}
