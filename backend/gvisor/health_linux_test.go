package gvisor

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
	"golang.org/x/sys/unix"
)

// Health really starts a sandbox, names runsc and its platform, and is
// cached for healthTTL; a stale answer is probed again. It is ready only
// where the smoke checks pass: with a runsc that lacks statx as coreutils
// calls it (2022's), `ls -la` fails, and the reason says so.
func TestHealth(t *testing.T) {
	b := newBackend(t)
	h := b.Health(t.Context())
	if !h.Available || !strings.Contains(h.Reason, "started /bin/true") {
		t.Fatalf("health %+v", h)
	}
	stat := testutil.Run(t, b, sandbox.Spec{}, "/usr/bin/stat", "/")
	if statx := stat.Succeeded(); h.Ready != statx || !statx && !strings.Contains(h.Reason, "smoke check list_dir failed") {
		t.Fatalf("stat / in a sandbox: %s %q; health %+v", stat.Reason, stat.Stderr, h)
	}
	for _, k := range []string{"runsc", "platform", "cgroups", "seccomp"} {
		if h.Details[k] == "" {
			t.Errorf("health details lack %q: %v", k, h.Details)
		}
	}
	if p := b.Host().Own.runsc.platform; !strings.HasPrefix(h.Details["platform"], p) || (p != "ptrace" && p != "systrap") {
		t.Errorf("platform %q, details %q", p, h.Details["platform"])
	}
	t.Logf("health: %s; platform %s; runsc %s", h.Reason, h.Details["platform"], h.Details["runsc"])
	if again := b.Health(t.Context()); !again.CheckedAt.Equal(h.CheckedAt) {
		t.Errorf("a second Health within the TTL probed again (%v, %v)", h.CheckedAt, again.CheckedAt)
	}
	b.Expire()
	if fresh := b.Health(t.Context()); !fresh.CheckedAt.After(h.CheckedAt) || !fresh.Available {
		t.Errorf("a stale health answer was not probed again: %+v", fresh)
	}
	caps := b.Capabilities()
	if caps.Isolation != sandbox.IsolationKernel || !caps.Sessions || caps.Limits["memory"] == "" || caps.Limits["cpu_time"] == "" {
		t.Errorf("capabilities %+v", caps)
	}
}

// rootOnly skips unless root: the probes below need a cgroup and mounts.
func rootOnly(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		testutil.SkipOrFail(t, Name, "gvisor backend tests run as root (euid %d)", os.Geteuid())
	}
}

// Debian 12's runsc (2022) starts sandboxes but fails statx as coreutils
// calls it: the backend is available, not ready, and the smoke check that
// failed is the reason.
func TestHealthOldRunscNotReady(t *testing.T) {
	newBackend(t)
	const old = "/usr/bin/runsc"
	out, err := exec.Command(old, "--version").Output()
	if err != nil || !strings.Contains(string(out), "20221219") {
		testutil.SkipOrFail(t, "runsc-debian", "%s is not Debian 12's runsc 20221219 (%v): nothing to show", old, err)
	}
	b := mustBackend(t, sandbox.Settings{WorkRoot: t.TempDir(), Config: testutil.With(DefaultConfig, func(c *Config) { c.Runsc = old })})
	t.Cleanup(func() { b.Close() })
	h := b.Health(t.Context())
	if !h.Available || h.Ready || !strings.HasPrefix(h.Reason, "not ready: smoke check list_dir failed") {
		t.Fatalf("health under runsc 20221219: %+v", h)
	}
}

// A runsc that is not there makes the backend unavailable with the reason,
// and Create refuses with ErrUnavailable.
func TestHealthRunscMissing(t *testing.T) {
	rootOnly(t)
	missing := filepath.Join(t.TempDir(), "no-runsc")
	b := mustBackend(t, sandbox.Settings{WorkRoot: t.TempDir(), Config: testutil.With(DefaultConfig, func(c *Config) { c.Runsc = missing })})
	h := b.Health(t.Context())
	if h.Available || h.Ready || !strings.Contains(h.Reason, "finding runsc") || !strings.Contains(h.Reason, missing) {
		t.Fatalf("health with a missing runsc: %+v", h)
	}
	if _, err := b.Create(t.Context(), sandbox.Spec{}); !errors.Is(err, sandbox.ErrUnavailable) {
		t.Fatalf("Create with a missing runsc: %v, want ErrUnavailable", err)
	}
}

// A runsc that is installed but cannot start a sandbox is unavailable with
// what it said: health is found by starting something, not by finding a
// binary.
func TestHealthRunscFails(t *testing.T) {
	rootOnly(t)
	fake := filepath.Join(t.TempDir(), "runsc")
	// It answers every question about itself (as runsc 2022 does), then
	// fails to run anything.
	numbers := syscallNames(t)
	table := "OS,Arch,Num,Name,Support,Note\n"
	for n, nr := range numbers {
		table += fmt.Sprintf("linux,amd64,%d,%s,Full Support,\n", nr, n)
	}
	script := `#!/bin/sh
case "$1" in
--version) echo "runsc version fake-1"; exit 0;;
flags) for f in ` + strings.Join(requiredFlags, " ") + `; do printf '  -%s\n' "$f"; done >&2; exit 0;;
help) if [ "$2" = syscalls ]; then printf '` + table + `'; else echo ptrace; fi; exit 0;;
esac
echo "fake runsc cannot start sandboxes" >&2
exit 1
`
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	b := mustBackend(t, sandbox.Settings{WorkRoot: t.TempDir(), Config: testutil.With(DefaultConfig, func(c *Config) { c.Runsc = fake })})
	h := b.Health(t.Context())
	if h.Available || !strings.Contains(h.Reason, "fake runsc cannot start sandboxes") {
		t.Fatalf("health with a failing runsc: %+v", h)
	}
	if !strings.Contains(h.Details["runsc"], "fake-1") {
		t.Errorf("details do not name the runsc found: %v", h.Details)
	}
	t.Logf("reason: %s", h.Reason)
	// Its failed runs leave nothing behind.
	ents, err := os.ReadDir(b.Host().Base)
	if err != nil || len(ents) != 0 {
		t.Errorf("the failed probe left %v (%v)", ents, err)
	}
}

// The platform choice: systrap, else ptrace; never kvm on its own.
func TestPickPlatform(t *testing.T) {
	for _, c := range []struct {
		offered []string
		want    string
	}{
		{[]string{"kvm", "ptrace"}, "ptrace"},
		{[]string{"kvm", "ptrace", "systrap"}, "systrap"},
		{[]string{"kvm"}, ""},
		{nil, ""},
	} {
		if got := pickPlatform(c.offered); got != c.want {
			t.Errorf("pickPlatform(%v) = %q, want %q", c.offered, got, c.want)
		}
	}
}

// A runsc installed after the backend found none is picked up without a
// restart, once the cached answer is stale.
func TestHealthRunscAppearsLater(t *testing.T) {
	b := newBackend(t) // runsc works here
	real := b.Host().Own.runsc.path
	later := filepath.Join(t.TempDir(), "runsc")
	nb := mustBackend(t, sandbox.Settings{WorkRoot: t.TempDir(), Config: testutil.With(DefaultConfig, func(c *Config) { c.Runsc = later })})
	if h := nb.Health(t.Context()); h.Available {
		t.Fatalf("available without runsc: %+v", h)
	}
	if err := os.Symlink(real, later); err != nil {
		t.Fatal(err)
	}
	if h := nb.Health(t.Context()); h.Available {
		t.Fatalf("a fresh answer within the TTL: %+v", h)
	}
	nb.Expire()
	if h := nb.Health(t.Context()); !h.Available {
		t.Fatalf("runsc installed later was not picked up: %+v", h)
	}
	t.Cleanup(func() { nb.Close() })
}

// The flags `runsc flags` lists, in the layout of the 2022 release and of
// today's.
func TestParseFlags(t *testing.T) {
	out := "  -TESTONLY-unsafe-nonroot\n    \tTEST ONLY; do not ever use!\n  -debug-command string\n    \tcomma-separated list\n" +
		"  -gofer-network-namespace value\n    \tnetwork namespace for gofers (default null)\n  -oci-seccomp\n    \tEnables loading OCI seccomp filters.\n"
	got := parseFlags([]byte(out))
	for _, f := range []string{"TESTONLY-unsafe-nonroot", "debug-command", "gofer-network-namespace", "oci-seccomp"} {
		if !got[f] {
			t.Errorf("flag %s not found in %v", f, got)
		}
	}
	if len(got) != 4 {
		t.Errorf("flags %v", got)
	}
}

// TestNoexecWorkRoot: a work root on a mount with noexec (Debian mounts
// /run so; a container's --tmpfs too) still runs sandboxes: runsc's
// read-only remount of the root is refused where the flags below it are
// locked with noexec, so the skeleton is a tmpfs of its own.
func TestNoexecWorkRoot(t *testing.T) {
	rootOnly(t)
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOEXEC|unix.MS_NOSUID|unix.MS_NODEV, "size=64m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	b := testutil.Available(t, Name, mustBackend(t, sandbox.Settings{WorkRoot: filepath.Join(dir, "w")}), 60*time.Second)
	res := testutil.Run(t, b, sandbox.Spec{}, "sh", "-c", "ls / >/dev/null && echo ok")
	if res.Stdout != "ok\n" {
		t.Fatalf("on a noexec work root: %+v", res)
	}
	if c, ok := sandbox.Backend(b).(sandbox.Closer); ok {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if out, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(out), dir+"/") {
		t.Errorf("mounts left below the work root:\n%s", out)
	}
}
