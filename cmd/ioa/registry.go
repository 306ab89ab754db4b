package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/registry"
	"github.com/ioa-nats/ioa/registry/search"
)

func newRegistryCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "registry",
		Short: "Tools for the agent registry",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newRegistryEvalCmd())
	return cmd
}

// evalWorlds are the labelled worlds ioa registry eval measures by default:
// the development world (tuned on) and the test world (never tuned on).
var evalWorlds = []string{"registry/search/testdata/discovery-dev", "registry/search/testdata/discovery-test"}

func newRegistryEvalCmd() *cobra.Command {
	var agents, queries, embedder, embedderURL, embedderModel string
	var worlds []string
	var replay bool
	cmd := &cobra.Command{
		Use:   "eval",
		Short: "Measure the registry's search on labelled worlds, through NATS, beside plain BM25",
		Long: `eval starts NATS in-process (no listener, a temporary store) and a registry
instance per world, registers every agent through ioa.registry.register, asks
ioa.registry.search for every query and prints Top@1, Top@10, mean rank and
MRR overall and per difficulty, beside a plain BM25 baseline on the same data.

By default it measures the two worlds of registry/search/testdata (run it from
the repository's root): discovery-dev, which the ranker was tuned on, and
discovery-test, which nothing was tuned on; only the second says how well
search generalizes. --world names other directories of the same layout;
--agents and --queries name one world's files. --replay also runs, on each
world, the outcome replay protocol of package registry/search: part of the
tasks replayed as finished (by the agent the registry picks, or by the right
one), the rest searched afterwards, with and without that history.
The API key of an openai embedder is read from IOA_EMBEDDER_API_KEY.`,
		Example: `  ioa registry eval
  ioa registry eval --world registry/search/testdata/discovery-test --replay
  ioa registry eval --agents a.jsonl --queries q.jsonl --embedder ollama --embedder-model nomic-embed-text`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			type world struct{ name, agents, queries string }
			var ws []world
			switch {
			case agents != "" || queries != "":
				if agents == "" || queries == "" {
					return errors.New("registry eval: --agents and --queries go together")
				}
				ws = append(ws, world{agents, agents, queries})
			default:
				dirs := worlds
				if len(dirs) == 0 {
					dirs = evalWorlds
				}
				for _, d := range dirs {
					ws = append(ws, world{filepath.Base(d), filepath.Join(d, "agents.jsonl"), filepath.Join(d, "queries.jsonl")})
				}
			}
			emb, err := registry.NewEmbedder(embedder, embedderURL, embedderModel, os.Getenv("IOA_EMBEDDER_API_KEY"))
			if err != nil {
				return err
			}
			for i, w := range ws {
				set, err := registry.LoadEvalSet(w.agents, w.queries)
				if err != nil {
					if len(worlds) == 0 && agents == "" && errors.Is(err, os.ErrNotExist) {
						return fmt.Errorf("%w (run from the repository's root, or name the files with --world or --agents and --queries)", err)
					}
					return err
				}
				if i > 0 {
					fmt.Fprintln(cmd.OutOrStdout())
				}
				fmt.Fprintf(cmd.OutOrStdout(), "== %s\n", w.name)
				if err := evalWorld(cmd, emb, set); err != nil {
					return err
				}
				if replay {
					rep, err := search.ReplayOutcomes(cmd.Context(), set.Agents, set.Queries, func() (*search.Index, error) { return search.NewIndex(emb) })
					if err != nil {
						return err
					}
					fmt.Fprintln(cmd.OutOrStdout())
					if err := rep.WriteTable(cmd.OutOrStdout()); err != nil {
						return err
					}
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&worlds, "world", nil, "a directory with agents.jsonl and queries.jsonl (repeatable; default: the dev and test worlds)")
	f.BoolVar(&replay, "replay", false, "also run the outcome replay protocol on each world (in process: learning from finished tasks)")
	f.StringVar(&agents, "agents", "", "agent cards, one JSON object per line")
	f.StringVar(&queries, "queries", "", `queries, one {"id","query","gold","also_ok","difficulty"} per line`)
	f.StringVar(&embedder, "embedder", registry.EmbedderLocal, "embedder: local, openai or ollama")
	f.StringVar(&embedderURL, "embedder-url", "", "base URL of the openai or ollama embedder")
	f.StringVar(&embedderModel, "embedder-model", "", "model of the openai or ollama embedder")
	return cmd
}

// evalWorld measures one world on a bus of its own.
func evalWorld(cmd *cobra.Command, emb search.Embedder, set registry.EvalSet) error {
	tmp, err := os.MkdirTemp("", "ioa-registry-eval-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	ctx := cmd.Context()
	b, err := bus.Start(ctx, bus.Config{Listen: bus.NoListen, DataDir: tmp})
	if err != nil {
		return err
	}
	defer b.Close()
	stderr := cmd.ErrOrStderr()
	res, err := registry.RunEval(ctx, b, registry.Config{Embedder: emb}, set, func(step string, done, total int) {
		if done == total || done%25 == 0 {
			fmt.Fprintf(stderr, "\r%-8s %d/%d", step, done, total)
			if done == total {
				fmt.Fprintln(stderr)
			}
		}
	})
	if err != nil {
		return err
	}
	return res.WriteTable(cmd.OutOrStdout())
}
