package native

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
)

// newBackend returns a root native backend with its own work root, or
// skips (fails under EXECBOX_REQUIRE=native) where it cannot run.
func newBackend(t testing.TB) *Backend {
	t.Helper()
	testutil.RequiresRoot(t, Name)
	return testutil.Available(t, Name, mustBackend(t, sandbox.Settings{WorkRoot: t.TempDir()}), 30*time.Second)
}

func mustBackend(t testing.TB, s sandbox.Settings) *Backend {
	t.Helper()
	return testutil.MustNew[*Backend](t, New, s)
}

func mountTmpfs(dir string) error {
	return unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m")
}
