package builtin

import (
	"fmt"
	"slices"
	"sort"

	"github.com/ioa-nats/ioa/agentkit"
)

// Options configure the workers that need them.
type Options struct {
	// Sandbox is the only folder the file and text workers may read.
	Sandbox string
}

var workers = map[string]func(Options) agentkit.Worker{
	"calculator": func(Options) agentkit.Worker { return agentkit.WorkerFunc(calculate) },
	"units":      func(Options) agentkit.Worker { return agentkit.WorkerFunc(convertUnits) },
	"textstats":  func(o Options) agentkit.Worker { return textStats{sandbox: o.Sandbox} },
	"files":      func(o Options) agentkit.Worker { return fileReader{sandbox: o.Sandbox} },
	"report":     func(Options) agentkit.Worker { return agentkit.WorkerFunc(writeReport) },
}

// Names lists the built-in workers.
func Names() []string {
	names := make([]string, 0, len(workers))
	for n := range workers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// New returns the built-in worker called name.
func New(name string, o Options) (agentkit.Worker, error) {
	mk, ok := workers[name]
	if !ok {
		return nil, fmt.Errorf("no built-in worker %q (have %v)", name, Names())
	}
	return mk(o), nil
}

// ReadsFiles reports whether the built-in worker called name reads files
// from its sandbox folder (Options.Sandbox).
func ReadsFiles(name string) bool { return name == "textstats" || name == "files" }

// Has reports whether name is a built-in worker.
func Has(name string) bool { return slices.Contains(Names(), name) }
