package bwrap

import (
	"testing"

	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/internal/testutil/rootimage"
	"github.com/execbox/execbox/sandbox"
	"github.com/execbox/execbox/sandbox/sandboxtest"
)

func TestConformance(t *testing.T) {
	b := newBackend(t)
	sandboxtest.Run(t, b, sandboxtest.WithWorkRoot(b.WorkRoot()), sandboxtest.WithRootImage(rootimage.Host(t)))
}

// The checks every backend that runs programs on the host kernel in
// namespaces of their own passes. The init runs as the program's user
// (bwrap maps only 65534): the program may signal it, and the init
// survives every signal.
func TestHostKernel(t *testing.T) {
	b := newBackend(t)
	testutil.HostKernel(t, b, testutil.HostKernelOpts{
		Feature:  Name,
		WorkRoot: b.WorkRoot(),
		InitChecks: `try_("ptrace_init", lambda: libc.ptrace(16, 1, 0, 0))
# PID 1 is the init; signals from inside its namespace cannot end it.
for s in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGABRT, signal.SIGSEGV, signal.SIGSYS, signal.SIGUSR1, signal.SIGPIPE):
    os.kill(1, s)
import time; time.sleep(0.2)
print("survived")
`,
		InitTries: 1,
		InitLast:  "survived",
	})
}

// Seed 004's four checks: uid 65534, read-only root, no network, host
// secrets invisible.
func TestSeed004Checks(t *testing.T) {
	b := newBackend(t)
	testutil.Seed004(t, b, testutil.Seed004Opts{
		WorkDir:     func(sb sandbox.Sandbox) string { return sb.(*Sandbox).Work.Path },
		WritePaths:  []string{"/x", "/etc/x", "/usr/x", "/bin/x", "/dev/x", "/proc/x", "/etc/passwd"},
		AppendPaths: []string{"/usr/bin/true", "/etc/passwd"},
		MoreWrites:  `chmod 777 / 2>/dev/null && echo "chmod /"`,
		SecretEnv:   "EXECBOX_BWRAP_SECRET",
		ProcFiles:   []string{"/proc/self/environ", "/proc/1/environ", "/proc/1/cmdline"},
		InitRoot:    true,
	})
}

// The backend registers itself, and a backend built through the registry
// from configuration (as the engine builds it) runs Python with no flags.
func TestRegistered(t *testing.T) {
	newBackend(t)
	testutil.Registered(t, Name, sandbox.Settings{WorkRoot: workRoot(t), Config: &Config{Path: "/usr/bin/bwrap"}}, sandbox.IsolationProcess)
}
