package gvisor

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// required reports whether EXECBOX_REQUIRE names the gvisor backend: a
// missing prerequisite then fails the test instead of skipping it.
func required() bool {
	return slices.Contains(strings.Split(os.Getenv("EXECBOX_REQUIRE"), ","), Name)
}

// skipOrFail skips the test, or fails it when gvisor is required.
func skipOrFail(t testing.TB, format string, args ...any) {
	t.Helper()
	if required() {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// newBackend returns a gvisor backend with its own work root, or skips
// (fails under EXECBOX_REQUIRE=gvisor) where it cannot run: not root, no
// runsc, or runsc cannot start a sandbox.
func newBackend(t testing.TB) *Backend {
	t.Helper()
	if os.Geteuid() != 0 {
		skipOrFail(t, "gvisor backend tests run as root (euid %d)", os.Geteuid())
	}
	if _, err := exec.LookPath("runsc"); err != nil {
		skipOrFail(t, "runsc is not installed: %v", err)
	}
	b := mustBackend(t, sandbox.Settings{WorkRoot: t.TempDir()})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if h := b.Health(ctx); !h.Available {
		skipOrFail(t, "gvisor backend unavailable: %s", h.Reason)
	}
	return b
}

func mustBackend(t testing.TB, s sandbox.Settings) *Backend {
	t.Helper()
	sb, err := New(s)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return sb.(*Backend)
}

// run is a one-shot run that fails the test on an error.
func run(t testing.TB, b *Backend, spec sandbox.Spec, args ...string) *sandbox.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := sandbox.Run(ctx, b, spec, &sandbox.Process{Args: args})
	if err != nil {
		t.Fatalf("Run %q: %v", args, err)
	}
	return res
}

// sh runs a shell script in a fresh sandbox.
func sh(t testing.TB, b *Backend, spec sandbox.Spec, script string) *sandbox.Result {
	t.Helper()
	return run(t, b, spec, "/bin/sh", "-c", script)
}

// py runs a Python program in a fresh sandbox.
func py(t testing.TB, b *Backend, spec sandbox.Spec, code string) *sandbox.Result {
	t.Helper()
	return run(t, b, spec, "/usr/bin/python3", "-I", "-c", code)
}

// create makes a sandbox that is closed when the test ends.
func create(t testing.TB, b *Backend, spec sandbox.Spec) sandbox.Sandbox {
	t.Helper()
	sb, err := b.Create(context.Background(), spec)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() {
		if err := sb.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return sb
}

// exec1 runs args in sb, failing the test on an error.
func exec1(t testing.TB, sb sandbox.Sandbox, args ...string) *sandbox.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := sb.Exec(ctx, &sandbox.Process{Args: args})
	if err != nil {
		t.Fatalf("Exec %q: %v", args, err)
	}
	return res
}

func wantOK(t testing.TB, res *sandbox.Result) {
	t.Helper()
	if !res.Succeeded() {
		t.Fatalf("program failed: reason=%s exit=%d signal=%s message=%q stdout=%q stderr=%q",
			res.Reason, res.ExitCode, res.Signal, res.Message, res.Stdout, res.Stderr)
	}
}
