package gvisor

import (
	"context"
	"os"
	"path/filepath"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/execbox/execbox/backend/internal/hostbase"
	"github.com/execbox/execbox/internal/host/cleanup"
	"github.com/execbox/execbox/internal/host/hostview"
	"github.com/execbox/execbox/internal/host/skeleton"
	"github.com/execbox/execbox/sandbox"
)

// Sandbox is one gVisor sandbox: hostbase's directory, cgroup and work dir,
// and in that directory the bundle (config.json and the root skeleton),
// runsc's state and its logs. Every Exec starts a fresh gVisor sandbox
// (runsc run) from the bundle; the work dir and the cgroup carry over
// between them, /tmp does not.
type Sandbox struct {
	*hostbase.Sandbox
	host  *host
	view  *hostview.View
	cid   string // runsc's container id
	paths dirs
	// seccomp is the policy the sentry enforces (the host's; nil only in
	// tests that compare with no policy).
	seccomp *specs.LinuxSeccomp
	// lastLog is what the last run's log said (for tests).
	lastLog *runLog
}

// Create checks spec against the host and makes the sandbox's directory,
// cgroup, work dir (a size-limited tmpfs) and root skeleton.
func (b *Backend) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	h, spec, err := b.Admit(spec)
	if err != nil {
		return nil, err
	}
	// The host view every host-sharing backend uses, execbox's work roots
	// hidden.
	view, err := hostview.Plan(spec, hostview.Options{Hidden: b.hidden})
	if err != nil {
		return nil, err
	}
	s := &Sandbox{host: h, view: view, seccomp: h.Own.policy.oci}
	if s.Sandbox, err = b.NewSandbox(h, spec, false, s.run); err != nil {
		return nil, err
	}
	s.cid = "execbox-" + s.ID()
	s.OnClose(s.teardown)
	cu := cleanup.Make(func() { s.Close(context.Background()) })
	defer cu.Clean()
	s.paths = dirs{bundle: s.Dir, state: filepath.Join(s.Dir, "state"), logs: filepath.Join(s.Dir, "log")}
	for _, d := range []string{s.paths.state, s.paths.logs} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, sandbox.Errorf(sandbox.ErrInternal, "workdir_failed", "creating %s: %w", d, err)
		}
	}
	if err := unix.Mkfifo(s.paths.runLog(), 0o600); err != nil {
		return nil, sandbox.Errorf(sandbox.ErrInternal, "workdir_failed", "creating runsc's log FIFO: %w", err)
	}
	if err := skeleton.Build(filepath.Join(s.Dir, "rootfs"), view); err != nil {
		return nil, sandbox.Errorf(sandbox.ErrInternal, "rootfs_failed", "building the sandbox root: %w", err)
	}
	cu.Release()
	return s, nil
}

// teardown is what Close does before hostbase removes the cgroup, the work
// dir and the directory: what a run left (runsc's state, processes in the
// cgroup), then the cgroup and the leaves runsc made beside it in the
// hierarchies execbox does not use.
func (s *Sandbox) teardown() error {
	err := s.cleanup()
	if s.Cgroup != nil {
		// A failure is hostbase's to report: it closes the cgroup again.
		_ = s.Cgroup.Close()
		removeExtra(s.host.Own.hier, s.Cgroup.Name())
	}
	return err
}
