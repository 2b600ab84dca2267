package gvisor

import (
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
)

// Seed 004's four checks: uid 65534, read-only root, no network, host
// secrets invisible.
func TestSeed004Checks(t *testing.T) {
	b := newBackend(t)
	testutil.Seed004(t, b, testutil.Seed004Opts{
		WorkDir:     func(sb sandbox.Sandbox) string { return sb.(*Sandbox).Work.Path },
		WritePaths:  []string{"/x", "/etc/x", "/usr/x", "/bin/x", "/dev/x", "/proc/x", "/sys/x"},
		AppendPaths: []string{"/usr/bin/true", "/etc/passwd", "/etc/ld.so.cache"},
		SecretEnv:   "EXECBOX_GVISOR_SECRET",
		ProcFiles:   []string{"/proc/self/environ", "/proc/1/environ"},
		HiddenPaths: []string{b.WorkRoot()},
		MountCheck:  true,
	})
}

// The program talks to gVisor's kernel, not the host's: its kernel release
// is gVisor's, and the host's processes are invisible.
func TestUserSpaceKernel(t *testing.T) {
	b := newBackend(t)
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	host := unix.ByteSliceToString(u.Release[:])
	res := testutil.Py(t, b, sandbox.Spec{}, `import os; print(os.uname().release); print(os.uname().nodename); print(len([p for p in os.listdir("/proc") if p.isdigit()]))`)
	testutil.WantOK(t, res)
	lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
	if len(lines) != 3 {
		t.Fatalf("output %q %q", res.Stdout, res.Stderr)
	}
	t.Logf("kernel release inside %q, host %q", lines[0], host)
	if lines[0] == "" || lines[0] == host {
		t.Errorf("kernel release inside = %q, the host's is %q: not gVisor's kernel", lines[0], host)
	}
	if lines[1] != "sandbox" {
		t.Errorf("hostname inside = %q, want sandbox", lines[1])
	}
	if n, _ := strconv.Atoi(lines[2]); n < 1 || n > 3 {
		t.Errorf("%s processes visible in /proc, want only the sandbox's own", lines[2])
	}
	if res.Isolation != sandbox.IsolationKernel || res.Backend != Name {
		t.Errorf("result says backend %s isolation %s", res.Backend, res.Isolation)
	}
}

// The program holds no capability, and execbox's seccomp policy is in
// force inside the sandbox: a syscall it denies fails with EPERM, clone3
// with ENOSYS (so libc falls back to clone and threads work).
func TestPrivilegesDropped(t *testing.T) {
	b := newBackend(t)
	res := testutil.Py(t, b, sandbox.Spec{}, `
import ctypes, os, threading
status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines() if ":" in l)
print("caps", status["CapEff"].strip(), status["CapPrm"].strip(), status["CapBnd"].strip(), "seccomp", status["Seccomp"].strip())
libc = ctypes.CDLL(None, use_errno=True)
def try_(name, f):
    r = f()
    print(name, "ok" if r == 0 else os.strerror(ctypes.get_errno()))
try_("keyctl", lambda: libc.syscall(250, 1, 0))
try_("unshare_user", lambda: libc.unshare(0x10000000))
try_("mount", lambda: libc.mount(b"none", b"/tmp", b"tmpfs", 0, None))
try_("clone3", lambda: libc.syscall(435, 0, 0))
try_("setuid0", lambda: libc.setuid(0))
t = threading.Thread(target=lambda: print("thread ran")); t.start(); t.join()`)
	testutil.WantOK(t, res)
	want := "caps 0000000000000000 0000000000000000 0000000000000000 seccomp 2\n" +
		"keyctl Operation not permitted\nunshare_user Operation not permitted\nmount Operation not permitted\n" +
		"clone3 Function not implemented\nsetuid0 Operation not permitted\nthread ran\n"
	if res.Stdout != want {
		t.Fatalf("got:\n%s%s\nwant:\n%s", res.Stdout, res.Stderr, want)
	}
}

// The program cannot see or use execbox's bundle, runsc's state or other
// sandboxes' work dirs: none of them is mounted.
func TestBundleInvisible(t *testing.T) {
	b := newBackend(t)
	other := testutil.Create(t, b, sandbox.Spec{})
	if err := other.WriteFiles(t.Context(), map[string][]byte{"other.txt": []byte("other sandbox")}); err != nil {
		t.Fatal(err)
	}
	sb := testutil.Create(t, b, sandbox.Spec{})
	s := sb.(*Sandbox)
	res := testutil.Exec(t, sb, "/bin/sh", "-c", `for p in /config.json /rootfs /state /log `+s.Dir+` `+other.(*Sandbox).Work.Path+`; do
  if [ -e "$p" ]; then echo "visible: $p"; fi
done; cat /proc/mounts | grep -c `+b.WorkRoot()+`; true`)
	testutil.WantOK(t, res)
	if res.Stdout != "0\n" {
		t.Fatalf("execbox's own files are visible in the sandbox: %q %q", res.Stdout, res.Stderr)
	}
}
