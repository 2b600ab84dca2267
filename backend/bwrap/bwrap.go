package bwrap

import (
	"errors"
	"path/filepath"
	"sync"

	"github.com/execbox/execbox/sandbox"
)

// Name is the registered name of this backend.
const Name = "bwrap"

func init() {
	sandbox.Register(sandbox.Registration{Name: Name, New: New, Config: func() any { return DefaultConfig() }})
}

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

// Backend runs sandboxes with bubblewrap under execbox's cgroups and
// seccomp policy. It is safe for concurrent use.
type Backend struct {
	cfg      Config
	workRoot string // this backend's directory under Settings.WorkRoot
	defaults sandbox.Limits

	envMu sync.Mutex
	env   *hostEnv // facts about the host

	healthMu sync.Mutex
	health   *cachedHealth
}

// New returns the bwrap backend for settings s. It only records the
// settings; the host is looked at on first use.
func New(s sandbox.Settings) (sandbox.Backend, error) {
	cfg := sandbox.ConfigOf(s, DefaultConfig)
	if err := cfg.Validate(); err != nil {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "config_invalid", "%w", err)
	}
	return &Backend{cfg: *cfg, workRoot: filepath.Join(s.Root(), Name), defaults: s.DefaultLimits()}, nil
}

// Name is "bwrap".
func (b *Backend) Name() string { return Name }
