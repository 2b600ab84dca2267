package gvisor

import (
	"os"
	"testing"
	"time"

	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
)

// TestMain fails the package when a runsc it started was handed the host's
// /dev/null (runsc chowns its stdio files to the sandbox's user).
func TestMain(m *testing.M) {
	os.Exit(testutil.RunKeepingDevNull(m))
}

// newBackend returns a gvisor backend with its own work root, or skips
// (fails under EXECBOX_REQUIRE=gvisor) where it cannot run: not root, no
// runsc, or runsc cannot start a sandbox.
func newBackend(t testing.TB) *Backend {
	t.Helper()
	testutil.RequiresRoot(t, Name)
	testutil.RequiresBinary(t, Name, "runsc")
	return testutil.Available(t, Name, mustBackend(t, sandbox.Settings{WorkRoot: t.TempDir()}), 60*time.Second)
}

func mustBackend(t testing.TB, s sandbox.Settings) *Backend {
	t.Helper()
	return testutil.MustNew[*Backend](t, New, s)
}
