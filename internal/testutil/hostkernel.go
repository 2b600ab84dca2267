package testutil

import (
	"testing"

	"github.com/execbox/execbox/sandbox"
)

// HostKernelOpts are the backend-specific parts of HostKernel.
type HostKernelOpts struct {
	// Feature is the backend's EXECBOX_REQUIRE name: without cgroups the
	// cgroup checks skip, or fail when it is required.
	Feature string
	// WorkRoot is the backend's work root, which no mount may expose.
	WorkRoot string
	// InitChecks is Python run after the shared privilege checks, about
	// the sandbox's PID 1: try_(name, f) lines (InitTries of them) and a
	// last line printing InitLast alone, if set.
	InitChecks string
	InitTries  int
	InitLast   string
}

// HostKernel runs the checks shared by the backends that run the program
// on the host kernel, in namespaces of its own, under execbox's cgroups
// and on a read-only view of the host (native, bwrap). The subtests:
//
//	limits/{pids,memory,both_sides/<case>,work_size_write_files,
//	        session_state,not_found,tmp_exec,concurrent_runs}
//	isolation/{host_network_invisible,privileges_dropped/{capability_sets_zero,denied_syscalls},
//	           only_std_fds,uts_and_pid,minimal_dev,artifact_symlinks}
//	mounts/{extra,validation/<case>,interpreters}
//
// (The CPU quota and the pids bound counted from the host are the
// conformance suite's, for every backend: sandboxtest limits/*.)
//
// The backend must be available; gate the test before calling it.
func HostKernel(t *testing.T, b sandbox.Backend, o HostKernelOpts) {
	cgroup := func(f func(*testing.T, sandbox.Backend)) func(*testing.T) {
		return func(t *testing.T) {
			RequireCgroups(t, o.Feature, b)
			f(t, b)
		}
	}
	plain := func(f func(*testing.T, sandbox.Backend)) func(*testing.T) {
		return func(t *testing.T) { f(t, b) }
	}
	t.Run("limits", func(t *testing.T) {
		t.Run("pids", cgroup(pidsLimit))
		t.Run("memory", cgroup(memoryLimit))
		t.Run("both_sides", plain(limitsBothSides))
		t.Run("work_size_write_files", plain(workSizeWriteFiles))
		t.Run("session_state", plain(sessionState))
		t.Run("not_found", plain(notFound))
		t.Run("tmp_exec", plain(tmpExec))
		t.Run("concurrent_runs", plain(concurrentRuns))
	})
	t.Run("isolation", func(t *testing.T) {
		t.Run("host_network_invisible", plain(hostNetworkInvisible))
		t.Run("privileges_dropped", func(t *testing.T) { privilegesDropped(t, b, o.InitChecks, o.InitTries, o.InitLast) })
		t.Run("only_std_fds", plain(OnlyStdFDs))
		t.Run("uts_and_pid", plain(utsAndPIDIsolation))
		t.Run("minimal_dev", plain(MinimalDev))
		t.Run("artifact_symlinks", plain(artifactSymlinks))
	})
	t.Run("mounts", func(t *testing.T) {
		t.Run("extra", plain(extraMounts))
		t.Run("validation", func(t *testing.T) { mountValidation(t, b, o.WorkRoot) })
		t.Run("interpreters", plain(interpreters))
	})
}
