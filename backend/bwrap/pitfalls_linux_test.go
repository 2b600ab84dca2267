package bwrap

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/execbox/execbox/backend/internal/hostbase"
	"github.com/execbox/execbox/internal/host/reexec"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
)

// Each known bwrap pitfall is shown on a plain bwrap first (the control:
// the check below it can fail), then shown closed in the backend.

// rawBwrap runs script in a bare bwrap sandbox the way a naive launcher
// would: the launcher's environment and fds, bwrap's own PID 1, --dev.
// asRoot runs bwrap as host root, else as host uid 65534.
func rawBwrap(t *testing.T, asRoot bool, extra []*os.File, script string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		testutil.SkipOrFail(t, Name, "bwrap backend tests run as root (euid %d)", os.Geteuid())
	}
	// Not through a Backend: its Exec would mark the test's inherited fds
	// close-on-exec.
	bw, err := exec.LookPath("bwrap")
	if err != nil {
		testutil.SkipOrFail(t, Name, "bwrap: %v", err)
	}
	args := []string{"--unshare-all", "--die-with-parent", "--uid", "65534", "--gid", "65534",
		"--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
		"--symlink", "usr/lib64", "/lib64", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
		"--", "/bin/sh", "-c", script}
	cmd := exec.Command(bw, args...)
	cmd.ExtraFiles = extra
	if !asRoot {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: hostbase.UID, Gid: hostbase.GID, Groups: []uint32{}}}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("raw bwrap: %v: %s", err, out)
	}
	return string(out)
}

// hostProc is a process seen from the host.
type hostProc struct {
	pid, ppid int
	cmdline   string
}

// descendants lists this process's descendants.
func descendants(t *testing.T) []hostProc {
	t.Helper()
	ents, _ := os.ReadDir("/proc")
	all := map[int]hostProc{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid := parentOf(pid); ppid > 0 {
			cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			all[pid] = hostProc{pid: pid, ppid: ppid, cmdline: strings.ReplaceAll(string(cmd), "\x00", " ")}
		}
	}
	mine := map[int]bool{os.Getpid(): true}
	var out []hostProc
	for changed := true; changed; {
		changed = false
		for pid, p := range all {
			if !mine[pid] && mine[p.ppid] {
				mine[pid] = true
				out = append(out, p)
				changed = true
			}
		}
	}
	return out
}

// whileRunning runs `sleep <marker>` in a sandbox of b and calls f with
// the bwrap monitor, the sandbox's PID 1 and the program, as the host
// sees them.
func whileRunning(t *testing.T, b *Backend, f func(bwrap, init, program hostProc)) {
	t.Helper()
	const marker = "7.31415"
	sb := testutil.Create(t, b, sandbox.Spec{})
	done := make(chan *sandbox.Result, 1)
	go func() { done <- testutil.Exec(t, sb, "/bin/sleep", marker) }()
	defer func() { sb.Close(t.Context()); <-done }()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var bw, in, pr hostProc
		for _, p := range descendants(t) {
			switch {
			case strings.HasPrefix(p.cmdline, "bwrap "):
				bw = p
			case strings.Contains(p.cmdline, reexec.Arg0(initEntry)):
				in = p
			case p.cmdline == "/bin/sleep "+marker+" ":
				pr = p
			}
		}
		if bw.pid > 0 && in.pid > 0 && pr.pid > 0 {
			if in.ppid != bw.pid || pr.ppid != in.pid {
				t.Fatalf("unexpected tree: bwrap %+v, init %+v, program %+v", bw, in, pr)
			}
			f(bw, in, pr)
			return
		}
	}
	t.Fatalf("did not find the sandbox's processes: %+v", descendants(t))
}

// bwrap's own PID-1 helper keeps the launcher's environment, readable in
// /proc/1/environ. The backend starts bwrap with an empty environment,
// replaces the helper with its own init (--as-pid-1), which is not
// dumpable, and hands the program its environment over the control socket.
func TestPitfallPID1Environ(t *testing.T) {
	secret := "launcher-secret-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	t.Setenv("EXECBOX_BWRAP_LAUNCHER_SECRET", secret)
	if out := rawBwrap(t, false, nil, "cat /proc/1/environ"); !strings.Contains(out, secret) {
		t.Fatalf("control: plain bwrap's PID 1 did not show the launcher's environment: %q", out)
	}
	b := newBackend(t)
	res := testutil.Sh(t, b, sandbox.Spec{}, `for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do tr '\0' '\n' < $f 2>/dev/null; done; cat /proc/1/environ 2>&1`)
	if strings.Contains(res.Stdout, secret) {
		t.Fatalf("the launcher's environment is readable in the sandbox:\n%s", res.Stdout)
	}
	if !strings.Contains(res.Stdout, "Permission denied") {
		t.Errorf("/proc/1/environ was readable: %q", res.Stdout)
	}
	whileRunning(t, b, func(bw, in, pr hostProc) {
		for _, p := range []hostProc{bw, in, pr} {
			env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.pid))
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(env), secret) {
				t.Errorf("%q holds the launcher's environment", p.cmdline)
			}
			if p == bw && len(env) != 0 {
				t.Errorf("bwrap's environment is %q, want empty", env)
			}
			if p == in && string(env) != "PWD=/\x00" {
				t.Errorf("the init's environment is %q, want bwrap's PWD only", env)
			}
		}
	})
}

// bwrap passes every fd it inherits to the program. The backend starts
// bwrap with only the fds it means (inherited ones are made close-on-exec
// first) and its init closes everything above 2 before the program runs.
func TestPitfallInheritedFDs(t *testing.T) {
	// An inheritable fd, as from execbox's parent, at a number nothing
	// else takes.
	inherit := func(n int) {
		fd, err := syscall.Open("/etc/hostname", syscall.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Dup2(fd, n); err != nil {
			t.Fatal(err)
		}
		syscall.Close(fd)
		t.Cleanup(func() { syscall.Close(n) })
	}
	inherit(100)
	if out := rawBwrap(t, false, nil, "ls /proc/self/fd | tr '\\n' ' '"); !strings.Contains(out, " 100 ") {
		t.Fatalf("control: plain bwrap did not pass the inherited fd through: %q", out)
	}
	b := newBackend(t)
	inherit(101)
	fd2 := 101
	testutil.OnlyStdFDs(t, b)
	// Nor did bwrap or the sandbox's PID 1 (which bwrap hands every fd
	// it got): only the fds execbox means go in.
	var st syscall.Stat_t
	syscall.Fstat(fd2, &st)
	whileRunning(t, b, func(bw, in, pr hostProc) {
		for _, p := range []hostProc{bw, in} {
			ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.pid))
			if len(ents) < 3 {
				t.Errorf("read only %d fds of %q", len(ents), p.cmdline)
			}
			for _, e := range ents {
				var o syscall.Stat_t
				if syscall.Stat(fmt.Sprintf("/proc/%d/fd/%s", p.pid, e.Name()), &o) == nil && o.Ino == st.Ino && o.Dev == st.Dev {
					t.Errorf("%q holds the inherited fd as its fd %s", p.cmdline, e.Name())
				}
			}
		}
	})
	// The test process's own fd still works.
	if _, err := syscall.Seek(fd2, 0, 0); err != nil {
		t.Errorf("the inherited fd is broken: %v", err)
	}
}

// --dev gives an unbounded /dev/shm (and ptmx, pts). The backend's /dev
// holds five nodes and links; /dev/shm points into the size-limited /tmp.
func TestPitfallDevShm(t *testing.T) {
	out := rawBwrap(t, false, nil, "ls /dev | tr '\\n' ' '; echo; df -k /dev/shm | tail -1")
	if !strings.Contains(out, "shm") || !strings.Contains(out, "pts") {
		t.Fatalf("control: plain bwrap --dev: %q", out)
	}
	f := strings.Fields(out[strings.LastIndexByte(strings.TrimSpace(out), '\n')+1:])
	if size, _ := strconv.Atoi(f[1]); size < 64<<10 {
		t.Fatalf("control: --dev's /dev/shm is only %d KiB: %q", size, out)
	}
	testutil.MinimalDev(t, newBackend(t))
}

// bwrap started as host root maps the sandbox's uid to host root, so
// per-user limits and host permissions do not apply. The backend starts
// bwrap as host uid 65534: the program, the init and bwrap are all
// 65534 on the host.
func TestPitfallHostUID(t *testing.T) {
	hostUID := func(pid int) string {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(data)) {
			if v, ok := strings.CutPrefix(line, "Uid:"); ok {
				return strings.Join(strings.Fields(v), " ")
			}
		}
		return ""
	}
	// Control: as root, bwrap's --uid 65534 is host root.
	out := rawBwrap(t, true, nil, "id -u; grep Uid /proc/self/status; cat /proc/self/uid_map")
	if !strings.HasPrefix(out, "65534\n") || !strings.Contains(out, "65534          0          1") {
		t.Fatalf("control: root bwrap's uid map: %q", out)
	}
	b := newBackend(t)
	whileRunning(t, b, func(bw, in, pr hostProc) {
		for _, p := range []hostProc{bw, in, pr} {
			if u := hostUID(p.pid); u != "65534 65534 65534 65534" {
				t.Errorf("%q runs as host uids %q, want 65534", p.cmdline, u)
			}
		}
	})
}

// bwrap has no seccomp policy of its own: plain bwrap's program runs
// unfiltered; the backend passes execbox's filter with --seccomp.
func TestPitfallSeccomp(t *testing.T) {
	if out := rawBwrap(t, false, nil, "grep '^Seccomp:' /proc/self/status"); !strings.Contains(out, "Seccomp:\t0") {
		t.Fatalf("control: plain bwrap: %q", out)
	}
	b := newBackend(t)
	res := testutil.Py(t, b, sandbox.Spec{}, `
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
print(open("/proc/self/status").read().split("Seccomp:")[1].split()[0])
r = libc.syscall(250, 1, 0)  # keyctl: allowed by the kernel, denied by the filter
print(r, os.strerror(ctypes.get_errno()))`)
	testutil.WantOK(t, res)
	if res.Stdout != "2\n-1 Operation not permitted\n" {
		t.Fatalf("seccomp in the program: %q %q", res.Stdout, res.Stderr)
	}
}
