package registry

import (
	"fmt"

	"github.com/ioa-nats/ioa/registry/search"
)

// Embedder kinds accepted by NewEmbedder (config registry.embedder.kind).
const (
	EmbedderLocal  = "local"
	EmbedderOpenAI = "openai"
	EmbedderOllama = "ollama"
)

// NewEmbedder returns the embedder of a kind: "" or "local" is the built-in
// one (nil, which Config reads as search.LocalEmbedder), "openai" any
// OpenAI-compatible /v1/embeddings endpoint, "ollama" an Ollama server.
func NewEmbedder(kind, baseURL, model, apiKey string) (search.Embedder, error) {
	switch kind {
	case "", EmbedderLocal:
		return nil, nil
	case EmbedderOpenAI:
		if model == "" {
			return nil, fmt.Errorf("registry: embedder openai: model is required")
		}
		if baseURL == "" {
			baseURL = "https://api.openai.com/v1"
		}
		return search.OpenAIEmbedder(baseURL, apiKey, model), nil
	case EmbedderOllama:
		if model == "" {
			return nil, fmt.Errorf("registry: embedder ollama: model is required")
		}
		return search.OllamaEmbedder(baseURL, model), nil
	default:
		return nil, fmt.Errorf("registry: embedder kind %q is not one of local, openai, ollama", kind)
	}
}
