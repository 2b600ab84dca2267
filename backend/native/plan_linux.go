package native

import (
	"github.com/execbox/execbox/internal/hostview"
	"github.com/execbox/execbox/internal/nsinit"
	"github.com/execbox/execbox/sandbox"
)

// DefaultRootFS is the root every sandbox gets unless native.rootfs or
// Policy.RootFS says otherwise (see hostview.DefaultRootFS).
var DefaultRootFS = hostview.DefaultRootFS

const (
	hostname = hostview.Hostname
	workDir  = hostview.WorkDir
)

// plan is the part of every init config fixed at Create: the host view
// from internal/hostview in the init's terms.
type plan struct {
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
func (b *Backend) plan(spec sandbox.Spec, e *hostEnv) (*plan, error) {
	v, err := hostview.Plan(spec, hostview.Options{RootFS: b.cfg.RootFS, Hidden: []string{b.workRoot}, TmpExec: b.cfg.TmpExec})
	if err != nil {
		return nil, err
	}
	pl := &plan{rw: v.Writable, exec: v.Exec, devices: v.Devices}
	for _, bd := range v.Binds {
		pl.binds = append(pl.binds, initBind(bd))
	}
	for _, m := range v.Mounts {
		pl.mounts = append(pl.mounts, initBind(m))
	}
	for _, l := range v.Symlinks {
		pl.symlinks = append(pl.symlinks, nsinit.Symlink{Path: l.Path, Target: l.Target})
	}
	for _, l := range v.DevLinks {
		pl.devLinks = append(pl.devLinks, nsinit.Symlink{Path: l.Path, Target: l.Target})
	}
	for _, f := range v.Files {
		pl.files = append(pl.files, nsinit.File{Path: f.Path, Data: f.Data, Mode: f.Mode})
	}
	return pl, nil
}

func initBind(b hostview.Bind) nsinit.Bind {
	return nsinit.Bind{Source: b.Source, Target: b.Target, Writable: b.Writable, Exec: b.Exec}
}

// expandDefault resolves the globs of DefaultRootFS.
func expandDefault() []string { return hostview.ExpandDefault() }
