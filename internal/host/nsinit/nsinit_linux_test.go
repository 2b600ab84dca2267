package nsinit

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/execbox/execbox/internal/testutil"
)

func validConfig() *Config {
	return &Config{
		Args: []string{"/bin/true"}, Dir: "/work", Root: "/tmp/root",
		Binds: []Bind{{Source: "/usr", Target: "/usr"}}, Devices: []string{"null"},
		Tmp: Tmp{Size: 1 << 20},
	}
}

func TestValidate(t *testing.T) {
	if err := validConfig().Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	for name, mod := range map[string]func(*Config){
		"no args":               func(c *Config) { c.Args = nil },
		"empty program":         func(c *Config) { c.Args = []string{""} },
		"relative root":         func(c *Config) { c.Root = "tmp/root" },
		"root is /":             func(c *Config) { c.Root = "/" },
		"unclean dir":           func(c *Config) { c.Dir = "/work/../etc" },
		"relative target":       func(c *Config) { c.Binds[0].Target = "usr" },
		"bind on /":             func(c *Config) { c.Binds[0].Target = "/" },
		"mount source":          func(c *Config) { c.Mounts = []Bind{{Source: "x", Target: "/x"}} },
		"file path":             func(c *Config) { c.Files = []File{{Path: "/etc/../x"}} },
		"symlink path":          func(c *Config) { c.Symlinks = []Symlink{{Path: "bin", Target: "usr/bin"}} },
		"device path":           func(c *Config) { c.Devices = []string{"../sda"} },
		"dev link outside /dev": func(c *Config) { c.DevLinks = []Symlink{{Path: "/etc/shm", Target: "/tmp"}} },
		"no tmp size":           func(c *Config) { c.Tmp.Size = 0 },
	} {
		c := validConfig()
		mod(c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestFraming(t *testing.T) {
	msg, err := frame(validConfig())
	if err != nil {
		t.Fatal(err)
	}
	var got Config
	if err := ReadMsg(bytes.NewReader(msg), &got); err != nil || got.Args[0] != "/bin/true" {
		t.Fatalf("round trip: %v %+v", err, got)
	}
	// A length over the bound is refused before anything is allocated.
	over := []byte{0xff, 0xff, 0xff, 0xff}
	if err := ReadMsg(bytes.NewReader(over), &got); err == nil {
		t.Fatal("a 4 GiB length was accepted")
	}
	// At the bound: accepted by the framing (JSON decides the rest).
	c := validConfig()
	c.Env = []string{strings.Repeat("x", maxConfig-1000)}
	if _, err := frame(c); err != nil {
		t.Fatalf("a config just under the bound: %v", err)
	}
	c.Env = []string{strings.Repeat("x", maxConfig)}
	if _, err := frame(c); err == nil {
		t.Fatal("a config over the bound was framed")
	}
	// A truncated message is an error, not a short config.
	if err := ReadMsg(bytes.NewReader(msg[:len(msg)-1]), &got); err == nil {
		t.Fatal("a truncated message was accepted")
	}
}

// fakeInit writes a Python script standing in for the init; ctl is fd 3.
func fakeInit(t *testing.T, body string) string {
	t.Helper()
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		testutil.SkipOrFail(t, "python3", "python3 is not installed")
	}
	p := filepath.Join(t.TempDir(), "fake-init")
	script := "#!/usr/bin/python3\nimport os, struct, sys, threading\nctl = 3\n" +
		"def recv(n):\n    b = b''\n    while len(b) < n:\n        c = os.read(ctl, n - len(b))\n        if not c: return b\n        b += c\n    return b\n" +
		"def config():\n    n = struct.unpack('>I', recv(4))[0]\n    return recv(n)\n" + body + "\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// serve runs a Launch of the fake init the way a backend does.
func serve(t *testing.T, init string, place func(pid, tid int) error) (*Status, error) {
	t.Helper()
	l, err := NewLaunch(validConfig(), Options{InitPath: init, CgroupFD: -1})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		st  *Status
		err error
	}
	done := make(chan result, 1)
	go func() {
		st, err := l.Serve(place)
		done <- result{st, err}
	}()
	if err := l.Cmd.Run(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatal(err)
		}
	}
	l.Release()
	r := <-done
	return r.st, r.err
}

func TestServeProtocol(t *testing.T) {
	t.Run("stale init refused", func(t *testing.T) {
		_, err := serve(t, fakeInit(t, `os.write(ctl, b"\x09\0\0\0\1")`), nil)
		if err == nil || !strings.Contains(err.Error(), "protocol 9") {
			t.Fatalf("Serve: %v, want a protocol mismatch", err)
		}
	})
	t.Run("init dies before ready", func(t *testing.T) {
		_, err := serve(t, fakeInit(t, `sys.exit(3)`), nil)
		if err == nil || !strings.Contains(err.Error(), "before it was ready") {
			t.Fatalf("Serve: %v", err)
		}
	})
	t.Run("placement failure withholds the go-ahead", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "got")
		init := fakeInit(t, fmt.Sprintf(`os.write(ctl, bytes([%d]) + struct.pack(">I", threading.get_native_id()))
cfg = config()
open(%q, "wb").write(recv(1))`, protocol, out))
		_, err := serve(t, init, func(int, int) error { return errors.New("no cgroup for you") })
		if err == nil || err.Error() != "no cgroup for you" {
			t.Fatalf("Serve: %v", err)
		}
		if b, err := os.ReadFile(out); err != nil || len(b) != 0 {
			t.Fatalf("after a failed placement the init read %q (%v), want EOF", b, err)
		}
	})
	t.Run("pid, go-ahead and status", func(t *testing.T) {
		init := fakeInit(t, fmt.Sprintf(`os.write(ctl, bytes([%d]) + struct.pack(">I", threading.get_native_id()))
cfg = config()
assert b'"args":["/bin/true"]' in cfg, cfg
assert recv(1) == b"G"
st = b'{"exit_code":7,"landlock":"x"}'
os.write(ctl, struct.pack(">I", len(st)) + st)`, protocol))
		var pid, tid int
		st, err := serve(t, init, func(p, t int) error { pid, tid = p, t; return nil })
		if err != nil || st.ExitCode != 7 || st.Landlock != "x" {
			t.Fatalf("Serve: %+v %v", st, err)
		}
		if pid <= 1 || tid != pid {
			t.Fatalf("placement got pid %d, thread %d; want the main thread of a pid > 1", pid, tid)
		}
	})
	t.Run("init dies after go-ahead", func(t *testing.T) {
		init := fakeInit(t, fmt.Sprintf(`os.write(ctl, bytes([%d]) + struct.pack(">I", threading.get_native_id()))
config(); recv(1); os.kill(os.getpid(), 9)`, protocol))
		_, err := serve(t, init, nil)
		if err == nil || !strings.Contains(err.Error(), "without a status") {
			t.Fatalf("Serve: %v", err)
		}
	})
}

// The real init, re-executed from this test binary, never exits before its
// go-ahead: a placement slower than a failing setup still gets the init's
// own error, not "no such process". Needs root (namespaces, mounts).
func TestSlowPlacementKeepsStatus(t *testing.T) {
	st := runInit(t, sandboxConfig(t, t.TempDir(), "no-such-program"), func(pid int) error {
		time.Sleep(200 * time.Millisecond) // the init has long failed its lookup
		return syscall.Kill(pid, 0)        // and must still be there
	})
	if st.Code != CodeNotFound {
		t.Fatalf("status %+v, want %s", st, CodeNotFound)
	}
}

// LookPath and ExecErrorCode sort a program that cannot start into not
// found (exit 127) and not executable (exit 126), as a shell does.
func TestProgramErrorCodes(t *testing.T) {
	env := []string{"PATH=/usr/bin:/bin"}
	if p, err := LookPath("sh", env, "/"); err != nil || !strings.HasSuffix(p, "/sh") {
		t.Fatalf("LookPath(sh) = %q, %v", p, err)
	}
	for prog, want := range map[string]string{
		"execbox-no-such-program":  CodeNotFound,
		"/usr/bin/execbox-no-such": CodeNotFound,
		"/etc/passwd":              CodeNotExecutable,
		"/etc":                     CodeNotExecutable,
		"/dev/null":                CodeNotExecutable,
		"/etc/passwd/x":            CodeNotExecutable, // ENOTDIR, as a shell says "Not a directory" (126)
	} {
		_, err := LookPath(prog, env, "/")
		if got := ProgramErrorCode(err); err == nil || got != want {
			t.Errorf("LookPath(%q) = %v (code %q), want %s", prog, err, got, want)
		}
	}
	for err, want := range map[error]string{
		syscall.ENOENT: CodeNotFound, syscall.EACCES: CodeNotExecutable, syscall.ENOEXEC: CodeNotExecutable,
		syscall.EISDIR: CodeNotExecutable, syscall.ENOMEM: CodeStartFailed, errors.New("other"): CodeStartFailed,
		fmt.Errorf("wrapped: %w", syscall.ENOENT): CodeNotFound,
	} {
		if got := ExecErrorCode(err); got != want {
			t.Errorf("ExecErrorCode(%v) = %s, want %s", err, got, want)
		}
	}
}

// runInit runs the real init, re-executed from this test binary, with cfg
// in fresh namespaces mapping root and 65534 to themselves, and returns
// its status; place (may be nil) gets the init's host PID, and its error
// withholds the go-ahead. Needs root.
func runInit(t *testing.T, cfg *Config, place func(pid int) error) *Status {
	t.Helper()
	if os.Geteuid() != 0 {
		if strings.Contains(os.Getenv("EXECBOX_REQUIRE"), "native") {
			t.Fatal("needs root")
		}
		t.Skip("needs root")
	}
	ids := []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}, {ContainerID: 65534, HostID: 65534, Size: 1}}
	l, err := NewLaunch(cfg, Options{Cloneflags: Namespaces, UIDMap: ids, GIDMap: ids, Setgroups: true, CgroupFD: -1})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var st *Status
	go func() {
		var err error
		st, err = l.Serve(func(pid, _ int) error {
			if place != nil {
				return place(pid)
			}
			return nil
		})
		done <- err
	}()
	if err := l.Cmd.Run(); err != nil {
		t.Fatalf("init: %v", err)
	}
	l.Release()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	return st
}

// sandboxConfig runs args as 65534 with /usr and a host work dir.
func sandboxConfig(t *testing.T, work string, args ...string) *Config {
	return &Config{
		Args: args, Env: []string{"PATH=/usr/bin:/bin"}, Dir: "/work",
		UID: 65534, GID: 65534, Hostname: "sandbox", Root: t.TempDir(),
		Binds:    []Bind{{Source: "/usr", Target: "/usr", Exec: true}},
		Symlinks: []Symlink{{Path: "/bin", Target: "usr/bin"}, {Path: "/lib64", Target: "usr/lib64"}, {Path: "/lib", Target: "usr/lib"}},
		Devices:  []string{"null"},
		Tmp:      Tmp{Size: 1 << 20},
		Mounts:   []Bind{{Source: work, Target: "/work", Writable: true, Exec: true}},
	}
}

// The rootless stand-ins for a cgroup (RLIMIT_AS, RLIMIT_NPROC) bind the
// program and never the init, which must keep mapping memory and starting
// threads while it waits: a process-wide limit on the init once killed it
// mid-run and lost the program's status. The program gets them exactly,
// and a program execve refuses is still classified.
func TestProcessWideRlimitsBindTheProgramOnly(t *testing.T) {
	work := t.TempDir()
	os.Chmod(work, 0o777)
	const as, nproc = 3 << 30, 77
	cfg := sandboxConfig(t, work, "/bin/sh", "-c", `echo $$ > pid; i=0; while [ ! -e done ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; exit 4`)
	cfg.Rlimits = []Rlimit{{Resource: syscall.RLIMIT_AS, Cur: as, Max: as}, {Resource: 6 /* RLIMIT_NPROC */, Cur: nproc, Max: nproc}}
	cfg.Landlock = &Landlock{RW: []string{"/work"}} // taken on by the helper, and said
	limits := func(pid int) (string, string) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
		if err != nil {
			t.Errorf("reading the limits of %d: %v", pid, err)
		}
		var space, procs string
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			switch {
			case strings.HasPrefix(line, "Max address space"):
				space = f[3] + " " + f[4]
			case strings.HasPrefix(line, "Max processes"):
				procs = f[2] + " " + f[3]
			}
		}
		return space, procs
	}
	pids := make(chan int, 1)
	checked := make(chan struct{})
	go func() {
		defer close(checked)
		initPID := <-pids
		var prog int
		for deadline := time.Now().Add(20 * time.Second); prog == 0; time.Sleep(10 * time.Millisecond) {
			b, _ := os.ReadFile(filepath.Join(work, "pid"))
			fmt.Sscan(string(b), &prog)
			if time.Now().After(deadline) {
				t.Error("the program never started")
				return
			}
		}
		// The program's pid is in its namespace; its host pid is the
		// init's one child.
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", initPID, initPID))
		if err != nil || len(strings.Fields(string(b))) != 1 {
			t.Errorf("children of the init: %q, %v", b, err)
		} else {
			var child int
			fmt.Sscan(string(b), &child)
			if s, p := limits(child); s != fmt.Sprint(as, " ", as) || p != fmt.Sprint(nproc, " ", nproc) {
				t.Errorf("the program's limits: address space %q, processes %q; want %d and %d", s, p, as, nproc)
			}
		}
		if s, p := limits(initPID); s != "unlimited unlimited" || p == fmt.Sprint(nproc, " ", nproc) {
			t.Errorf("the init is bound by the program's limits: address space %q, processes %q", s, p)
		}
		os.WriteFile(filepath.Join(work, "done"), nil, 0o644)
	}()
	st := runInit(t, cfg, func(pid int) error { pids <- pid; return nil })
	<-checked
	if st.Error != "" || st.ExitCode != 4 || !strings.HasPrefix(st.Landlock, "landlock ABI") {
		t.Errorf("status %+v, want the program's exit 4 and what Landlock enforced", st)
	}

	t.Run("exec refused", func(t *testing.T) {
		os.WriteFile(filepath.Join(work, "script"), []byte("#!/no/such/interpreter\n"), 0o755)
		st := runInit(t, withRlimits(sandboxConfig(t, work, "./script"), cfg.Rlimits), nil)
		if st.Code != CodeNotFound || !strings.Contains(st.Error, "starting ./script") {
			t.Errorf("status %+v, want %s from execve", st, CodeNotFound)
		}
	})
}

func withRlimits(c *Config, ls []Rlimit) *Config { c.Rlimits = ls; return c }
