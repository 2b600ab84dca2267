package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/execbox/execbox/sandbox"
)

// The checks below are the isolation tests of the backends that run the
// program on the host kernel in namespaces of its own (native, bwrap);
// each is a whole test body.

// hostNetworkInvisible: no process or thread visible in the sandbox's
// /proc is in the host's network namespace: every net view under /proc
// shows lo only. (A network namespace joined by one thread of an init
// would leave its other threads in the host's.)
func hostNetworkInvisible(t *testing.T, b sandbox.Backend) {
	res := Sh(t, b, sandbox.Spec{}, `sleep 1 & for f in /proc/net/dev /proc/[0-9]*/net/dev /proc/[0-9]*/task/[0-9]*/net/dev; do
  test -r "$f" || continue
  echo "$f"
  tail -n +3 "$f" | cut -d: -f1 | tr -d ' '
done; kill $! 2>/dev/null; true`)
	WantOK(t, res)
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(res.Stdout), "\n") {
		if strings.HasPrefix(line, "/proc/") {
			seen++
			continue
		}
		if line != "lo" {
			t.Errorf("an interface other than lo is visible in the sandbox's /proc: %q\n%s", line, res.Stdout)
		}
	}
	if seen < 3 {
		t.Fatalf("read only %d net views: %q %q", seen, res.Stdout, res.Stderr)
	}
}

// privilegesDropped: the program holds no capability in any set,
// no_new_privs is on, seccomp filters it, and it cannot create
// namespaces, mount, ptrace, use keys, chroot or become root. initChecks
// is more Python: try_(name, f) lines (tries more results in all) and
// lines that print a word alone, the last of which must be last.
func privilegesDropped(t *testing.T, b sandbox.Backend, initChecks string, tries int, last string) {
	t.Run("capability_sets_zero", func(t *testing.T) {
		res := Sh(t, b, sandbox.Spec{}, `grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp):' /proc/self/status`)
		WantOK(t, res)
		want := map[string]string{"CapInh": "0000000000000000", "CapPrm": "0000000000000000", "CapEff": "0000000000000000",
			"CapBnd": "0000000000000000", "CapAmb": "0000000000000000", "NoNewPrivs": "1", "Seccomp": "2"}
		got := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(res.Stdout), "\n") {
			k, v, _ := strings.Cut(line, ":")
			got[k] = strings.TrimSpace(v)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s = %q, want %q (status:\n%s)", k, got[k], v, res.Stdout)
			}
		}
	})

	t.Run("denied_syscalls", func(t *testing.T) {
		// A victim outside the sandbox to ptrace; its host PID is what a
		// program might guess.
		victim := exec.Command("/bin/sleep", "30")
		if err := victim.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { victim.Process.Kill(); victim.Wait() }()
		res := Py(t, b, sandbox.Spec{}, fmt.Sprintf(`
import ctypes, os, subprocess, signal
libc = ctypes.CDLL(None, use_errno=True)
def try_(name, f):
    r = f()
    e = ctypes.get_errno()
    print(name, "ok" if r == 0 else os.strerror(e))
CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWNET = 0x10000000, 0x00020000, 0x40000000
try_("unshare_user", lambda: libc.unshare(CLONE_NEWUSER))
try_("unshare_mount", lambda: libc.unshare(CLONE_NEWNS))
try_("unshare_net", lambda: libc.unshare(CLONE_NEWNET))
try_("mount", lambda: libc.mount(b"none", b"/tmp", b"tmpfs", 0, None))
try_("ptrace_host", lambda: libc.ptrace(16, %d, 0, 0))
child = subprocess.Popen(["/bin/sleep", "5"])
try_("ptrace_sibling", lambda: libc.ptrace(16, child.pid, 0, 0))
child.kill()
KEYCTL_JOIN_SESSION_KEYRING = 1
try_("keyctl", lambda: libc.syscall(250, KEYCTL_JOIN_SESSION_KEYRING, 0))
try_("add_key", lambda: libc.syscall(248, b"user", b"k", b"v", 1, -3))
try_("bpf", lambda: libc.syscall(321, 0, 0, 0))
try_("chroot", lambda: libc.chroot(b"/tmp"))
try_("setuid0", lambda: libc.setuid(0))
`, victim.Process.Pid)+initChecks)
		WantOK(t, res)
		n, final := 0, ""
		for _, line := range strings.Split(strings.TrimSpace(res.Stdout), "\n") {
			name, result, isTry := strings.Cut(line, " ")
			if !isTry {
				final = line
				continue
			}
			final = ""
			n++
			if result == "ok" {
				t.Errorf("%s succeeded inside the sandbox", name)
			}
		}
		if n != 11+tries || final != last {
			t.Fatalf("expected %d results then %q, got:\n%s%s", 11+tries, last, res.Stdout, res.Stderr)
		}
		if victim.ProcessState != nil {
			t.Fatal("the victim outside the sandbox died")
		}
	})
}

// OnlyStdFDs: the program sees only fds 0, 1 and 2, even when execbox has
// other fds open without close-on-exec.
func OnlyStdFDs(t *testing.T, b sandbox.Backend) {
	fd, err := syscall.Open("/etc/hostname", syscall.O_RDONLY, 0) // deliberately inheritable
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	res := Py(t, b, sandbox.Spec{}, `
import os
open_fds = []
for fd in range(3, 4096):
    try:
        os.fstat(fd)
        open_fds.append(fd)
    except OSError:
        pass
print(sorted(int(x) for x in os.listdir("/proc/self/fd")), open_fds)`)
	WantOK(t, res)
	if strings.TrimSpace(res.Stdout) != "[0, 1, 2, 3] []" {
		t.Fatalf("fds in the program: %q (want only 0-2, plus listdir's own)", res.Stdout)
	}
}

// utsAndPIDIsolation: the sandbox has its own hostname and its own /proc:
// host processes are neither visible nor signalable, though the same
// search on the host finds them.
func utsAndPIDIsolation(t *testing.T, b sandbox.Backend) {
	host, _ := os.Hostname()
	marker := exec.Command("/bin/sleep", "31.0415")
	if err := marker.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { marker.Process.Kill(); marker.Wait() }()
	const search = `grep -l "31[.]0415" /proc/[0-9]*/cmdline 2>/dev/null | wc -l`
	res := Sh(t, b, sandbox.Spec{}, fmt.Sprintf(`hostname; cat /proc/sys/kernel/hostname; cat /etc/hostname
ls /proc | grep -c '^[0-9]'
%s
kill -0 %d 2>/dev/null && echo "signalled host"
kill -9 %d 2>/dev/null && echo killed; true`, search, marker.Process.Pid, marker.Process.Pid))
	WantOK(t, res)
	lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
	if len(lines) != 5 {
		t.Fatalf("output: %q %q", res.Stdout, res.Stderr)
	}
	if lines[0] != "sandbox" || lines[1] != "sandbox" || lines[2] != "sandbox" || lines[0] == host {
		t.Errorf("hostname inside = %q/%q/%q (host %q), want sandbox", lines[0], lines[1], lines[2], host)
	}
	// PID 1 (the init), sh, ls, grep: a handful, never the host's hundreds.
	if n, _ := strconv.Atoi(lines[3]); n < 2 || n > 8 {
		t.Errorf("%d processes visible in /proc, want only the sandbox's", n)
	}
	if lines[4] != "0" {
		t.Errorf("a host process is visible inside the sandbox: %q", res.Stdout)
	}
	// The same search on the host finds the marker: the check can fail.
	out, _ := exec.Command("/bin/sh", "-c", search).Output()
	if n, _ := strconv.Atoi(strings.TrimSpace(string(out))); n < 1 {
		t.Errorf("the host search did not find the marker: %q", out)
	}
	if marker.ProcessState != nil {
		t.Fatal("the host process died")
	}
}

// MinimalDev: /dev holds only the five devices and a few links (and, where
// the backend gives terminals, ptmx and a devpts of the sandbox's own),
// read-only (no mknod either); /dev/shm shares /tmp's size limit.
func MinimalDev(t *testing.T, b sandbox.Backend) {
	spec := sandbox.Spec{Limits: sandbox.Limits{TmpSize: 8 * sandbox.MiB}}
	res := Sh(t, b, spec, `ls /dev | tr '\n' ' '; echo
echo x > /dev/null && head -c 4 /dev/zero | wc -c && head -c 4 /dev/urandom | wc -c
head -c 6M /dev/zero > /dev/shm/a && echo wrote-6M
head -c 6M /dev/zero > /tmp/b 2>/dev/null || echo tmp-full
head -c 6M /dev/zero > /dev/shm/c 2>/dev/null || echo shm-full
touch /dev/x 2>/dev/null && echo dev-writable
mknod /tmp/n c 1 3 2>/dev/null && echo mknod-ok; true`)
	WantOK(t, res)
	want := "fd full null random shm stderr stdin stdout urandom zero \n4\n4\nwrote-6M\ntmp-full\nshm-full\n"
	if got := strings.Replace(res.Stdout, " ptmx pts ", " ", 1); got != want {
		t.Fatalf("got %q, want %q (stderr %q)", res.Stdout, want, res.Stderr)
	}
}

// artifactSymlinks: a symlink the program plants in /work is never
// followed by the artifact collector, neither to a host file nor to the
// sandbox's own files; it is listed as skipped.
func artifactSymlinks(t *testing.T, b sandbox.Backend) {
	secret := filepath.Join(t.TempDir(), "host-secret")
	if err := os.WriteFile(secret, []byte("host-secret-data"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := sandbox.Run(t.Context(), b, sandbox.Spec{}, &sandbox.Process{Args: []string{"/bin/sh", "-c",
		"ln -s " + secret + " leak && ln -s /etc/passwd passwd && mkdir d && ln -s / d/root && echo real > real.txt"}})
	if err != nil {
		t.Fatal(err)
	}
	WantOK(t, res)
	if len(res.Artifacts) != 1 || res.Artifacts[0].Path != "real.txt" {
		t.Errorf("artifacts %+v, want real.txt only", res.Artifacts)
	}
	for _, a := range res.Artifacts {
		if strings.Contains(string(a.Data), "host-secret-data") || strings.Contains(string(a.Data), "root:") {
			t.Errorf("artifact %s carries a host file", a.Path)
		}
	}
	skipped := map[string]string{}
	for _, s := range res.Skipped {
		skipped[s.Path] = s.Reason
	}
	for _, p := range []string{"leak", "passwd", "d/root"} {
		if skipped[p] != "symlink" {
			t.Errorf("%s: skipped as %q, want symlink (skipped: %v)", p, skipped[p], res.Skipped)
		}
	}
}
