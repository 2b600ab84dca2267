package native

import (
	"fmt"
	"path/filepath"

	"github.com/execbox/execbox/sandbox"
)

// Name is the registered name of this backend.
const Name = "native"

// New returns the native backend for settings s. It only records the
// settings; the host is looked at on first use.
var New = sandbox.Define(Name, DefaultConfig, build)

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

// DefaultConfig is the native section's built-in value.
func DefaultConfig() *Config { return &Config{RootFS: []string{}} }

// Validate names the key at fault.
func (c *Config) Validate() error {
	for _, p := range c.RootFS {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("native.rootfs: %q is not an absolute path", p)
		}
	}
	return nil
}
