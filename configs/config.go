package configs

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/ioa-nats/ioa/agentkit/protocol"
)

// Config is the whole configuration of an ioa process.
type Config struct {
	Bus          Bus          `mapstructure:"bus"`
	Limits       Limits       `mapstructure:"limits"`
	Registry     Registry     `mapstructure:"registry"`
	Orchestrator Orchestrator `mapstructure:"orchestrator"`
	LLM          LLM          `mapstructure:"llm"`
	Log          Log          `mapstructure:"log"`
	A2A          A2A          `mapstructure:"a2a"`
	Agents       []Agent      `mapstructure:"agents"`
	// File is the configuration file that was read, if any.
	File string `mapstructure:"-"`
}

// Bus says where NATS is.
type Bus struct {
	NATSURL         string `mapstructure:"nats_url"`
	CredsFile       string `mapstructure:"creds_file"`
	DataDir         string `mapstructure:"data_dir"`
	Listen          string `mapstructure:"listen"`
	MonitorListen   string `mapstructure:"monitor_listen"`
	WebsocketListen string `mapstructure:"websocket_listen"`
	Prefix          string `mapstructure:"prefix"`
	Replicas        int    `mapstructure:"replicas"`
	// Insecure turns credentials off on the embedded server's listeners.
	Insecure  bool      `mapstructure:"insecure"`
	TLS       TLS       `mapstructure:"tls"`
	Retention Retention `mapstructure:"retention"`
}

// Retention bounds the stored chats, task results, goal events and
// records.
type Retention struct {
	MaxAge   time.Duration `mapstructure:"max_age"`
	MaxBytes int64         `mapstructure:"max_bytes"`
}

// TLS names the certificate files of the listeners, and the CA clients
// verify the server with.
type TLS struct {
	CertFile string `mapstructure:"cert_file"`
	KeyFile  string `mapstructure:"key_file"`
	CAFile   string `mapstructure:"ca_file"`
}

// Limits bound what any agent or goal may use.
type Limits struct {
	MaxMessageBytes int           `mapstructure:"max_message_bytes"`
	MaxTurns        int           `mapstructure:"max_turns"`
	MaxDepth        int           `mapstructure:"max_depth"`
	MaxTeamSize     int           `mapstructure:"max_team_size"`
	GoalTimeout     time.Duration `mapstructure:"goal_timeout"`
	SpeakerTimeout  time.Duration `mapstructure:"speaker_timeout"`
	TaskTimeout     time.Duration `mapstructure:"task_timeout"`
	ProgressAfter   time.Duration `mapstructure:"progress_after"` // an async task still running reports task_progress then
	MaxChatMessages int           `mapstructure:"max_chat_messages"`
	MaxTaskProgress int           `mapstructure:"max_task_progress"` // task_progress reports per task and attempt
	AgentRate       float64       `mapstructure:"agent_rate"`        // messages per second per agent
	AgentBurst      int           `mapstructure:"agent_burst"`
}

// Registry configures the registry service.
type Registry struct {
	Enabled             bool          `mapstructure:"enabled"`
	HeartbeatTTL        time.Duration `mapstructure:"heartbeat_ttl"`
	MaxDescriptionBytes int           `mapstructure:"max_description_bytes"`
	MaxCardBytes        int           `mapstructure:"max_card_bytes"`
	MaxAgentsPerConn    int           `mapstructure:"max_agents_per_conn"`
	MaxResults          int           `mapstructure:"max_results"`
	// MinMatch is the match a search result needs for the built-in
	// policies to give it a task; 0 turns the check off.
	MinMatch float64  `mapstructure:"min_match"`
	Embedder Embedder `mapstructure:"embedder"`
}

// Embedder selects how the registry embeds text.
type Embedder struct {
	Kind    string `mapstructure:"kind"` // local, openai, ollama
	BaseURL string `mapstructure:"base_url"`
	Model   string `mapstructure:"model"`
	APIKey  string `mapstructure:"api_key"`
}

// Orchestrator configures the goal service and the built-in coordinator.
type Orchestrator struct {
	Enabled     bool   `mapstructure:"enabled"`
	Coordinator string `mapstructure:"coordinator"` // name of the built-in launcher
	Policy      string `mapstructure:"policy"`      // rules or llm; llm needs llm.base_url
	// LeaseTTL is how long an instance's partition leases last unless
	// renewed: a dead instance's chats move to the others within about
	// that long. Partitions is how many partitions the chats are spread
	// over; every instance on one bus must use the same number.
	LeaseTTL   time.Duration `mapstructure:"lease_ttl"`
	Partitions int           `mapstructure:"partitions"`
}

// LLM configures model access for llm policies and workers.
type LLM struct {
	Provider    string        `mapstructure:"provider"` // openai (any compatible server) or anthropic
	BaseURL     string        `mapstructure:"base_url"`
	APIKey      string        `mapstructure:"api_key"`
	Model       string        `mapstructure:"model"`
	Temperature float64       `mapstructure:"temperature"`
	Timeout     time.Duration `mapstructure:"timeout"`
	Retries     int           `mapstructure:"retries"`
	MaxTokens   int           `mapstructure:"max_tokens"`
}

// CoordinatorPolicy is the policy of the built-in coordinator: the
// configured one, or llm when a model is configured and rules otherwise.
func (c *Config) CoordinatorPolicy() string {
	if c.Orchestrator.Policy != "" {
		return c.Orchestrator.Policy
	}
	if c.LLM.Configured() {
		return "llm"
	}
	return "rules"
}

// Configured reports whether a model endpoint is set.
func (l LLM) Configured() bool {
	return l.BaseURL != "" || (l.Provider == "anthropic" && l.APIKey != "")
}

// A2A configures the A2A front door of ioa serve (interop/a2a).
type A2A struct {
	// Listen is the HTTP address of the agent cards and the JSON-RPC
	// endpoints, host:port; empty turns the front door off.
	Listen string `mapstructure:"listen"`
	// PublicURL is the base URL the cards advertise (default
	// http://<listen>).
	PublicURL string `mapstructure:"public_url"`
	// TokenFile holds the bearer token callers must present (default
	// <data_dir>/creds/a2a.token, created on first start).
	TokenFile string `mapstructure:"token_file"`
	// As is the client identity goals from A2A are submitted for.
	As string `mapstructure:"as"`
}

// Log configures logging.
type Log struct {
	Level  string `mapstructure:"level"`  // debug, info, warn, error
	Format string `mapstructure:"format"` // text or json
}

// Agent is an agent run by this process (ioa serve, ioa agent run).
type Agent struct {
	Name           string            `mapstructure:"name"`
	Description    string            `mapstructure:"description"`
	Capabilities   []string          `mapstructure:"capabilities"`
	Tags           []string          `mapstructure:"tags"`
	Type           string            `mapstructure:"type"`
	NestedTeams    bool              `mapstructure:"nested_teams"`
	MaxConcurrency int               `mapstructure:"max_concurrency"`
	Policy         string            `mapstructure:"policy"` // rules (default) or llm
	Worker         Worker            `mapstructure:"worker"`
	Metadata       map[string]string `mapstructure:"metadata"`
}

// Worker says how an agent does its tasks.
type Worker struct {
	Kind    string   `mapstructure:"kind"`    // builtin, exec, http, llm, mcp, a2a
	Builtin string   `mapstructure:"builtin"` // name of a built-in Go worker
	Command []string `mapstructure:"command"` // exec, mcp (stdio): program and arguments, no shell
	Dir     string   `mapstructure:"dir"`
	URL     string   `mapstructure:"url"` // http; mcp (streamable HTTP); a2a (the agent card or base URL)
	// Token is sent as Authorization: Bearer to an mcp url or an a2a agent.
	Token string `mapstructure:"token"`
	// Tools limits an mcp worker to these tools of its server.
	Tools     []string      `mapstructure:"tools"`
	Timeout   time.Duration `mapstructure:"timeout"`
	MaxOutput int           `mapstructure:"max_output"`
}

// Validate checks every field and reports all problems at once.
func (c *Config) Validate() error {
	return invalid(c.File, c.problems())
}

// problems are the mistakes in the values of c, each at its key.
func (c *Config) problems() []Problem {
	var errs []Problem
	bad := func(key, format string, args ...any) {
		errs = append(errs, Problem{Key: key, Msg: fmt.Sprintf(format, args...)})
	}
	if c.Bus.NATSURL == "" {
		if c.Bus.Listen != "none" {
			if _, _, err := net.SplitHostPort(c.Bus.Listen); err != nil {
				bad("bus.listen", "%q is not host:port (or \"none\")", c.Bus.Listen)
			}
		}
		if c.Bus.DataDir == "" {
			bad("bus.data_dir", "must not be empty")
		}
	} else if !natsURLs(c.Bus.NATSURL) {
		bad("bus.nats_url", "%q is not a NATS URL such as nats://host:4222 (schemes nats, tls, ws, wss)", c.Bus.NATSURL)
	}
	if c.Bus.Prefix == "" || strings.ContainsAny(c.Bus.Prefix, " *>") || strings.HasPrefix(c.Bus.Prefix, ".") || strings.HasSuffix(c.Bus.Prefix, ".") {
		bad("bus.prefix", "%q must be dot-separated tokens of letters, digits, _ or -", c.Bus.Prefix)
	}
	if r := c.Bus.Retention; r.MaxAge < 0 || r.MaxBytes < 0 {
		bad("bus.retention", "max_age and max_bytes must not be negative (0 means no limit)")
	} else if r.MaxAge > 0 && r.MaxAge <= c.Limits.GoalTimeout {
		bad("bus.retention.max_age", "%v must be longer than limits.goal_timeout (%v): a running goal's chat would expire", r.MaxAge, c.Limits.GoalTimeout)
	}
	if (c.Bus.TLS.CertFile == "") != (c.Bus.TLS.KeyFile == "") {
		bad("bus.tls", "cert_file and key_file go together")
	}
	if c.Bus.Replicas < 1 || c.Bus.Replicas > 5 {
		bad("bus.replicas", "%d must be between 1 and 5", c.Bus.Replicas)
	}
	l := c.Limits
	positive := map[string]int{
		"limits.max_message_bytes": l.MaxMessageBytes, "limits.max_turns": l.MaxTurns,
		"limits.max_team_size": l.MaxTeamSize, "limits.max_chat_messages": l.MaxChatMessages,
		"limits.max_task_progress":       l.MaxTaskProgress,
		"limits.agent_burst":             l.AgentBurst,
		"registry.max_description_bytes": c.Registry.MaxDescriptionBytes, "registry.max_card_bytes": c.Registry.MaxCardBytes,
		"registry.max_agents_per_conn": c.Registry.MaxAgentsPerConn, "registry.max_results": c.Registry.MaxResults,
	}
	for k, v := range positive {
		if v <= 0 {
			bad(k, "%d must be positive", v)
		}
	}
	if l.ProgressAfter < 0 {
		bad("limits.progress_after", "%v must not be negative (0 reports progress as a task starts)", l.ProgressAfter)
	}
	if l.MaxDepth < 0 {
		bad("limits.max_depth", "%d must not be negative", l.MaxDepth)
	}
	if l.AgentRate <= 0 {
		bad("limits.agent_rate", "%v must be positive", l.AgentRate)
	}
	if m := c.Registry.MinMatch; !(m >= 0 && m <= 1) {
		bad("registry.min_match", "%v must be between 0 (no check) and 1", m)
	}
	for k, v := range map[string]time.Duration{
		"limits.goal_timeout": l.GoalTimeout, "limits.speaker_timeout": l.SpeakerTimeout,
		"limits.task_timeout": l.TaskTimeout, "registry.heartbeat_ttl": c.Registry.HeartbeatTTL,
	} {
		if v <= 0 {
			bad(k, "%v must be a positive duration such as 30s", v)
		}
	}
	switch c.Registry.Embedder.Kind {
	case "local":
	case "openai", "ollama":
		if c.Registry.Embedder.BaseURL == "" && c.Registry.Embedder.Kind == "openai" {
			bad("registry.embedder.base_url", "is required for the openai embedder")
		}
		if c.Registry.Embedder.Model == "" {
			bad("registry.embedder.model", "is required for the %s embedder", c.Registry.Embedder.Kind)
		}
	default:
		bad("registry.embedder.kind", "%q is not one of local, openai, ollama", c.Registry.Embedder.Kind)
	}
	if c.Orchestrator.LeaseTTL < 0 {
		bad("orchestrator.lease_ttl", "must not be negative")
	}
	if c.Orchestrator.Partitions < 0 || c.Orchestrator.Partitions > 4096 {
		bad("orchestrator.partitions", "%d is not between 1 and 4096", c.Orchestrator.Partitions)
	}
	switch c.Orchestrator.Policy {
	case "", "rules":
	case "llm":
		if !c.LLM.Configured() {
			bad("orchestrator.policy", "llm needs llm.base_url (IOA_LLM_BASE_URL)")
		}
	default:
		bad("orchestrator.policy", "%q is not rules or llm", c.Orchestrator.Policy)
	}
	switch c.LLM.Provider {
	case "openai", "anthropic":
	default:
		bad("llm.provider", "%q is not openai or anthropic", c.LLM.Provider)
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		bad("log.level", "%q is not debug, info, warn or error", c.Log.Level)
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		bad("log.format", "%q is not text or json", c.Log.Format)
	}
	names := map[string]bool{}
	for i, a := range c.Agents {
		key := c.AgentKey(i)
		if !protocol.ValidName(a.Name) {
			bad(key+".name", "%q must match ^[a-z0-9][a-z0-9_-]{0,63}$", a.Name)
		}
		if names[a.Name] {
			bad(key+".name", "%q is used twice", a.Name)
		}
		names[a.Name] = true
		switch a.Type {
		case "", protocol.TypeAssistant, protocol.TypeTool, protocol.TypeHuman:
		default:
			bad(key+".type", "%q is not one of assistant, tool, human", a.Type)
		}
		if a.Description == "" && a.Worker.Kind != "mcp" && a.Worker.Kind != "a2a" {
			bad(key+".description", "is required (mcp and a2a workers may leave it to the server's tools or card)")
		}
		switch a.Policy {
		case "", "rules":
		case "llm":
			if !c.LLM.Configured() {
				bad(key+".policy", "llm needs llm.base_url (IOA_LLM_BASE_URL)")
			}
		default:
			bad(key+".policy", "%q is not rules or llm", a.Policy)
		}
		if a.Type == protocol.TypeHuman {
			// A person: no worker, no policy; the console or a terminal answers.
			if a.Worker.Kind != "" || a.Policy != "" {
				bad(key+".worker", "an agent of type human is a person: it has no worker and no policy")
			}
			continue
		}
		switch a.Worker.Kind {
		case "builtin":
			if a.Worker.Builtin == "" {
				bad(key+".worker.builtin", "names no built-in worker")
			}
		case "exec":
			if len(a.Worker.Command) == 0 {
				bad(key+".worker.command", "is required for an exec worker")
			}
		case "http":
			if !strings.HasPrefix(a.Worker.URL, "http://") && !strings.HasPrefix(a.Worker.URL, "https://") {
				bad(key+".worker.url", "%q is not an http(s) URL", a.Worker.URL)
			}
		case "llm":
			if !c.LLM.Configured() {
				bad(key+".worker", "an llm worker needs llm.base_url (IOA_LLM_BASE_URL)")
			}
		case "mcp":
			if (len(a.Worker.Command) == 0) == (a.Worker.URL == "") {
				bad(key+".worker", "an mcp worker needs exactly one of command (a stdio server) or url (streamable HTTP)")
			} else if a.Worker.URL != "" && !isHTTP(a.Worker.URL) {
				bad(key+".worker.url", "%q is not an http(s) URL", a.Worker.URL)
			}
		case "a2a":
			if !isHTTP(a.Worker.URL) {
				bad(key+".worker.url", "%q is not an http(s) URL (the agent's card or base URL)", a.Worker.URL)
			}
		case "":
			bad(key+".worker.kind", "is required (builtin, exec, http, llm, mcp or a2a)")
		default:
			bad(key+".worker.kind", "%q is not builtin, exec, http, llm, mcp or a2a", a.Worker.Kind)
		}
	}
	if l := c.A2A.Listen; l != "" && l != "none" {
		if _, _, err := net.SplitHostPort(l); err != nil {
			bad("a2a.listen", "%q is not host:port", l)
		}
	}
	if u := c.A2A.PublicURL; u != "" && !isHTTP(u) {
		bad("a2a.public_url", "%q is not an http(s) URL", u)
	}
	return errs
}

// AgentKey names agent i in messages: by its name when it has one, which
// a reader finds in the file faster than an index.
func (c *Config) AgentKey(i int) string {
	if i >= 0 && i < len(c.Agents) && c.Agents[i].Name != "" {
		return fmt.Sprintf("agents[%s]", c.Agents[i].Name)
	}
	return fmt.Sprintf("agents[%d]", i)
}

// natsURLs reports whether u is a comma-separated list of server URLs the
// NATS client can dial: host:port, or one of its schemes.
func natsURLs(u string) bool {
	for part := range strings.SplitSeq(u, ",") {
		part = strings.TrimSpace(part)
		scheme, _, hasScheme := strings.Cut(part, "://")
		switch {
		case hasScheme && !slices.Contains([]string{"nats", "tls", "ws", "wss"}, strings.ToLower(scheme)):
			return false
		case !hasScheme && !strings.Contains(part, ":"):
			return false
		}
	}
	return true
}

func isHTTP(u string) bool {
	return strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "https://")
}

func fileSuffix(f string) string {
	if f == "" {
		return ""
	}
	return " in " + f
}
