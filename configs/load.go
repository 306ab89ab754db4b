package configs

import (
	"bytes"
	_ "embed"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// DefaultYAML is the commented default configuration (configs/ioa.yaml).
//
//go:embed ioa.yaml
var DefaultYAML []byte

// The flags every command that reaches NATS takes; scripts rely on the names.
const (
	FlagConfig  = "config"
	FlagDataDir = "data-dir"
	FlagListen  = "listen"
	FlagNATSURL = "nats-url"
	FlagCreds   = "creds"
)

// AddFlags declares the common flags on fs.
func AddFlags(fs *pflag.FlagSet) {
	fs.String(FlagConfig, "", "configuration file (YAML) [$IOA_CONFIG]")
	fs.String(FlagDataDir, "", "directory of the embedded server's store [$IOA_DATA_DIR] (default \"data\")")
	fs.String(FlagListen, "", "embedded NATS client address, host:port or \"none\" [$IOA_LISTEN] (default \"127.0.0.1:4222\")")
	fs.String(FlagNATSURL, "", "use this NATS server or cluster instead of the embedded one [$IOA_NATS_URL, $NATS_URL]")
	fs.String(FlagCreds, "", "NATS credentials (.creds) to connect with [$IOA_CREDS] (default: the admin credentials in --data-dir, when present)")
}

// flagKeys maps the common flags to configuration keys.
var flagKeys = map[string]string{
	FlagDataDir: "bus.data_dir",
	FlagListen:  "bus.listen",
	FlagNATSURL: "bus.nats_url",
	FlagCreds:   "bus.creds_file",
	"insecure":  "bus.insecure", // ioa serve only
	"http":      "a2a.listen",   // ioa serve only: the console and the A2A front door
}

// envAliases are the short environment names documented for scripts, in
// order of preference; every key also has its IOA_SECTION_KEY name.
var envAliases = map[string][]string{
	"bus.nats_url":   {"IOA_NATS_URL", "IOA_BUS_NATS_URL", "NATS_URL"},
	"bus.data_dir":   {"IOA_DATA_DIR", "IOA_BUS_DATA_DIR"},
	"bus.listen":     {"IOA_LISTEN", "IOA_BUS_LISTEN"},
	"bus.prefix":     {"IOA_PREFIX", "IOA_BUS_PREFIX"},
	"bus.creds_file": {"IOA_CREDS", "IOA_BUS_CREDS_FILE"},
	"bus.insecure":   {"IOA_INSECURE", "IOA_BUS_INSECURE"},
	"a2a.listen":     {"IOA_HTTP_LISTEN", "IOA_A2A_LISTEN"},
}

// Load reads the defaults, then the file named by --config or $IOA_CONFIG
// (if any), then IOA_* variables, then the flags set on fs (fs may be nil).
// The checks add their problems to those of the configuration itself, so
// one error lists every mistake.
func Load(fs *pflag.FlagSet, checks ...Check) (*Config, error) { return load(fs, true, nil, checks...) }

// LoadOver is Load with base (YAML) merged over the built-in defaults
// before the file, the environment and the flags: `ioa demo` starts from
// DemoYAML this way.
func LoadOver(fs *pflag.FlagSet, base []byte) (*Config, error) { return load(fs, true, base) }

// DemoYAML is the demo team (configs/demo.yaml).
//
//go:embed demo.yaml
var DemoYAML []byte

// Defaults returns the built-in configuration alone: no file, no
// environment, no flags. Programs that embed the runtime start from it.
func Defaults() (*Config, error) { return load(nil, false, nil) }

func load(fs *pflag.FlagSet, useEnv bool, base []byte, checks ...Check) (*Config, error) {
	v := viper.New()
	v.SetConfigType("yaml")
	if err := v.ReadConfig(strings.NewReader(string(DefaultYAML))); err != nil {
		return nil, fmt.Errorf("configs: built-in defaults: %w", err)
	}
	if base != nil {
		if err := v.MergeConfig(strings.NewReader(string(base))); err != nil {
			return nil, fmt.Errorf("configs: base configuration: %w", err)
		}
	}
	file := ""
	if useEnv {
		file = os.Getenv("IOA_CONFIG")
	}
	if fs != nil {
		if f := fs.Lookup(FlagConfig); f != nil && f.Changed {
			file = f.Value.String()
		}
	}
	var fileOnly map[string]any // the file's own settings, before merging
	if file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("config file: %w", err)
		}
		if err := v.MergeConfig(bytes.NewReader(data)); err != nil {
			return nil, fmt.Errorf("config file %s: %w", file, err)
		}
		own := viper.New()
		own.SetConfigType("yaml")
		if err := own.ReadConfig(bytes.NewReader(data)); err == nil {
			fileOnly = own.AllSettings()
		}
	}
	if useEnv {
		v.SetEnvPrefix("IOA")
		v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
		v.AutomaticEnv()
		for key, names := range envAliases {
			if err := v.BindEnv(append([]string{key}, names...)...); err != nil {
				return nil, err
			}
		}
	}
	if fs != nil {
		for flag, key := range flagKeys {
			if f := fs.Lookup(flag); f != nil && f.Changed {
				v.Set(key, f.Value.String())
			}
		}
	}
	c := Config{File: file}
	decoded := namedAgents(&c, decodeProblems(v.Unmarshal(&c, viper.DecodeHook(decodeHooks()))))
	config := reflect.TypeFor[Config]()
	problems := append(unknownKeys("", fileOnly, config), unknownKeys("", v.AllSettings(), config)...)
	problems = append(namedAgents(&c, problems), decoded...)
	// A key that did not decode keeps its zero value: checking that value
	// too would report the same key twice, the second time wrongly.
	for _, p := range c.problems() {
		if !coveredBy(p, decoded) {
			problems = append(problems, p)
		}
	}
	for _, check := range checks {
		problems = append(problems, check(&c)...)
	}
	if err := invalid(file, problems); err != nil {
		return nil, err
	}
	return &c, nil
}

// coveredBy reports whether p is about a key one of decoded is about.
func coveredBy(p Problem, decoded []Problem) bool {
	for _, d := range decoded {
		if p.Key == d.Key || strings.HasPrefix(p.Key, d.Key+".") || strings.HasPrefix(d.Key, p.Key+".") {
			return true
		}
	}
	return false
}

// namedAgents writes agents[2] as agents[calc], as the checks of the values
// do, so a file's mistakes read alike.
func namedAgents(c *Config, problems []Problem) []Problem {
	for i, p := range problems {
		rest, ok := strings.CutPrefix(p.Key, "agents[")
		if !ok {
			continue
		}
		num, tail, ok := strings.Cut(rest, "]")
		if n, err := strconv.Atoi(num); ok && err == nil {
			problems[i].Key = c.AgentKey(n) + tail
		}
	}
	return problems
}
