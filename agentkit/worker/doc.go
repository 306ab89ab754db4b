// Package worker holds Worker adapters for agentkit: Exec runs any program
// (the task as JSON on stdin, the result on stdout). The http and llm
// workers will live here too, each in its own file.
package worker
