// Package llmtest is a fake OpenAI-compatible server for tests: it speaks
// POST /v1/chat/completions (non-streaming, tool calls, usage) over real
// HTTP, answers from a script (a queue or a function of the request), and
// records every request so that tests can assert what was sent.
package llmtest
