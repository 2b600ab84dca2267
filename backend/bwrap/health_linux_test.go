package bwrap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
)

// The test binary doubles as a child that reports a backend's Health
// under conditions the test process itself must not be put in.
const (
	childEnv     = "EXECBOX_BWRAP_TEST_CHILD"
	childRootEnv = "EXECBOX_BWRAP_TEST_ROOT"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(childMain(mode))
	}
	os.Exit(m.Run())
}

// childMain prints the Health of a fresh backend as JSON. In mode
// "no-userns" it first installs a seccomp filter (on all its threads,
// inherited by bwrap) that denies creating user namespaces, as container
// runtimes' default profiles do.
func childMain(mode string) int {
	if mode == "no-userns" {
		if err := denyUserNamespaces(); err != nil {
			fmt.Fprintln(os.Stderr, "installing the filter:", err)
			return 2
		}
	}
	b, err := New(sandbox.Settings{WorkRoot: os.Getenv(childRootEnv)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer b.(sandbox.Closer).Close() // its base and device nodes go
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	json.NewEncoder(os.Stdout).Encode(b.Health(ctx))
	return 0
}

// denyUserNamespaces makes clone and unshare with CLONE_NEWUSER fail with
// EPERM, and clone3 (whose flags BPF cannot read) with ENOSYS.
func denyUserNamespaces() error {
	arch := map[string]uint32{"amd64": unix.AUDIT_ARCH_X86_64, "arm64": unix.AUDIT_ARCH_AARCH64}[runtime.GOARCH]
	if arch == 0 {
		return fmt.Errorf("no audit arch for %s", runtime.GOARCH)
	}
	const (
		ld   = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jset = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
		ret  = unix.BPF_RET | unix.BPF_K
	)
	prog := []unix.SockFilter{
		{Code: ld, K: 4},                                             // 0: arch
		{Code: jeq, K: arch, Jt: 0, Jf: 6},                           // 1: other arch → allow
		{Code: ld, K: 0},                                             // 2: nr
		{Code: jeq, K: unix.SYS_CLONE3, Jt: 6, Jf: 0},                // 3: clone3 → ENOSYS
		{Code: jeq, K: unix.SYS_UNSHARE, Jt: 1, Jf: 0},               // 4: unshare → check
		{Code: jeq, K: unix.SYS_CLONE, Jt: 0, Jf: 2},                 // 5: clone → check, else allow
		{Code: ld, K: 16},                                            // 6: flags (args[0], low half)
		{Code: jset, K: unix.CLONE_NEWUSER, Jt: 1, Jf: 0},            // 7
		{Code: ret, K: unix.SECCOMP_RET_ALLOW},                       // 8
		{Code: ret, K: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},  // 9
		{Code: ret, K: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)}, // 10
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	if errno != 0 {
		return errno
	}
	return nil
}

// childHealth runs the test binary in mode and decodes the Health it
// reports.
func childHealth(t *testing.T, mode string) sandbox.Health {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode, childRootEnv+"="+workRoot(t))
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("child %s: %v: %s", mode, err, ee.Stderr)
		}
		t.Fatal(err)
	}
	var h sandbox.Health
	if err := json.Unmarshal(out, &h); err != nil {
		t.Fatalf("child %s printed %q: %v", mode, out, err)
	}
	return h
}

// Seed 001's bug: bwrap installed but unable to create namespaces (in a
// container, or with unprivileged user namespaces forbidden) must be
// "unavailable" with the reason, not "available" because the binary is
// there. Made real: the probe runs under a seccomp filter that denies
// user namespaces. The same child without the filter is available, so
// the check can fail.
func TestHealthUnavailableWithoutNamespaces(t *testing.T) {
	newBackend(t)
	if h := childHealth(t, "plain"); !h.Available {
		t.Fatalf("control: the child without the filter is unavailable: %s", h.Reason)
	}
	h := childHealth(t, "no-userns")
	if h.Available || h.Ready {
		t.Fatalf("bwrap without user namespaces reported available: %+v", h)
	}
	if !strings.Contains(h.Reason, "namespace") || !strings.Contains(h.Reason, "bwrap") {
		t.Fatalf("the reason does not name the namespace failure: %q", h.Reason)
	}
	t.Logf("reason: %s", h.Reason)
}

// Health is cached for healthTTL, and probed again after it.
func TestHealthCached(t *testing.T) {
	b := newBackend(t)
	h1 := b.Health(t.Context())
	h2 := b.Health(t.Context())
	if !h1.CheckedAt.Equal(h2.CheckedAt) {
		t.Fatalf("a second Health within the TTL probed again: %v, %v", h1.CheckedAt, h2.CheckedAt)
	}
	b.Expire()
	if h3 := b.Health(t.Context()); !h3.CheckedAt.After(h1.CheckedAt) || !h3.Available {
		t.Fatalf("after the TTL: %+v (first probe at %v)", h3, h1.CheckedAt)
	}
}

// A missing binary and an unreachable work root are unavailable, with
// the reason, and Create refuses with ErrUnavailable.
func TestHealthUnavailable(t *testing.T) {
	newBackend(t)
	private := filepath.Join(t.TempDir(), "private")
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		s    sandbox.Settings
		want string
	}{
		{"missing_binary", sandbox.Settings{WorkRoot: workRoot(t), Config: testutil.With(DefaultConfig, func(c *Config) { c.Path = "/nonexistent/bwrap" })}, "bwrap.path"},
		// bwrap, as uid 65534, cannot pass a 0700 root directory.
		{"work_root_unreachable", sandbox.Settings{WorkRoot: filepath.Join(private, "w")}, "not reachable by uid 65534"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := mustBackend(t, c.s)
			h := b.Health(t.Context())
			if h.Available || !strings.Contains(h.Reason, c.want) {
				t.Fatalf("Health: %+v, want unavailable naming %q", h, c.want)
			}
			_, err := b.Create(t.Context(), sandbox.Spec{})
			if !errors.Is(err, sandbox.ErrUnavailable) {
				t.Fatalf("Create: %v, want ErrUnavailable", err)
			}
		})
	}
}

// TestVersionAskedOnce: `bwrap --version` is asked once per binary and
// kept in the state dir (internal/host/binfacts), so that the next process —
// a CLI call that `auto` probes bwrap in — does not start bwrap to ask.
func TestVersionAskedOnce(t *testing.T) {
	testutil.RequiresRoot(t, Name)
	real := testutil.RequiresBinary(t, Name, "bwrap")
	dir := t.TempDir()
	log := filepath.Join(dir, "asked")
	fake := filepath.Join(dir, "bwrap")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\n[ \"$1\" = --version ] && echo asked >>"+log+"\nexec "+real+" \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	for i := range 2 {
		b := mustBackend(t, sandbox.Settings{WorkRoot: workRoot(t), StateDir: state,
			Config: testutil.With(DefaultConfig, func(c *Config) { c.Path = fake })})
		if h := b.Host(); h.Err != nil || !strings.HasPrefix(h.Own.version, "bubblewrap ") {
			t.Fatalf("probe %d: %v, version %q", i, h.Err, h.Own.version)
		}
	}
	if data, _ := os.ReadFile(log); strings.Count(string(data), "asked") != 1 {
		t.Fatalf("two probes asked bwrap --version %d times, want 1", strings.Count(string(data), "asked"))
	}
}
