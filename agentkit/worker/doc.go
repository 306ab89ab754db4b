// Package worker holds Worker adapters for agentkit: Exec runs any program
// (the task as JSON on stdin, the result on stdout), HTTP posts the task to
// a URL, and LLM has a model answer the task in the agent's role.
package worker
