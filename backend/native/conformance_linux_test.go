package native

import (
	"errors"
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
// namespaces of their own passes. The init is root in the sandbox's user
// namespace: the program (uid 65534) cannot signal it.
func TestHostKernel(t *testing.T) {
	b := newBackend(t)
	testutil.HostKernel(t, b, testutil.HostKernelOpts{
		Feature:    Name,
		WorkRoot:   b.WorkRoot(),
		InitChecks: `try_("kill_init", lambda: libc.kill(1, 9))` + "\n",
		InitTries:  1,
	})
}

// The backend registers itself, and a backend built through the registry
// from configuration (as the engine builds it) runs Python with no flags;
// an invalid configuration is refused.
func TestRegistered(t *testing.T) {
	newBackend(t)
	r := testutil.Registered(t, Name, sandbox.Settings{WorkRoot: t.TempDir()}, sandbox.IsolationProcess)
	if _, err := r.New(sandbox.Settings{Config: &Config{RootFS: []string{"usr"}}}); !errors.Is(err, sandbox.ErrInvalid) {
		t.Fatalf("a relative native.rootfs: %v, want ErrInvalid", err)
	}
}
