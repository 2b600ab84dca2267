package microvm

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/execbox/execbox/internal/testutil"
)

// The initramfs is a newc archive the host's own cpio reads back: /init
// executable, /dev/console a character device, the modules in order.
func TestInitrdIsNewcCpio(t *testing.T) {
	cpio := testutil.RequiresBinary(t, Name, "cpio")
	dir := t.TempDir()
	agent := filepath.Join(dir, "agent")
	os.WriteFile(agent, []byte("#!/bin/true\n"), 0o755)
	mods := []string{filepath.Join(dir, "b.ko"), filepath.Join(dir, "a-b.ko")}
	for _, m := range mods {
		os.WriteFile(m, []byte("module "+m), 0o644)
	}
	var buf bytes.Buffer
	if err := writeInitrd(&buf, agent, mods); err != nil {
		t.Fatal(err)
	}
	if buf.Len()%4 != 0 {
		t.Fatalf("archive length %d is not 4-aligned", buf.Len())
	}
	cmd := exec.Command(cpio, "-itv", "--quiet")
	cmd.Stdin = bytes.NewReader(buf.Bytes())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("cpio -t: %v", err)
	}
	list := string(out)
	for _, want := range []string{"-rwxr-xr-x", " init\n", "crw-------", "dev/console", "modules/b.ko", "modules/a_b.ko", "modules/order"} {
		if !strings.Contains(list, want) {
			t.Errorf("the archive lacks %q:\n%s", want, list)
		}
	}
	ext := t.TempDir()
	cmd = exec.Command(cpio, "-id", "--quiet", "modules/order", "init")
	cmd.Dir, cmd.Stdin = ext, bytes.NewReader(buf.Bytes())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cpio -i: %v %s", err, out)
	}
	if b, _ := os.ReadFile(filepath.Join(ext, "modules/order")); string(b) != "b.ko\na_b.ko\n" {
		t.Errorf("order %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(ext, "init")); string(b) != "#!/bin/true\n" {
		t.Errorf("init %q", b)
	}
}

// Modules come with their dependencies, dependencies first, each once;
// a built-in one is no error, a missing one is.
func TestResolveModules(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "modules.dep"), []byte(
		"kernel/fs/9p/9p.ko: kernel/net/9p/9pnet.ko kernel/fs/netfs/netfs.ko\n"+
			"kernel/net/9p/9pnet.ko:\n"+
			"kernel/fs/netfs/netfs.ko:\n"+
			"kernel/net/9p/9pnet_virtio.ko: kernel/net/9p/9pnet.ko kernel/drivers/virtio/virtio.ko\n"+
			"kernel/drivers/virtio/virtio.ko:\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "modules.builtin"), []byte("kernel/drivers/virtio/virtio_mmio.ko\n"), 0o644)
	got, err := resolveModules(dir, []string{"virtio_mmio", "9pnet_virtio", "9p"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, g := range got {
		names = append(names, modName(g))
	}
	if want := []string{"9pnet", "virtio", "9pnet_virtio", "netfs", "9p"}; !slices.Equal(names, want) {
		t.Fatalf("order %v, want %v", names, want)
	}
	if _, err := resolveModules(dir, []string{"nosuch"}); err == nil || !strings.Contains(err.Error(), "no module nosuch") {
		t.Fatalf("a missing module: %v", err)
	}
}

func TestNewestKernelOrdersByNumbers(t *testing.T) {
	if !versionLess("/boot/vmlinuz-6.1.0-9-amd64", "/boot/vmlinuz-6.1.0-10-amd64") || versionLess("/boot/vmlinuz-6.10.0-1", "/boot/vmlinuz-6.9.0-1") {
		t.Fatal("kernel versions are not ordered by their numbers")
	}
}

// Every key is checked on both sides of its bounds.
func TestConfigValidate(t *testing.T) {
	for _, c := range []struct {
		set func(*Config)
		bad string
	}{
		{func(c *Config) {}, ""},
		{func(c *Config) { c.Warm = 16 }, ""},
		{func(c *Config) { c.Warm = 17 }, "microvm.warm"},
		{func(c *Config) { c.Warm = 0 }, ""},
		{func(c *Config) { c.Warm = -1 }, "microvm.warm"},
		{func(c *Config) { c.Accel = "kvm" }, ""},
		{func(c *Config) { c.Accel = "hvf" }, "microvm.accel"},
		{func(c *Config) { c.QEMU = "" }, "microvm.qemu"},
		{func(c *Config) { c.Cache = "cache" }, "microvm.cache"},
		{func(c *Config) { c.Cache = "/var/cache/x" }, ""},
		{func(c *Config) { c.Kernel = "vmlinuz" }, "microvm.kernel"},
		{func(c *Config) { c.Guest = "execbox-guest" }, "microvm.guest"},
	} {
		cfg := DefaultConfig()
		c.set(cfg)
		err := cfg.Validate()
		if (c.bad == "") != (err == nil) || (err != nil && !strings.HasPrefix(err.Error(), c.bad+":")) {
			t.Errorf("%+v: %v, want %q", cfg, err, c.bad)
		}
	}
}
