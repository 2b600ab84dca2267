package native

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
)

// Seed 004's four checks: uid 65534, read-only root, no network, host
// secrets invisible.
func TestSeed004Checks(t *testing.T) {
	b := newBackend(t)
	testutil.Seed004(t, b, testutil.Seed004Opts{
		WorkDir:     func(sb sandbox.Sandbox) string { return sb.(*Sandbox).Work.Path },
		WritePaths:  []string{"/x", "/etc/x", "/usr/x", "/bin/x", "/dev/x", "/proc/x"},
		AppendPaths: []string{"/usr/bin/true", "/etc/passwd"},
		SecretEnv:   "EXECBOX_NATIVE_SECRET",
		ProcFiles:   []string{"/proc/self/environ", "/proc/1/environ"},
		InitRoot:    true,
	})
}

// No process or thread visible in the sandbox's /proc is in the host's
// network namespace: every net view under /proc shows lo only. (A network
// namespace joined by one thread of the init would leave its other threads
// in the host's.)
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

// The init's own environment is empty, so /proc/1/environ (which a program
// could read if it could reach it) holds nothing; seen from the host too.
func TestInitEnvironEmpty(t *testing.T) {
	b := newBackend(t)
	t.Setenv("EXECBOX_NATIVE_INIT_SECRET", "should-not-leak")
	res := testutil.Sh(t, b, sandbox.Spec{}, `if env=$(cat /proc/1/environ 2>&1); then printf 'read:%s' "$env"; else echo denied; fi
test -e /proc/1 && echo "init visible"; true`)
	testutil.WantOK(t, res)
	if res.Stdout != "read:" && res.Stdout != "denied\n" {
		t.Fatalf("/proc/1/environ inside = %q, want empty or unreadable", res.Stdout)
	}
	// Stronger: the init is not visible at all (proc's hidepid=2).
	if strings.Contains(res.Stdout, "init visible") {
		t.Errorf("the init is visible in the sandbox's /proc")
	}

	// From the host: find the running init and read its environ.
	sb := testutil.Create(t, b, sandbox.Spec{})
	done := make(chan *sandbox.Result, 1)
	go func() { done <- testutil.Exec(t, sb, "/bin/sleep", "3") }()
	var found bool
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline) && !found; time.Sleep(20 * time.Millisecond) {
		for _, pid := range initPIDs(t) {
			env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
			if err != nil {
				continue
			}
			found = true
			if len(env) != 0 {
				t.Fatalf("the init's /proc/%d/environ holds %q", pid, env)
			}
		}
	}
	if !found {
		t.Fatal("found no running init to check")
	}
	<-done
}

// initPIDs lists this process's children that are sandbox inits.
func initPIDs(t *testing.T) []int {
	t.Helper()
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if strings.Contains(string(cmd), "nsinit") || strings.Contains(string(cmd), "execbox-init") {
			out = append(out, pid)
		}
	}
	return out
}

// The program holds no capability in any set, no_new_privs is on, seccomp
// filters it, and it cannot create namespaces, mount, ptrace or use keys.
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
		// A victim outside the sandbox to ptrace; its host PID is what a
		// program might guess.
		victim := exec.Command("/bin/sleep", "30")
		if err := victim.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { victim.Process.Kill(); victim.Wait() }()
		res := testutil.Py(t, b, sandbox.Spec{}, fmt.Sprintf(`
import ctypes, os, subprocess
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
try_("kill_init", lambda: libc.kill(1, 9))
`, victim.Process.Pid))
		testutil.WantOK(t, res)
		for _, line := range strings.Split(strings.TrimSpace(res.Stdout), "\n") {
			name, result, _ := strings.Cut(line, " ")
			if result == "ok" {
				t.Errorf("%s succeeded inside the sandbox", name)
			}
		}
		if n := strings.Count(res.Stdout, "\n"); n != 12 {
			t.Fatalf("expected 12 results, got:\n%s%s", res.Stdout, res.Stderr)
		}
		if victim.ProcessState != nil {
			t.Fatal("the victim outside the sandbox died")
		}
	})
}

// The program sees only 0, 1 and 2, even when execbox has other fds open
// without close-on-exec.
func TestNoInheritedFDs(t *testing.T) {
	b := newBackend(t)
	fd, err := syscall.Open("/etc/hostname", syscall.O_RDONLY, 0) // deliberately inheritable
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	res := testutil.Py(t, b, sandbox.Spec{}, `
import os
open_fds = []
for fd in range(3, 4096):
    try:
        os.fstat(fd)
        open_fds.append(fd)
    except OSError:
        pass
print(sorted(int(x) for x in os.listdir("/proc/self/fd")), open_fds)`)
	testutil.WantOK(t, res)
	if strings.TrimSpace(res.Stdout) != "[0, 1, 2, 3] []" {
		t.Fatalf("fds in the program: %q (want only 0-2, plus listdir's own)", res.Stdout)
	}
}

// The sandbox has its own hostname and its own /proc: host processes are
// neither visible nor signalable.
func TestUTSAndPIDIsolation(t *testing.T) {
	b := newBackend(t)
	host, _ := os.Hostname()
	marker := exec.Command("/bin/sleep", "31.0415")
	if err := marker.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { marker.Process.Kill(); marker.Wait() }()
	res := testutil.Sh(t, b, sandbox.Spec{}, fmt.Sprintf(`hostname; cat /proc/sys/kernel/hostname
ls /proc | grep -c '^[0-9]'
cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\0' ' ' | grep -c "31.04[1]5"
kill -0 %d 2>/dev/null && echo "signalled host"; true`, marker.Process.Pid))
	testutil.WantOK(t, res)
	lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
	if len(lines) != 4 {
		t.Fatalf("output: %q %q", res.Stdout, res.Stderr)
	}
	if lines[0] != "sandbox" || lines[1] != "sandbox" || lines[0] == host {
		t.Errorf("hostname inside = %q/%q (host %q), want sandbox", lines[0], lines[1], host)
	}
	// PID 1 (the init), sh, ls, grep: a handful, never the host's hundreds.
	if n, _ := strconv.Atoi(lines[2]); n < 2 || n > 8 {
		t.Errorf("%d processes visible in /proc, want only the sandbox's", n)
	}
	if lines[3] != "0" {
		t.Errorf("a host process is visible inside the sandbox")
	}
	if marker.ProcessState != nil {
		t.Fatal("the host process died")
	}
}

// /dev holds only the five devices; /dev/shm shares /tmp's size limit.
func TestDev(t *testing.T) {
	b := newBackend(t)
	spec := sandbox.Spec{Limits: sandbox.Limits{TmpSize: 8 * sandbox.MiB}}
	res := testutil.Sh(t, b, spec, `ls /dev | tr '\n' ' '; echo
echo x > /dev/null && head -c 4 /dev/zero | wc -c && head -c 4 /dev/urandom | wc -c
head -c 6M /dev/zero > /dev/shm/a && echo wrote-6M
head -c 6M /dev/zero > /tmp/b 2>/dev/null || echo tmp-full
head -c 6M /dev/zero > /dev/shm/c 2>/dev/null || echo shm-full
mknod /tmp/n c 1 3 2>/dev/null && echo mknod-ok; true`)
	testutil.WantOK(t, res)
	want := "fd full null random shm stderr stdin stdout urandom zero \n4\n4\nwrote-6M\ntmp-full\nshm-full\n"
	if res.Stdout != want {
		t.Fatalf("got %q, want %q (stderr %q)", res.Stdout, want, res.Stderr)
	}
}

// A symlink the program plants in /work is never followed by the artifact
// collector: neither to a host file nor to the sandbox's own files.
func TestArtifactSymlinkNotFollowed(t *testing.T) {
	b := newBackend(t)
	secret := filepath.Join(t.TempDir(), "host-secret")
	if err := os.WriteFile(secret, []byte("host-secret-data"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := sandbox.Run(t.Context(), b, sandbox.Spec{}, &sandbox.Process{Args: []string{"/bin/sh", "-c",
		"ln -s " + secret + " leak && ln -s /etc/passwd passwd && mkdir d && ln -s / d/root && echo real > real.txt"}})
	if err != nil {
		t.Fatal(err)
	}
	testutil.WantOK(t, res)
	for _, a := range res.Artifacts {
		if a.Path != "real.txt" {
			t.Errorf("artifact %s returned (%q)", a.Path, a.Data)
		}
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
