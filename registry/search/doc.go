// Package search is the registry's capability search: given agent cards and
// a task, it ranks the agents so that the one that fits comes first.
//
// An Index fuses two views of each card. The dense view keeps one normalised
// vector per card in chromem-go, which is the store of record for the
// vectors and answers every nearest-neighbour query (QueryEmbedding, with
// where-filters on a query's type and tags). By default the vectors come from
// LocalEmbedder, which averages WordNet-distilled word vectors (package
// lexicon) and so needs no network or model download, but an
// OpenAI-compatible or Ollama embedder can be plugged in; WithPersistDir then
// keeps its vectors on disk (chromem-go's persistent store), so a restart
// does not embed every card again. The lexical view is a BM25F inverted index
// over the stemmed name, description, capabilities and tags, with query
// words expanded by their WordNet relatives. Each view's signals are
// standardised over the candidates before a weighted sum, so neither needs
// tuning to a corpus or an embedder's similarity range. What the index knows
// of its own cards adapts the ranker to any corpus: the dense view is centred
// on the mean card, which keeps generic cards from becoming hubs, and query
// and card words are weighted by how few cards share them.
//
// chromem-go scores every vector of a collection it is asked about (some
// 0.6 µs of CPU per 300-dimension vector here, where gonum's assembly dot
// product, which the index uses for its own scoring, takes 30 ns), so the
// cards are spread over
// collections of at most 256 (split by 2-means as they grow), and a query
// asks only the collections whose centroids are nearest to it, enough of
// them to cover 1024 cards, in parallel (dense.go). Below that size every
// collection is asked and the search is exact; above it TestShardRecall
// measures what the probe misses (on 500 real cards cut into shards of 32 and
// probed a quarter: 64% of the 50 nearest vectors found, the ranking of the
// dev tasks unchanged, because the lexical view brings the rest).
//
// The index learns from outcomes (SetOutcomes): the tasks an agent concluded
// extend its card as a field of their own, lexical and dense, at half the
// weight of a description, so a need that comes back in new words finds the
// agent that did it. A failure takes back the concluded tasks it resembles
// and adds nothing, so failures alone change no ranking. ReplayOutcomes is
// the protocol that measures it (replay.go).
//
// Each hit also has a Match, on an absolute scale in [0,1]: the soft
// word-by-word match of task and card in both directions, with task words that
// have no vector counted when a card uses them verbatim. Scores rank; the
// match says whether any card fits at all (TestMinMatchCalibration measures
// it on the development set).
//
// Evaluate, LoadAgents, LoadQueries and BM25Baseline measure a ranker on a
// labelled set: testdata/discovery-dev, which the ranker's constants were
// tuned on, and testdata/discovery-test, which nothing was tuned on (see
// testdata/README.md).
//
// Stemming is the English Snowball (Porter2) stemmer of the maintained
// github.com/kljensen/snowball. It replaced a hand-written Porter (1980)
// stemmer once measured on both worlds (`go test -v -run
// 'TestDevSetQuality|TestTestWorldQuality' ./registry/search`): dev Top@1
// 0.560 either way, Top@10 0.787 vs 0.785, MRR 0.631 vs 0.633; test Top@1
// 0.620 either way, Top@10 0.850 vs 0.848, MRR 0.697 vs 0.696 (snowball
// first): no measurable loss, one piece of code less to keep.
package search
