package bwrap

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
)

// workRoot is a fresh work root that uid 65534 can reach (t.TempDir is
// 0700 root).
func workRoot(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(dir), 0o711); err != nil {
		t.Fatal(err)
	}
	return dir
}

// newBackend returns a bwrap backend with its own work root, or skips
// (fails under EXECBOX_REQUIRE=bwrap) where it cannot run.
func newBackend(t testing.TB) *Backend {
	t.Helper()
	testutil.RequiresRoot(t, Name)
	b := mustBackend(t, sandbox.Settings{WorkRoot: workRoot(t)})
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		testutil.SkipOrFail(t, Name, "no /proc: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if h := b.Health(ctx); !h.Available {
		testutil.SkipOrFail(t, Name, "bwrap backend unavailable: %s", h.Reason)
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

func tail(s string) string {
	if len(s) > 500 {
		return "…" + s[len(s)-500:]
	}
	return s
}

// withConfig is the section's default value changed by set.
func withConfig(set func(*Config)) *Config {
	c := DefaultConfig()
	set(c)
	return c
}
