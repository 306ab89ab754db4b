// Package llm is the model-backed agentkit policy and what it stands on:
// model adapters for OpenAI-compatible servers and Anthropic (NewModel), a
// transport with timeouts, retries and a response cap that never logs keys,
// a context builder that keeps each prompt to the goal, the plan, a task
// board, the last few messages and a short summary of older ones, and
// token accounting per agent and goal (Meter), reported to the runtime
// through agentkit.UsageMeter. PolicyConfig.Metrics counts calls and
// tokens by agent and model (package telemetry), and with tracing on each
// call is a "chat <model>" span with the GenAI attributes.
package llm
