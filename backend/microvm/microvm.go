package microvm

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/execbox/execbox/sandbox"
)

// Name is the registered name of this backend.
const Name = "microvm"

// New returns the microvm backend for settings s. It only records the
// settings; the host is looked at on first use.
var New = sandbox.Define(Name, DefaultConfig, build)

// Config is the backend's configuration section (microvm.*).
type Config struct {
	// QEMU is the qemu-system-x86_64 binary: a path, or a name looked up
	// in PATH.
	QEMU string `yaml:"qemu"`
	// Kernel is the guest kernel, a bzImage such as Debian's
	// /boot/vmlinuz-*; empty means the newest /boot/vmlinuz-*. Its modules
	// are taken from /lib/modules/<release>.
	Kernel string `yaml:"kernel"`
	// Guest is the execbox-guest binary (the VM's init); empty means the
	// one next to the executable, else execbox-guest in PATH.
	Guest string `yaml:"guest"`
	// Accel is kvm, tcg (software emulation) or auto: KVM when a guest
	// really boots under it here, else TCG.
	Accel string `yaml:"accel"`
	// Warm is how many booted VMs are kept waiting per sandbox shape, so a
	// sandbox does not wait for a boot; 0 boots each on demand.
	Warm int `yaml:"warm"`
	// Cache is where the guest kernel and initramfs made from the host's
	// files are kept; empty means <state_dir>/microvm (a systemd unit's
	// writable state directory), else /var/cache/execbox/microvm.
	Cache string `yaml:"cache"`
}

// DefaultConfig is the microvm section's built-in value.
func DefaultConfig() *Config {
	return &Config{QEMU: "qemu-system-x86_64", Accel: "auto", Warm: 1}
}

// Validate names the key at fault.
func (c *Config) Validate() error {
	switch {
	case c.QEMU == "":
		return errors.New("microvm.qemu: must not be empty")
	case c.Accel != "auto" && c.Accel != "kvm" && c.Accel != "tcg":
		return fmt.Errorf("microvm.accel: %q is not auto, kvm or tcg", c.Accel)
	case c.Warm < 0 || c.Warm > 16:
		return fmt.Errorf("microvm.warm: %d is not within 0..16", c.Warm)
	case c.Cache != "" && !filepath.IsAbs(c.Cache):
		return fmt.Errorf("microvm.cache: %q is not an absolute path", c.Cache)
	case c.Kernel != "" && !filepath.IsAbs(c.Kernel):
		return fmt.Errorf("microvm.kernel: %q is not an absolute path", c.Kernel)
	case c.Guest != "" && !filepath.IsAbs(c.Guest):
		return fmt.Errorf("microvm.guest: %q is not an absolute path", c.Guest)
	}
	return nil
}
