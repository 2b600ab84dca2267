package bwrap

import (
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
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		testutil.SkipOrFail(t, Name, "no /proc: %v", err)
	}
	return testutil.Available(t, Name, mustBackend(t, sandbox.Settings{WorkRoot: workRoot(t)}), 30*time.Second)
}

func mustBackend(t testing.TB, s sandbox.Settings) *Backend {
	t.Helper()
	return testutil.MustNew[*Backend](t, New, s)
}
