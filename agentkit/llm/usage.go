package llm

import (
	"sync"
	"unicode/utf8"

	"github.com/ioa-nats/ioa/agentkit"
	"github.com/ioa-nats/ioa/agentkit/protocol"
	"github.com/tmc/langchaingo/llms"
)

// EstimateTokens is the token estimate used where a provider reports no
// usage, and by the benchmarks: about four characters a token.
func EstimateTokens(s string) int {
	if s == "" {
		return 0
	}
	return (utf8.RuneCountInString(s) + 3) / 4
}

// maxPending bounds how many (agent, goal) entries a Meter keeps waiting
// for the runtime to take them; the oldest goes first.
const maxPending = 4096

type usageKey struct{ agent, goal string }

// Meter counts model usage per agent and goal. The runtime takes the
// pending part with each message it sends (agentkit.UsageMeter); Total
// keeps everything. It is safe for concurrent use; the zero value is ready.
type Meter struct {
	mu      sync.Mutex
	pending map[usageKey]protocol.Usage
	order   []usageKey
	total   map[string]protocol.Usage // by agent
}

var _ agentkit.UsageMeter = (*Meter)(nil)

// Record adds one call's usage for agent and goal.
func (m *Meter) Record(agent, goal string, u protocol.Usage) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pending == nil {
		m.pending, m.total = map[usageKey]protocol.Usage{}, map[string]protocol.Usage{}
	}
	k := usageKey{agent, goal}
	if _, ok := m.pending[k]; !ok {
		m.order = append(m.order, k)
		if len(m.order) > maxPending {
			delete(m.pending, m.order[0])
			m.order = m.order[1:]
		}
	}
	m.pending[k] = m.pending[k].Add(u)
	m.total[agent] = m.total[agent].Add(u)
}

// TakeUsage returns and clears what agent spent for goal since the last
// take.
func (m *Meter) TakeUsage(agent, goal string) protocol.Usage {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := usageKey{agent, goal}
	u, ok := m.pending[k]
	if !ok {
		return protocol.Usage{}
	}
	delete(m.pending, k)
	for i, o := range m.order {
		if o == k {
			m.order = append(m.order[:i:i], m.order[i+1:]...)
			break
		}
	}
	return u
}

// Total returns everything agent has spent ("" sums all agents).
func (m *Meter) Total(agent string) protocol.Usage {
	m.mu.Lock()
	defer m.mu.Unlock()
	if agent != "" {
		return m.total[agent]
	}
	var u protocol.Usage
	for _, v := range m.total {
		u = u.Add(v)
	}
	return u
}

// usageOf reads a response's token counts (OpenAI: PromptTokens and
// CompletionTokens; Anthropic: InputTokens and OutputTokens), estimating
// what the provider did not report.
func usageOf(msgs []llms.MessageContent, resp *llms.ContentResponse) protocol.Usage {
	u := protocol.Usage{LLMCalls: 1}
	if resp != nil && len(resp.Choices) > 0 {
		info := resp.Choices[0].GenerationInfo
		u.PromptTokens = intOf(info, "PromptTokens", "InputTokens")
		u.CompletionTokens = intOf(info, "CompletionTokens", "OutputTokens")
	}
	if u.PromptTokens == 0 {
		u.PromptTokens = EstimateTokens(promptText(msgs))
	}
	if u.CompletionTokens == 0 && resp != nil {
		for _, c := range resp.Choices {
			u.CompletionTokens += EstimateTokens(c.Content)
			for _, tc := range c.ToolCalls {
				if tc.FunctionCall != nil {
					u.CompletionTokens += EstimateTokens(tc.FunctionCall.Name + tc.FunctionCall.Arguments)
				}
			}
		}
	}
	return u
}

func intOf(info map[string]any, keys ...string) int {
	for _, k := range keys {
		switch v := info[k].(type) {
		case int:
			if v > 0 {
				return v
			}
		case int64:
			if v > 0 {
				return int(v)
			}
		case float64:
			if v > 0 {
				return int(v)
			}
		}
	}
	return 0
}

// promptText is the text of a prompt, for estimates and size checks.
func promptText(msgs []llms.MessageContent) string {
	var n int
	for _, m := range msgs {
		for _, p := range m.Parts {
			n += len(partText(p))
		}
	}
	b := make([]byte, 0, n)
	for _, m := range msgs {
		for _, p := range m.Parts {
			b = append(b, partText(p)...)
		}
	}
	return string(b)
}

func partText(p llms.ContentPart) string {
	switch p := p.(type) {
	case llms.TextContent:
		return p.Text
	case llms.ToolCall:
		if p.FunctionCall != nil {
			return p.FunctionCall.Name + p.FunctionCall.Arguments
		}
	case llms.ToolCallResponse:
		return p.Content
	}
	return ""
}
