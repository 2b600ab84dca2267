package native

import (
	"context"

	"github.com/execbox/execbox/backend/internal/hostbase"
	"github.com/execbox/execbox/internal/host/hostview"
	"github.com/execbox/execbox/internal/host/nsinit"
	"github.com/execbox/execbox/sandbox"
)

// DefaultRootFS is the root every sandbox gets unless native.rootfs or
// Policy.RootFS says otherwise (see hostview.DefaultRootFS).
var DefaultRootFS = hostview.DefaultRootFS

// Sandbox is one native sandbox: hostbase's cgroup and work dir, and the
// plan of its file system. Every Exec starts a fresh init in fresh
// namespaces; the work dir (and the cgroup's limits) carry over between
// them, /tmp does not.
type Sandbox struct {
	*hostbase.Sandbox
	host *host
	plan *plan
}

// Create checks spec against the host and makes the sandbox's cgroup and
// work dir (a size-limited tmpfs as root).
func (b *Backend) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	h, spec, err := b.Admit(spec)
	if err != nil {
		return nil, err
	}
	pl, err := b.plan(spec)
	if err != nil {
		return nil, err
	}
	s := &Sandbox{host: h, plan: pl}
	// exec rights on /work are the init's bind mount's to give.
	if s.Sandbox, err = b.NewSandbox(h, spec, false, s.run); err != nil {
		return nil, err
	}
	return s, nil
}

// plan is the part of every init config fixed at Create: the host view
// from internal/host/hostview in the init's terms.
type plan struct {
	image    string // an unpacked image as the root (hostview.View.Image)
	binds    []nsinit.Bind
	symlinks []nsinit.Symlink
	files    []nsinit.File
	devices  []string         // host /dev nodes
	devLinks []nsinit.Symlink // symlinks in /dev
	mounts   []nsinit.Bind    // the caller's extra mounts
	rw       []string         // Landlock: writable paths
	exec     bool             // /tmp and /work without noexec
}

// plan checks the rootfs list and extra mounts against the host.
func (b *Backend) plan(spec sandbox.Spec) (*plan, error) {
	v, err := hostview.Plan(spec, hostview.Options{RootFS: b.cfg.RootFS, Hidden: []string{b.WorkRoot()}, TmpExec: b.cfg.TmpExec})
	if err != nil {
		return nil, err
	}
	pl := &plan{image: v.Image, rw: v.Writable, exec: v.Exec, devices: v.Devices}
	for _, bd := range v.Binds {
		pl.binds = append(pl.binds, initBind(bd))
	}
	for _, m := range v.Mounts {
		pl.mounts = append(pl.mounts, initBind(m))
	}
	pl.symlinks = initLinks(v.Symlinks)
	pl.devLinks = initLinks(v.DevLinks)
	for _, f := range v.Files {
		pl.files = append(pl.files, nsinit.File{Path: f.Path, Data: f.Data, Mode: f.Mode})
	}
	return pl, nil
}

func initBind(b hostview.Bind) nsinit.Bind {
	return nsinit.Bind{Source: b.Source, Target: b.Target, Writable: b.Writable, Exec: b.Exec}
}

func initLinks(ls []hostview.Symlink) []nsinit.Symlink {
	var out []nsinit.Symlink
	for _, l := range ls {
		out = append(out, nsinit.Symlink{Path: l.Path, Target: l.Target})
	}
	return out
}

// expandDefault resolves the globs of DefaultRootFS.
func expandDefault() []string { return hostview.ExpandDefault() }
