package bwrap

import (
	"os"
	"path/filepath"
	"sync"

	"github.com/execbox/execbox/sandbox"
)

// Name is the registered name of this backend.
const Name = "bwrap"

func init() { sandbox.Register(Name, New) }

// Config is the backend's configuration section (bwrap.*).
type Config struct {
	// Path is the bwrap binary, a path or a name looked up in PATH;
	// empty means "bwrap".
	Path string `yaml:"path"`
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
	var cfg Config
	if s.Decode != nil {
		if err := s.Decode(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.Path == "" {
		cfg.Path = "bwrap"
	}
	root := s.WorkRoot
	if root == "" {
		root = filepath.Join(os.TempDir(), "execbox")
	}
	d := s.Defaults
	if d == (sandbox.Limits{}) {
		d = sandbox.Defaults
	}
	return &Backend{cfg: cfg, workRoot: filepath.Join(root, Name), defaults: d}, nil
}

// Name is "bwrap".
func (b *Backend) Name() string { return Name }
