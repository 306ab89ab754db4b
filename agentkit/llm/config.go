package llm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/llms/anthropic"
	"github.com/tmc/langchaingo/llms/openai"
)

// Providers of Config.Provider.
const (
	ProviderOpenAI    = "openai"    // any OpenAI-compatible server: OpenAI, Ollama, vLLM, llama.cpp
	ProviderAnthropic = "anthropic" // the Anthropic messages API
)

// Defaults of Config.
const (
	DefaultTimeout          = 60 * time.Second
	DefaultRetries          = 2
	DefaultMaxTokens        = 1024
	DefaultMaxResponseBytes = 4 << 20
)

// Config says how to reach a model. It mirrors the llm section of the
// configuration (configs.LLM); the zero value of each field is its default.
type Config struct {
	// Provider is openai (default) or anthropic.
	Provider string
	// BaseURL is the API root, e.g. https://api.openai.com/v1 or
	// http://localhost:11434/v1 for Ollama. Empty: the provider's default.
	BaseURL string
	// APIKey authenticates. Empty: OPENAI_API_KEY or ANTHROPIC_API_KEY from
	// the environment; an OpenAI-compatible server with a BaseURL may need
	// none. It is sent only in the provider's auth header and never logged.
	APIKey string
	// Model names the model.
	Model string
	// Temperature of every call.
	Temperature float64
	// Timeout bounds each HTTP attempt (default 60s).
	Timeout time.Duration
	// Retries is how many times an attempt that cannot have been run (and
	// billed) is tried again, with backoff: one that failed to connect, or
	// got 429, 500, 502 or 503. A timed-out or broken attempt whose request
	// was sent is not (default 2; negative: none).
	Retries int
	// MaxTokens bounds each answer (default 1024). OpenAI-compatible
	// requests carry it as max_tokens, which every such server reads.
	MaxTokens int
	// MaxCompletionTokensField sends max_completion_tokens instead of
	// max_tokens (OpenAI reasoning models accept only that one).
	MaxCompletionTokensField bool
	// MaxResponseBytes caps a response body (default 4 MiB).
	MaxResponseBytes int64
	// Backoff is the first retry's delay, doubled each time (default 250ms).
	Backoff time.Duration
	// Logger receives debug lines per HTTP attempt (never headers or
	// keys); nil discards.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Provider == "" {
		c.Provider = ProviderOpenAI
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	switch {
	case c.Retries == 0:
		c.Retries = DefaultRetries
	case c.Retries < 0:
		c.Retries = 0
	}
	if c.MaxTokens <= 0 {
		c.MaxTokens = DefaultMaxTokens
	}
	if c.MaxResponseBytes <= 0 {
		c.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if c.Backoff <= 0 {
		c.Backoff = 250 * time.Millisecond
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// ErrConfig reports an unusable Config.
var ErrConfig = errors.New("llm: bad config")

// Model is a langchaingo model with the call options of its Config applied
// to every call (temperature, max tokens) unless a call overrides them.
type Model struct {
	llms.Model
	cfg      Config
	defaults []llms.CallOption
	tr       *transport
}

var _ llms.Model = (*Model)(nil)

// NewModel returns a model for cfg: langchaingo's openai client (with
// openai.WithBaseURL, WithToken, WithModel) or its anthropic client, both
// over a transport that bounds each attempt by cfg.Timeout, retries 429,
// 5xx and timeouts with backoff, and caps response bodies.
func NewModel(cfg Config) (*Model, error) {
	cfg = cfg.withDefaults()
	tr := newTransport(cfg)
	m := &Model{cfg: cfg, tr: tr}
	client := &http.Client{Transport: tr}
	m.defaults = []llms.CallOption{llms.WithTemperature(cfg.Temperature), llms.WithMaxTokens(cfg.MaxTokens)}
	switch cfg.Provider {
	case ProviderOpenAI:
		key := cfg.APIKey
		if key == "" {
			key = os.Getenv("OPENAI_API_KEY")
		}
		if key == "" && cfg.BaseURL != "" {
			// Local servers (Ollama, llama.cpp) take no key, but the
			// client insists on one.
			key = "none"
		}
		opts := []openai.Option{openai.WithHTTPClient(client), openai.WithToken(key)}
		if cfg.BaseURL != "" {
			opts = append(opts, openai.WithBaseURL(cfg.BaseURL))
		}
		if cfg.Model != "" {
			opts = append(opts, openai.WithModel(cfg.Model))
		}
		lm, err := openai.New(opts...)
		if err != nil {
			return nil, fmt.Errorf("%w: openai: %v", ErrConfig, err)
		}
		m.Model = lm
		if !cfg.MaxCompletionTokensField {
			m.defaults = append(m.defaults, openai.WithLegacyMaxTokensField())
		}
	case ProviderAnthropic:
		opts := []anthropic.Option{anthropic.WithHTTPClient(client)}
		if cfg.APIKey != "" {
			opts = append(opts, anthropic.WithToken(cfg.APIKey))
		}
		if cfg.BaseURL != "" {
			opts = append(opts, anthropic.WithBaseURL(cfg.BaseURL))
		}
		if cfg.Model != "" {
			opts = append(opts, anthropic.WithModel(cfg.Model))
		}
		lm, err := anthropic.New(opts...)
		if err != nil {
			return nil, fmt.Errorf("%w: anthropic: %v", ErrConfig, err)
		}
		m.Model = lm
	default:
		return nil, fmt.Errorf("%w: provider %q is not openai or anthropic", ErrConfig, cfg.Provider)
	}
	return m, nil
}

// GenerateContent calls the model with the Config's defaults first, so that
// a call's own options win.
func (m *Model) GenerateContent(ctx context.Context, msgs []llms.MessageContent, opts ...llms.CallOption) (*llms.ContentResponse, error) {
	all := make([]llms.CallOption, 0, len(m.defaults)+len(opts))
	all = append(append(all, m.defaults...), opts...)
	return m.Model.GenerateContent(ctx, msgs, all...)
}

// Call is a single-prompt convenience, as llms.Model requires.
func (m *Model) Call(ctx context.Context, prompt string, opts ...llms.CallOption) (string, error) {
	return llms.GenerateFromSinglePrompt(ctx, m, prompt, opts...)
}

// Close releases idle connections.
func (m *Model) Close() { m.tr.base.CloseIdleConnections() }
