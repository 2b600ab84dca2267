package gvisor

import (
	"testing"

	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
	"github.com/execbox/execbox/sandbox/sandboxtest"
)

// leakRuns is how many one-shot runs the suite's leak check makes: each
// starts and tears down a whole gVisor sandbox.
const leakRuns = 50

func TestConformance(t *testing.T) {
	b := newBackend(t)
	sandboxtest.Run(t, b,
		sandboxtest.WithWorkRoot(b.WorkRoot(), b.Host().Base),
		sandboxtest.WithLeakRuns(leakRuns),
		sandboxtest.Skip("gVisor keeps a FIFO made inside the sandbox in the sentry's memory, never on the host, "+
			"so the artifact collector cannot see it to list it (TestFIFOStaysInside shows nothing blocks or leaks)",
			"symlink_artifacts/special_files"),
		// Issue 11's checks that gVisor does not pass yet; its engineers
		// remove these skips as they fix them.
		sandboxtest.Skip("a program that is not found or cannot be executed is an ErrInvalid error here, "+
			"not the contract's Result with exit code 127/126 (issue 11)",
			"exit/not_found_127", "exit/not_found_path_127", "exit/not_executable_126", "exit/directory_126"),
		sandboxtest.Skip("under runsc 0.0~20221219 with execbox's OCI seccomp profile, pselect6 (Python's select.select) "+
			"fails with EPERM (issue 11)",
			"syscalls/allowed/select", "syscalls/allowed/pselect6", "io/select_poll_pipe"),
		sandboxtest.Skip("under runsc 0.0~20221219, statx as coreutils' ls and stat call it fails with EINVAL (issue 11)",
			"fs/ls_la", "fs/stat"),
	)
}

// The backend registers itself, and a backend built through the registry
// from configuration (as the engine builds it) runs Python with no flags.
func TestRegistered(t *testing.T) {
	newBackend(t)
	testutil.Registered(t, Name, sandbox.Settings{WorkRoot: t.TempDir()}, sandbox.IsolationKernel)
}
