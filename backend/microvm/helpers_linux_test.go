package microvm

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
)

// guestBin is the agent, built once for the package's tests.
var guestBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "execbox-microvm-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	guestBin = filepath.Join(dir, "execbox-guest")
	cmd := exec.Command("go", "build", "-ldflags=-s -w", "-o", guestBin, "github.com/execbox/execbox/cmd/execbox-guest")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building execbox-guest: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := testutil.RunKeepingDevNull(m)
	if shared != nil {
		shared.Close()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

var (
	sharedOnce sync.Once
	shared     *Backend
)

// newBackend returns the package's shared backend (one warm pool for all
// tests), or skips (fails under EXECBOX_REQUIRE=microvm) where it cannot
// run.
func newBackend(t testing.TB) *Backend {
	t.Helper()
	testutil.RequiresRoot(t, Name)
	testutil.RequiresBinary(t, Name, "qemu-system-x86_64")
	sharedOnce.Do(func() {
		root, err := os.MkdirTemp("", "execbox-microvm-root-")
		if err != nil {
			t.Fatal(err)
		}
		shared = built(*config(nil), sandbox.Settings{WorkRoot: root})
	})
	return testutil.Available(t, Name, shared, 5*time.Minute)
}

// config is the test configuration: the agent built above, changed by set.
func config(set func(*Config)) *Config {
	return testutil.With(DefaultConfig, func(c *Config) {
		c.Guest = guestBin
		if set != nil {
			set(c)
		}
	})
}

// run runs p in a one-shot sandbox of spec.
func run(t *testing.T, b sandbox.Backend, spec sandbox.Spec, p *sandbox.Process) *sandbox.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	res, err := sandbox.Run(ctx, b, spec, p)
	if err != nil {
		t.Fatalf("Run %q: %v", p.Args, err)
	}
	return res
}

// built is build's backend, for a test that makes one of a config of its
// own (build does not fail on Linux).
func built(c Config, s sandbox.Settings) *Backend {
	b, _ := build(c, s)
	return b.(*Backend)
}
