package gvisor

import (
	"errors"

	"github.com/execbox/execbox/sandbox"
)

// Name is the registered name of this backend.
const Name = "gvisor"

// New returns the gvisor backend for settings s. It only records the
// settings; the host is looked at on first use.
var New = sandbox.Define(Name, DefaultConfig, build)

// Config is the backend's configuration section (gvisor.*).
type Config struct {
	// Runsc is the runsc binary: a path, or a name looked up in PATH.
	// Empty means "runsc".
	Runsc string `yaml:"runsc"`
}

// DefaultConfig is the gvisor section's built-in value.
func DefaultConfig() *Config { return &Config{Runsc: "runsc"} }

// Validate names the key at fault.
func (c *Config) Validate() error {
	if c.Runsc == "" {
		return errors.New("gvisor.runsc: must not be empty")
	}
	return nil
}
