package gvisor

import (
	"errors"
	"path/filepath"
	"sync"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// Name is the registered name of this backend.
const Name = "gvisor"

func init() {
	sandbox.Register(sandbox.Registration{Name: Name, New: New, Config: func() any { return DefaultConfig() }})
}

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

// healthTTL is how long a probe's answer is reused.
const healthTTL = time.Minute

// Backend runs each Exec in a fresh gVisor sandbox. It is safe for
// concurrent use.
type Backend struct {
	cfg      Config
	workRoot string // this backend's directory under Settings.WorkRoot
	hidden   []string
	defaults sandbox.Limits

	envMu  sync.Mutex
	env    *hostEnv // facts about the host (Linux); probed again only while runsc is missing
	closed bool

	healthMu sync.Mutex
	health   *sandbox.Health
}

// New returns the gvisor backend for settings s. It only records the
// settings; the host is looked at on first use.
func New(s sandbox.Settings) (sandbox.Backend, error) {
	cfg := sandbox.ConfigOf(s, DefaultConfig)
	if err := cfg.Validate(); err != nil {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "config_invalid", "%w", err)
	}
	return &Backend{
		cfg:      *cfg,
		workRoot: filepath.Join(s.Root(), Name),
		hidden:   []string{s.Root()},
		defaults: s.DefaultLimits(),
	}, nil
}

// Name is "gvisor".
func (b *Backend) Name() string { return Name }
