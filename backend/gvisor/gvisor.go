package gvisor

import (
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// Name is the registered name of this backend.
const Name = "gvisor"

func init() { sandbox.Register(Name, New) }

// Config is the backend's configuration section (gvisor.*).
type Config struct {
	// Runsc is the runsc binary: a path, or a name looked up in PATH.
	// Empty means "runsc".
	Runsc string `yaml:"runsc"`
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
	var cfg Config
	if s.Decode != nil {
		if err := s.Decode(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.Runsc == "" {
		cfg.Runsc = "runsc"
	}
	root := s.WorkRoot
	if root == "" {
		root = filepath.Join(os.TempDir(), "execbox")
	}
	d := s.Defaults
	if d == (sandbox.Limits{}) {
		d = sandbox.Defaults
	}
	return &Backend{
		cfg:      cfg,
		workRoot: filepath.Join(root, Name),
		hidden:   []string{root},
		defaults: d,
	}, nil
}

// Name is "gvisor".
func (b *Backend) Name() string { return Name }
