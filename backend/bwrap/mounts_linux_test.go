package bwrap

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
)

// Extra mounts: visible, read-only unless asked, writable when asked,
// even from a directory that uid 65534 could not reach on the host.
func TestExtraMounts(t *testing.T) {
	b := newBackend(t)
	private := t.TempDir() // 0700 root: bwrap (uid 65534) cannot reach in
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
	res := testutil.Sh(t, b, spec, `cat /data/in.txt /etc/extra.txt /tmp/below/in.txt; echo
echo x > /data/new 2>/dev/null && echo wrote-ro
echo x > /etc/extra.txt 2>/dev/null && echo wrote-ro-file
echo y > /out/new && echo wrote-rw`)
	testutil.WantOK(t, res)
	if res.Stdout != "from-hostfrom-hostfrom-host\nwrote-rw\n" {
		t.Fatalf("got %q %q", res.Stdout, res.Stderr)
	}
	if b, err := os.ReadFile(filepath.Join(rw, "new")); err != nil || string(b) != "y\n" {
		t.Fatalf("the writable mount's file on the host: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(ro, "new")); err == nil {
		t.Fatal("a file appeared in the read-only mount's source")
	}
	// Closing the sandbox never touches a mount's source.
	if _, err := os.Stat(filepath.Join(rw, "new")); err != nil {
		t.Fatalf("the writable mount's source lost a file: %v", err)
	}
}

// Invalid mounts and rootfs lists are refused at Create with ErrInvalid
// (internal/hostview, shared with the native backend).
func TestMountAndRootFSValidation(t *testing.T) {
	b := newBackend(t)
	dir := t.TempDir()
	link := filepath.Join(dir, "link")
	os.Symlink("/etc", link)
	for _, c := range []struct {
		name string
		pol  sandbox.Policy
		code string
	}{
		{"mount_symlink_source", sandbox.Policy{Mounts: []sandbox.Mount{{Source: link, Target: "/x"}}}, "mount_invalid"},
		{"mount_target_work", sandbox.Policy{Mounts: []sandbox.Mount{{Source: dir, Target: "/work/x"}}}, "mount_invalid"},
		{"mount_source_workroot", sandbox.Policy{Mounts: []sandbox.Mount{{Source: b.WorkRoot(), Target: "/x"}}}, "mount_invalid"},
		{"rootfs_proc", sandbox.Policy{RootFS: []string{"/usr", "/proc"}}, "rootfs_invalid"},
		{"rootfs_missing", sandbox.Policy{RootFS: []string{"/usr", "/does/not/exist"}}, "rootfs_invalid"},
	} {
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
	res := testutil.Sh(t, b, sandbox.Spec{Policy: sandbox.Policy{RootFS: []string{"/usr", "/bin", "/lib", "/lib64"}}},
		"ls /etc | tr '\n' ' '; test -e /etc/ssl && echo ssl; true")
	testutil.WantOK(t, res)
	if strings.TrimSpace(res.Stdout) != "group hostname hosts passwd" {
		t.Fatalf("/etc with a custom rootfs: %q", res.Stdout)
	}
}

// python3 and node start and work in the default rootfs, as nobody.
func TestInterpretersStart(t *testing.T) {
	b := newBackend(t)
	res := testutil.Py(t, b, sandbox.Spec{}, `
import ssl, json, sqlite3, hashlib, pwd, getpass, multiprocessing
ctx = ssl.create_default_context()
print(len(ctx.get_ca_certs()) > 0, pwd.getpwuid(65534).pw_name, getpass.getuser())
with multiprocessing.Pool(2) as p:
    print(sum(p.map(abs, [-1, -2])))`)
	testutil.WantOK(t, res)
	if res.Stdout != "True nobody nobody\n3\n" {
		t.Fatalf("python: %q %q", res.Stdout, res.Stderr)
	}
	if _, err := os.Stat("/usr/bin/node"); err != nil {
		t.Skip("node is not installed")
	}
	res = testutil.Run(t, b, sandbox.Spec{}, "node", "-e", `console.log(require("os").userInfo().username, require("tls").rootCertificates.length > 0)`)
	testutil.WantOK(t, res)
	if res.Stdout != "nobody true\n" {
		t.Fatalf("node: %q %q", res.Stdout, res.Stderr)
	}
}
