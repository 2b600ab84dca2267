package native

import (
	"os"
	"path/filepath"
	"sync"

	"github.com/execbox/execbox/sandbox"
)

// Name is the registered name of this backend.
const Name = "native"

func init() { sandbox.Register(Name, New) }

// Config is the backend's configuration section (native.*).
type Config struct {
	// RootFS is the default list of host paths forming the read-only root;
	// empty means DefaultRootFS. Policy.RootFS replaces it per sandbox.
	RootFS []string `yaml:"rootfs"`
	// TmpExec mounts /tmp (and /work) without noexec for every sandbox.
	TmpExec bool `yaml:"tmp_exec"`
	// InitPath is a standalone execbox-init binary; empty means the
	// execbox-init next to the executable if there is one, else re-executing
	// the current binary. "reexec" forces re-execution.
	InitPath string `yaml:"init_path"`
}

// Backend runs sandboxes in fresh Linux namespaces with cgroup limits,
// seccomp and Landlock. It is safe for concurrent use.
type Backend struct {
	cfg      Config
	workRoot string // this backend's directory under Settings.WorkRoot
	defaults sandbox.Limits

	envOnce sync.Once
	env     *hostEnv // facts about the host, probed once (Linux)

	healthMu sync.Mutex
	health   *sandbox.Health
}

// New returns the native backend for settings s. It only records the
// settings; the host is looked at on first use.
func New(s sandbox.Settings) (sandbox.Backend, error) {
	var cfg Config
	if s.Decode != nil {
		if err := s.Decode(&cfg); err != nil {
			return nil, err
		}
	}
	for _, p := range cfg.RootFS {
		if !filepath.IsAbs(p) {
			return nil, sandbox.Errorf(sandbox.ErrInvalid, "config_invalid", "native.rootfs: %q is not an absolute path", p)
		}
	}
	root := s.WorkRoot
	if root == "" {
		root = filepath.Join(os.TempDir(), "execbox")
	}
	d := s.Defaults
	if d == (sandbox.Limits{}) {
		d = sandbox.Defaults
	}
	return &Backend{cfg: cfg, workRoot: filepath.Join(root, "native"), defaults: d}, nil
}

// Name is "native".
func (b *Backend) Name() string { return Name }
