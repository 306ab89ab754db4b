package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/registry"
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

func newRegistryEvalCmd() *cobra.Command {
	var agents, queries, embedder, embedderURL, embedderModel string
	cmd := &cobra.Command{
		Use:   "eval",
		Short: "Measure the registry's search on a labelled set, through NATS, beside plain BM25",
		Long: `eval starts NATS in-process (no listener, a temporary store) and a registry
instance, registers every agent through ioa.registry.register, asks
ioa.registry.search for every query and prints Top@1, Top@10, mean rank and
MRR overall and per difficulty, beside a plain BM25 baseline on the same data.
The API key of an openai embedder is read from IOA_EMBEDDER_API_KEY.`,
		Example: `  ioa registry eval --agents registry/search/testdata/discovery-dev/agents.jsonl --queries registry/search/testdata/discovery-dev/queries.jsonl
  ioa registry eval --agents a.jsonl --queries q.jsonl --embedder ollama --embedder-model nomic-embed-text`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if agents == "" || queries == "" {
				return errors.New("registry eval: --agents and --queries are required (jsonl files, e.g. registry/search/testdata/discovery-dev/agents.jsonl and queries.jsonl)")
			}
			set, err := registry.LoadEvalSet(agents, queries)
			if err != nil {
				return err
			}
			emb, err := registry.NewEmbedder(embedder, embedderURL, embedderModel, os.Getenv("IOA_EMBEDDER_API_KEY"))
			if err != nil {
				return err
			}
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
		},
	}
	f := cmd.Flags()
	f.StringVar(&agents, "agents", "", "agent cards, one JSON object per line (required)")
	f.StringVar(&queries, "queries", "", `queries, one {"id","query","gold","also_ok","difficulty"} per line (required)`)
	f.StringVar(&embedder, "embedder", registry.EmbedderLocal, "embedder: local, openai or ollama")
	f.StringVar(&embedderURL, "embedder-url", "", "base URL of the openai or ollama embedder")
	f.StringVar(&embedderModel, "embedder-model", "", "model of the openai or ollama embedder")
	return cmd
}
