package gvisor

import (
	"context"
	"testing"
	"time"

	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
)

// newBackend returns a gvisor backend with its own work root, or skips
// (fails under EXECBOX_REQUIRE=gvisor) where it cannot run: not root, no
// runsc, or runsc cannot start a sandbox.
func newBackend(t testing.TB) *Backend {
	t.Helper()
	testutil.RequiresRoot(t, Name)
	testutil.RequiresBinary(t, Name, "runsc")
	b := mustBackend(t, sandbox.Settings{WorkRoot: t.TempDir()})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if h := b.Health(ctx); !h.Available {
		testutil.SkipOrFail(t, Name, "gvisor backend unavailable: %s", h.Reason)
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

// withConfig is the section's default value changed by set.
func withConfig(set func(*Config)) *Config {
	c := DefaultConfig()
	set(c)
	return c
}
