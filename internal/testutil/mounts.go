package testutil

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/execbox/execbox/sandbox"
)

// The checks below are the file-system tests of the backends whose
// sandboxes see a read-only view of the host (internal/host/hostview); each is
// a whole test body.

// extraMounts: extra mounts are visible, read-only unless asked, writable
// when asked, even from a directory that uid 65534 could not reach on the
// host, and even below /tmp; closing the sandbox never touches a mount's
// source.
func extraMounts(t *testing.T, b sandbox.Backend) { ExtraMounts(t, b) }

// ExtraMounts is the conformance check of extra mounts, for a backend
// that does not run the whole host-kernel suite (docker).
func ExtraMounts(t *testing.T, b sandbox.Backend) {
	private := t.TempDir() // 0700 root: uid 65534 cannot reach in
	ro, rw := filepath.Join(private, "ro"), filepath.Join(private, "rw")
	os.Mkdir(ro, 0o755)
	os.Mkdir(rw, 0o777)
	os.Chmod(rw, 0o777)
	os.WriteFile(filepath.Join(ro, "in.txt"), []byte("from-host"), 0o644)
	spec := sandbox.Spec{Policy: sandbox.Policy{Mounts: []sandbox.Mount{
		{Source: ro, Target: "/data"},
		{Source: rw, Target: "/out", Writable: true},
		{Source: filepath.Join(ro, "in.txt"), Target: "/etc/extra.txt"},
		{Source: ro, Target: "/tmp/below"},
	}}}
	res := Sh(t, b, spec, `cat /data/in.txt /etc/extra.txt /tmp/below/in.txt; echo
echo x > /data/new 2>/dev/null && echo wrote-ro
echo x > /etc/extra.txt 2>/dev/null && echo wrote-ro-file
echo y > /out/new && echo wrote-rw`)
	WantOK(t, res)
	if res.Stdout != "from-hostfrom-hostfrom-host\nwrote-rw\n" {
		t.Fatalf("got %q %q", res.Stdout, res.Stderr)
	}
	if b, err := os.ReadFile(filepath.Join(rw, "new")); err != nil || string(b) != "y\n" {
		t.Fatalf("the writable mount's file on the host: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(ro, "new")); err == nil {
		t.Fatal("a file appeared in the read-only mount's source")
	}
}

// mountValidation: invalid mounts and rootfs lists are refused at Create
// with ErrInvalid (internal/host/hostview, shared by the backends); a custom
// rootfs is honoured: only what it lists is there. workRoot is the
// backend's work root, which is never mounted, nor anything containing it.
func mountValidation(t *testing.T, b sandbox.Backend, workRoot string) {
	dir := t.TempDir()
	link := filepath.Join(dir, "link")
	os.Symlink("/etc", link)
	os.MkdirAll(filepath.Join(dir, "real", "sub"), 0o755)
	linkParent := filepath.Join(dir, "lp")
	os.Symlink(filepath.Join(dir, "real"), linkParent)
	bad := []struct {
		name string
		pol  sandbox.Policy
		code string
	}{
		{"mount_missing_source", sandbox.Policy{Mounts: []sandbox.Mount{{Source: filepath.Join(dir, "nope"), Target: "/x"}}}, "mount_invalid"},
		{"mount_symlink_source", sandbox.Policy{Mounts: []sandbox.Mount{{Source: link, Target: "/x"}}}, "mount_invalid"},
		{"mount_symlink_parent", sandbox.Policy{Mounts: []sandbox.Mount{{Source: filepath.Join(linkParent, "."), Target: "/x"}}}, "mount_invalid"},
		{"mount_through_symlink", sandbox.Policy{Mounts: []sandbox.Mount{{Source: linkParent + "/sub", Target: "/x"}}}, "mount_invalid"},
		{"mount_target_proc", sandbox.Policy{Mounts: []sandbox.Mount{{Source: dir, Target: "/proc/x"}}}, "mount_invalid"},
		{"mount_target_work", sandbox.Policy{Mounts: []sandbox.Mount{{Source: dir, Target: "/work/x"}}}, "mount_invalid"},
		{"mount_target_root", sandbox.Policy{Mounts: []sandbox.Mount{{Source: dir, Target: "/"}}}, "mount_invalid"},
		{"mount_source_run", sandbox.Policy{Mounts: []sandbox.Mount{{Source: "/run", Target: "/x"}}}, "mount_invalid"},
		{"mount_source_workroot", sandbox.Policy{Mounts: []sandbox.Mount{{Source: workRoot, Target: "/x"}}}, "mount_invalid"},
		{"mount_source_workroot_parent", sandbox.Policy{Mounts: []sandbox.Mount{{Source: filepath.Dir(workRoot), Target: "/x"}}}, "mount_invalid"},
		{"mount_source_dev", sandbox.Policy{Mounts: []sandbox.Mount{{Source: "/dev/null", Target: "/x"}}}, "mount_invalid"},
		{"rootfs_slash", sandbox.Policy{RootFS: []string{"/usr", "/"}}, "rootfs_invalid"},
		{"rootfs_proc", sandbox.Policy{RootFS: []string{"/usr", "/proc"}}, "rootfs_invalid"},
		{"rootfs_missing", sandbox.Policy{RootFS: []string{"/usr", "/does/not/exist"}}, "rootfs_invalid"},
		{"rootfs_relative", sandbox.Policy{RootFS: []string{"usr"}}, "rootfs_invalid"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			sb, err := b.Create(t.Context(), sandbox.Spec{Policy: c.pol})
			if err == nil {
				sb.Close(t.Context())
				t.Fatalf("Create accepted %+v", c.pol)
			}
			if !errors.Is(err, sandbox.ErrInvalid) || sandbox.CodeOf(err) != c.code {
				t.Fatalf("Create: %v (code %q), want ErrInvalid %s", err, sandbox.CodeOf(err), c.code)
			}
		})
	}
	res := Sh(t, b, sandbox.Spec{Policy: sandbox.Policy{RootFS: []string{"/usr", "/bin", "/lib", "/lib64"}}},
		"ls /etc | tr '\n' ' '; test -e /etc/ssl && echo ssl; true")
	WantOK(t, res)
	if strings.TrimSpace(res.Stdout) != "group hostname hosts passwd" {
		t.Fatalf("/etc with a custom rootfs: %q", res.Stdout)
	}
}

// interpreters: python3 and node start and work in the default rootfs
// (TLS certificates included), as nobody, with nothing from /etc beyond
// the list.
func interpreters(t *testing.T, b sandbox.Backend) {
	res := Py(t, b, sandbox.Spec{}, `
import ssl, json, sqlite3, hashlib, pwd, getpass, multiprocessing
ctx = ssl.create_default_context()
print(len(ctx.get_ca_certs()) > 0, pwd.getpwuid(65534).pw_name, getpass.getuser())
with multiprocessing.Pool(2) as p:
    print(sum(p.map(abs, [-1, -2])))`)
	WantOK(t, res)
	if res.Stdout != "True nobody nobody\n3\n" {
		t.Fatalf("python: %q %q", res.Stdout, res.Stderr)
	}
	if _, err := os.Stat("/usr/bin/node"); err != nil {
		SkipOrFail(t, "node", "node is not installed")
	}
	res = Run(t, b, sandbox.Spec{}, "node", "-e", `console.log(require("os").userInfo().username, require("tls").rootCertificates.length > 0)`)
	WantOK(t, res)
	if res.Stdout != "nobody true\n" {
		t.Fatalf("node: %q %q", res.Stdout, res.Stderr)
	}
}
