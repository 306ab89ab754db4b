// Package lexicon is English word knowledge distilled from WordNet and
// embedded in the binary, so that capability search can relate "cancel" to
// "churn" or "bleach" to "chemical" with no network and no model download.
//
// It offers morphy-style lemmatisation, word vectors (PPMI + SVD over WordNet
// synsets, int8-quantised) and a weighted relation table (synonyms,
// derivations, hypernyms) for query expansion. The data file wordnet.gob.gz is
// produced by internal/gen; regenerate it with
//
//	go generate ./registry/lexicon
//
// which needs npm (and, optionally, apt-get for morphy's exception lists).
// WordNet's licence is in WORDNET-LICENSE next to the data.
package lexicon
