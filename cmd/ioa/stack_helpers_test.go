package main

import (
	"log/slog"
	"testing"

	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/configs"
)

// demoConfig is configs/demo.yaml on an in-process server (no listener)
// with a data dir of the test's own.
func demoConfig(t *testing.T) *configs.Config {
	t.Helper()
	cfg, err := configs.LoadOver(nil, configs.DemoYAML)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Bus.DataDir, cfg.Bus.Listen = t.TempDir(), bus.NoListen
	return cfg
}

// readyStack starts what `ioa serve` starts for cfg and returns once a goal
// can run; the end of the test stops it.
func readyStack(t *testing.T, cfg *configs.Config, opt stackOptions) *stack {
	t.Helper()
	st, err := startStack(t.Context(), cfg, opt, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.shutdown)
	if err := st.waitReady(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	return st
}
