// Package configs reads the runtime's configuration from a YAML file,
// IOA_* environment variables and command-line flags (in rising order of
// precedence) into typed structs, and validates it with messages that say
// which key is wrong and why. It is the only package that imports viper;
// everything else takes the plain structs.
//
// The commented default configuration is ioa.yaml in this directory; it is
// also embedded, so `ioa config` can print it.
package configs
