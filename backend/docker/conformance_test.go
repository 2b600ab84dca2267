package docker

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/execbox/execbox/sandbox"
	"github.com/execbox/execbox/sandbox/sandboxtest"
)

// TestConformance runs the suite on one-shot containers: one hardened
// container per sandbox.
func TestConformance(t *testing.T) {
	b := newBackend(t, Config{})
	sandboxtest.Run(t, b, sandboxtest.WithLeakRuns(20))
	if left := execboxContainers(t, b, b.instance); len(left) > 0 {
		t.Errorf("containers left after the suite: %v", left)
	}
}

// TestConformancePool runs the suite on one-shot containers started ahead
// (docker.pool_size 2): each sandbox takes one that has run nothing yet.
func TestConformancePool(t *testing.T) {
	b := newBackend(t, Config{PoolSize: 2})
	// The pool keeps up to maxWarmProfiles × PoolSize started containers,
	// each with its attach connection and reader: held, not leaked.
	sandboxtest.Run(t, b, sandboxtest.WithLeakRuns(20), sandboxtest.WithLeakHeld(2*maxWarmProfiles*2))
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if left := execboxContainers(t, b, b.instance); len(left) > 0 {
		t.Errorf("containers left after Backend.Close: %v", left)
	}
}

// TestConformanceReused runs the suite on reused containers: every sandbox
// of the scope runs in one long-lived container, wiped in between.
func TestConformanceReused(t *testing.T) {
	b := newBackend(t, Config{ReuseContainer: true})
	sandboxtest.Run(t, b, sandboxtest.WithLeakRuns(20),
		sandboxtest.WithSpec(func(s *sandbox.Spec) { s.Scope = "conformance" }))
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if left := execboxContainers(t, b, b.instance); len(left) > 0 {
		t.Errorf("containers left after Backend.Close: %v", left)
	}
}

// TestConformanceRunsc runs the suite with gVisor as the engine's runtime
// (docker.runtime: runsc): isolation "kernel". It is opt-in
// (EXECBOX_REQUIRE=docker-runsc): the runsc of this Debian host (release
// 20221219) loses its sandbox on exec now and then, so the run would test
// gVisor's bugs rather than this backend.
func TestConformanceRunsc(t *testing.T) {
	if !slices.Contains(strings.Split(os.Getenv("EXECBOX_REQUIRE"), ","), "docker-runsc") {
		t.Skip("opt-in: set EXECBOX_REQUIRE=docker-runsc with an engine that has the runtime runsc")
	}
	b := newRunscBackend(t)
	sandboxtest.Run(t, b, sandboxtest.WithLeakRuns(20))
}
