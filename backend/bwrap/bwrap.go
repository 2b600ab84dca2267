package bwrap

import (
	"errors"

	"github.com/execbox/execbox/sandbox"
)

// Name is the registered name of this backend.
const Name = "bwrap"

// New returns the bwrap backend for settings s. It only records the
// settings; the host is looked at on first use.
var New = sandbox.Define(Name, DefaultConfig, build)

// Config is the backend's configuration section (bwrap.*).
type Config struct {
	// Path is the bwrap binary, a path or a name looked up in PATH;
	// empty means "bwrap".
	Path string `yaml:"path"`
}

// DefaultConfig is the bwrap section's built-in value.
func DefaultConfig() *Config { return &Config{Path: "bwrap"} }

// Validate names the key at fault.
func (c *Config) Validate() error {
	if c.Path == "" {
		return errors.New("bwrap.path: must not be empty")
	}
	return nil
}
