package native

import (
	"context"
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
	b := mustBackend(t, sandbox.Settings{WorkRoot: t.TempDir()})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if h := b.Health(ctx); !h.Available {
		testutil.SkipOrFail(t, Name, "native backend unavailable: %s", h.Reason)
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

func mountTmpfs(dir string) error {
	return unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m")
}

// withConfig is the section's default value changed by set.
func withConfig(set func(*Config)) *Config {
	c := DefaultConfig()
	set(c)
	return c
}
