package bwrap

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
)

// Seed 004's four checks: uid 65534, read-only root, no network, host
// secrets invisible.
func TestSeed004Checks(t *testing.T) {
	b := newBackend(t)
	testutil.Seed004(t, b, testutil.Seed004Opts{
		WorkDir:     func(sb sandbox.Sandbox) string { return sb.(*Sandbox).Work.Path },
		WritePaths:  []string{"/x", "/etc/x", "/usr/x", "/bin/x", "/dev/x", "/proc/x", "/etc/passwd"},
		AppendPaths: []string{"/usr/bin/true", "/etc/passwd"},
		MoreWrites:  `chmod 777 / 2>/dev/null && echo "chmod /"`,
		SecretEnv:   "EXECBOX_BWRAP_SECRET",
		ProcFiles:   []string{"/proc/self/environ", "/proc/1/environ", "/proc/1/cmdline"},
		InitRoot:    true,
	})
}

// No process or thread visible in the sandbox's /proc is in the host's
// network namespace.
func TestHostNetworkInvisible(t *testing.T) {
	b := newBackend(t)
	res := testutil.Sh(t, b, sandbox.Spec{}, `sleep 1 & for f in /proc/net/dev /proc/[0-9]*/net/dev /proc/[0-9]*/task/[0-9]*/net/dev; do
  test -r "$f" || continue
  echo "$f"
  tail -n +3 "$f" | cut -d: -f1 | tr -d ' '
done; kill $! 2>/dev/null; true`)
	testutil.WantOK(t, res)
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

// The program holds no capability, no_new_privs is on, our seccomp filter
// (bwrap has none of its own) filters it, and it cannot create
// namespaces, mount, ptrace, use keys, or take down the sandbox's PID 1.
func TestPrivilegesDropped(t *testing.T) {
	b := newBackend(t)
	t.Run("capability_sets_zero", func(t *testing.T) {
		res := testutil.Sh(t, b, sandbox.Spec{}, `grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp):' /proc/self/status`)
		testutil.WantOK(t, res)
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
		victim := exec.Command("/bin/sleep", "30")
		if err := victim.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { victim.Process.Kill(); victim.Wait() }()
		res := testutil.Py(t, b, sandbox.Spec{}, fmt.Sprintf(`
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
try_("ptrace_init", lambda: libc.ptrace(16, 1, 0, 0))
child = subprocess.Popen(["/bin/sleep", "5"])
try_("ptrace_sibling", lambda: libc.ptrace(16, child.pid, 0, 0))
child.kill()
try_("keyctl", lambda: libc.syscall(250, 1, 0))
try_("add_key", lambda: libc.syscall(248, b"user", b"k", b"v", 1, -3))
try_("bpf", lambda: libc.syscall(321, 0, 0, 0))
try_("chroot", lambda: libc.chroot(b"/tmp"))
try_("setuid0", lambda: libc.setuid(0))
# PID 1 is the init; signals from inside its namespace cannot end it.
for s in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGABRT, signal.SIGSEGV, signal.SIGSYS, signal.SIGUSR1, signal.SIGPIPE):
    os.kill(1, s)
import time; time.sleep(0.2)
print("survived")
`, victim.Process.Pid))
		testutil.WantOK(t, res)
		lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
		if len(lines) != 13 || lines[12] != "survived" {
			t.Fatalf("expected 12 results and survived, got:\n%s%s", res.Stdout, res.Stderr)
		}
		for _, line := range lines[:12] {
			name, result, _ := strings.Cut(line, " ")
			if result == "ok" {
				t.Errorf("%s succeeded inside the sandbox", name)
			}
		}
		if victim.ProcessState != nil {
			t.Fatal("the victim outside the sandbox died")
		}
	})
}

// The sandbox has its own hostname and /proc: host processes are neither
// visible nor signalable.
func TestUTSAndPIDIsolation(t *testing.T) {
	b := newBackend(t)
	host, _ := os.Hostname()
	marker := exec.Command("/bin/sleep", "31.0415")
	if err := marker.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { marker.Process.Kill(); marker.Wait() }()
	res := testutil.Sh(t, b, sandbox.Spec{}, fmt.Sprintf(`hostname; cat /etc/hostname; ls /proc | grep -c '^[0-9]'
grep -l "31[.]0415" /proc/[0-9]*/cmdline 2>/dev/null | wc -l
kill -9 %d 2>/dev/null && echo killed; true`, marker.Process.Pid))
	testutil.WantOK(t, res)
	lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
	if len(lines) != 4 {
		t.Fatalf("output: %q %q", res.Stdout, res.Stderr)
	}
	if lines[0] != "sandbox" || lines[1] != "sandbox" || lines[0] == host {
		t.Errorf("hostname inside = %q/%q (host %q), want sandbox", lines[0], lines[1], host)
	}
	if n, _ := strconv.Atoi(lines[2]); n < 2 || n > 8 {
		t.Errorf("%d processes visible in /proc, want only the sandbox's", n)
	}
	if lines[3] != "0" {
		t.Errorf("a host process is visible inside the sandbox: %q", res.Stdout)
	}
	// The same search on the host finds the marker: the check can fail.
	out, _ := exec.Command("/bin/sh", "-c", `grep -l "31[.]0415" /proc/[0-9]*/cmdline 2>/dev/null | wc -l`).Output()
	if n, _ := strconv.Atoi(strings.TrimSpace(string(out))); n < 1 {
		t.Errorf("the host search did not find the marker: %q", out)
	}
	if marker.ProcessState != nil {
		t.Fatal("the host process died")
	}
}

// A symlink the program plants in /work is never followed by the artifact
// collector.
func TestArtifactSymlinkNotFollowed(t *testing.T) {
	b := newBackend(t)
	secret := filepath.Join(t.TempDir(), "host-secret")
	if err := os.WriteFile(secret, []byte("host-secret-data"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := sandbox.Run(t.Context(), b, sandbox.Spec{}, &sandbox.Process{Args: []string{"/bin/sh", "-c",
		"ln -s " + secret + " leak && ln -s /etc/passwd passwd && echo real > real.txt"}})
	if err != nil {
		t.Fatal(err)
	}
	testutil.WantOK(t, res)
	if len(res.Artifacts) != 1 || res.Artifacts[0].Path != "real.txt" {
		t.Fatalf("artifacts %+v", res.Artifacts)
	}
}
