package gvisor

import (
	"strings"
	"testing"

	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/internal/testutil/rootimage"
	"github.com/execbox/execbox/sandbox"
	"github.com/execbox/execbox/sandbox/sandboxtest"
)

// leakRuns is how many one-shot runs the suite's leak check makes: each
// starts and tears down a whole gVisor sandbox.
const leakRuns = 50

func TestConformance(t *testing.T) {
	b := newBackend(t)
	var old []sandboxtest.Option
	if strings.Contains(b.Host().Own.runsc.version, "20221219") {
		// The fallback where a current runsc cannot be built: a gap of
		// that release, which its health reports (not ready).
		old = append(old, sandboxtest.Skip("under runsc 0.0~20221219, statx as coreutils' ls and stat call it fails with EINVAL",
			"fs/ls_la", "fs/stat"))
	}
	sandboxtest.Run(t, b, append([]sandboxtest.Option{
		sandboxtest.WithWorkRoot(b.WorkRoot(), b.Host().Base),
		sandboxtest.WithLeakRuns(leakRuns),
		sandboxtest.WithRootImage(rootimage.Host(t)),
		sandboxtest.Skip("gVisor keeps a FIFO made inside the sandbox in the sentry's memory, never on the host, "+
			"so the artifact collector cannot see it to list it (TestFIFOStaysInside shows nothing blocks or leaks)",
			"symlink_artifacts/special_files"),
	}, old...)...,
	)
}

// The backend registers itself, and a backend built through the registry
// from configuration (as the engine builds it) runs Python with no flags.
func TestRegistered(t *testing.T) {
	newBackend(t)
	testutil.Registered(t, Name, sandbox.Settings{WorkRoot: t.TempDir()}, sandbox.IsolationKernel)
}
