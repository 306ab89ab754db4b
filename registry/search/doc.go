// Package search is the registry's capability search: given agent cards and
// a task, it ranks the agents so that the one that fits comes first.
//
// An Index fuses two views of each card. A dense view keeps one normalised
// vector per card in an in-memory chromem-go collection; by default the
// vectors come from LocalEmbedder, which averages WordNet-distilled word
// vectors (package lexicon) and so needs no network or model download, but an
// OpenAI-compatible or Ollama embedder can be plugged in. A lexical view is a
// BM25F inverted index over the stemmed name, description, capabilities and
// tags, with query words expanded by their WordNet relatives. Each view's
// scores are scaled to [0,1] per query before a weighted sum, so neither
// needs tuning to a corpus or an embedder's similarity range. What the index
// knows of its own cards adapts the ranker to any corpus: the dense view is
// centred on the mean card, which keeps generic cards from becoming hubs, and
// query and card words are weighted by how few cards share them.
//
// Each hit also has a Match, on an absolute scale in [0,1]: the soft
// word-by-word match of task and card in both directions, with task words that
// have no vector counted when a card uses them verbatim. Scores rank; the
// match says whether any card fits at all (TestMinMatchCalibration measures
// it on the development set).
//
// Evaluate, LoadAgents, LoadQueries and BM25Baseline measure a ranker on a
// labelled set such as registry/search/testdata/discovery-dev.
package search
