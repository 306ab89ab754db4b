package configs_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ioa-nats/ioa/configs"
	"github.com/spf13/pflag"
)

func flags(t *testing.T, args ...string) *pflag.FlagSet {
	t.Helper()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	configs.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return fs
}

func clearEnv(t *testing.T) {
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "IOA_") || k == "NATS_URL" {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
}

func TestDefaults(t *testing.T) {
	c, err := configs.Defaults()
	if err != nil {
		t.Fatal(err)
	}
	if c.Bus.Listen != "127.0.0.1:4222" || c.Bus.Prefix != "ioa" || c.Bus.DataDir != "data" || c.Limits.MaxTurns != 24 ||
		c.Limits.SpeakerTimeout != 30*time.Second || c.Registry.Embedder.Kind != "local" || c.CoordinatorPolicy() != "rules" {
		t.Fatalf("defaults = %+v", c)
	}
}

func TestPrecedenceFileEnvFlags(t *testing.T) {
	clearEnv(t)
	file := filepath.Join(t.TempDir(), "ioa.yaml")
	os.WriteFile(file, []byte("bus:\n  data_dir: from-file\n  listen: 127.0.0.1:5000\nlimits:\n  max_turns: 9\n"), 0o644)
	t.Setenv("IOA_CONFIG", file)
	c, err := configs.Load(flags(t))
	if err != nil {
		t.Fatal(err)
	}
	if c.Bus.DataDir != "from-file" || c.Limits.MaxTurns != 9 || c.File != file {
		t.Fatalf("file not read: %+v", c.Bus)
	}
	t.Setenv("IOA_DATA_DIR", "from-env")
	t.Setenv("IOA_LIMITS_MAX_TURNS", "11")
	t.Setenv("NATS_URL", "nats://nats-cli:4222")
	c, err = configs.Load(flags(t))
	if err != nil {
		t.Fatal(err)
	}
	if c.Bus.DataDir != "from-env" || c.Limits.MaxTurns != 11 || c.Bus.NATSURL != "nats://nats-cli:4222" {
		t.Fatalf("env not applied: %+v %d", c.Bus, c.Limits.MaxTurns)
	}
	t.Setenv("IOA_NATS_URL", "nats://ioa:4222") // beats NATS_URL
	c, err = configs.Load(flags(t, "--data-dir", "from-flag", "--listen", "none"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Bus.DataDir != "from-flag" || c.Bus.Listen != "none" || c.Bus.NATSURL != "nats://ioa:4222" {
		t.Fatalf("flags not applied: %+v", c.Bus)
	}
	c, err = configs.Load(flags(t, "--nats-url", "nats://flag:4222"))
	if err != nil || c.Bus.NATSURL != "nats://flag:4222" {
		t.Fatalf("--nats-url: %+v %v", c.Bus, err)
	}
}

func TestValidationMessages(t *testing.T) {
	clearEnv(t)
	file := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(file, []byte(`
bus: {listen: "nowhere", replicas: 7}
limits: {max_turns: 0, speaker_timeout: -1s}
registry: {embedder: {kind: magic}}
agents:
  - {name: "Bad Name", description: "", worker: {kind: exec}}
  - {name: ok, description: fine, worker: {kind: builtin, builtin: calculator}, policy: llm}
`), 0o644)
	_, err := configs.Load(flags(t, "--config", file))
	if err == nil {
		t.Fatal("bad config accepted")
	}
	for _, want := range []string{
		"bus.listen", "bus.replicas", "limits.max_turns", "limits.speaker_timeout", "registry.embedder.kind",
		`agents[Bad Name].name`, `agents[Bad Name].description`, `agents[Bad Name].worker.command`, "agents[ok].policy", file,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
	if _, err := configs.Load(flags(t, "--config", filepath.Join(t.TempDir(), "missing.yaml"))); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("missing file: %v", err)
	}
	os.WriteFile(file, []byte("bus: [unclosed"), 0o644)
	if _, err := configs.Load(flags(t, "--config", file)); err == nil {
		t.Error("malformed YAML accepted")
	}
}

func TestShippedConfigsAreValid(t *testing.T) {
	clearEnv(t)
	for _, f := range []string{"ioa.yaml", "demo.yaml"} {
		c, err := configs.Load(flags(t, "--config", f))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if f == "demo.yaml" && len(c.Agents) != 7 {
			t.Fatalf("demo agents = %d", len(c.Agents))
		}
	}
	c, err := configs.LoadOver(flags(t), configs.DemoYAML)
	if err != nil || len(c.Agents) != 7 || c.Limits.GoalTimeout != time.Minute {
		t.Fatalf("LoadOver demo: %v", err)
	}
	if a := c.Agents[6]; a.Name != "alice" || a.Type != "human" || a.Worker.Kind != "" {
		t.Errorf("the demo's person: %+v", a)
	}
}

// A person (type human) has no worker and no policy; giving one is an error.
func TestHumanAgents(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	write := func(yaml string) string {
		f := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(f, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	ok := write("agents:\n  - {name: bob, type: human, description: a person}\n")
	if _, err := configs.Load(flags(t, "--config", ok)); err != nil {
		t.Errorf("a person: %v", err)
	}
	bad := write("agents:\n  - {name: bob, type: human, description: a person, worker: {kind: builtin, builtin: calculator}}\n")
	if _, err := configs.Load(flags(t, "--config", bad)); err == nil || !strings.Contains(err.Error(), "is a person") {
		t.Errorf("a person with a worker: %v", err)
	}
}

// Every mistake of a file comes in one run, each at its key path and in
// the file's terms: unknown keys (with the key meant), values of the wrong
// kind and bad values together, never the decoder's own words.
func TestEveryMistakeAtOnce(t *testing.T) {
	clearEnv(t)
	file := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(file, []byte(`
limits: {goal_timout: 5m, max_turns: abc, speaker_timeout: soon, task_timeout: 3}
log: 5
agnets: []
agents:
  - {name: calc, description: adds, capabilitys: [add], worker: {kind: builtin, builtin: calculator}}
  - {name: bot, type: robot, description: x, worker: {kind: builtin, builtin: calculator}}
  - {name: busy, description: y, max_concurrency: many, worker: {kind: builtin, builtin: units}}
`), 0o644)
	_, err := configs.Load(flags(t, "--config", file))
	if err == nil {
		t.Fatal("bad config accepted")
	}
	for _, want := range []string{
		"limits.goal_timout: unknown key (did you mean goal_timeout?)",
		`limits.max_turns: "abc" is not a whole number`,
		`limits.speaker_timeout: "soon" is not a duration such as 30s or 2m`,
		`limits.task_timeout: 3 is not a duration such as 30s or 2m`,
		"log: 5 is not a section of keys",
		"agnets: unknown key (did you mean agents?)",
		"agents[calc].capabilitys: unknown key (did you mean capabilities?)",
		`agents[bot].type: "robot" is not one of assistant, tool, human`,
		`agents[busy].max_concurrency: "many" is not a whole number`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
	for _, raw := range []string{"decoding failed", "strconv", "mapstructure", "time:", "must be positive", "positive duration"} {
		if strings.Contains(err.Error(), raw) {
			t.Errorf("error says %q:\n%v", raw, err)
		}
	}
}

// Every configuration shipped in this directory loads.
func TestEveryShippedYAMLLoads(t *testing.T) {
	clearEnv(t)
	files, _ := filepath.Glob("*.yaml")
	if len(files) < 3 {
		t.Fatalf("yaml files: %v", files)
	}
	for _, f := range files {
		if _, err := configs.Load(flags(t, "--config", f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}
