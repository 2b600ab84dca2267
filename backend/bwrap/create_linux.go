package bwrap

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/execbox/execbox/backend/internal/hostbase"
	"github.com/execbox/execbox/internal/host/cleanup"
	"github.com/execbox/execbox/internal/host/hostview"
	"github.com/execbox/execbox/internal/host/skeleton"
	"github.com/execbox/execbox/sandbox"
)

// Sandbox is one bwrap sandbox: hostbase's directory, cgroup and work dir
// (a tmpfs), the mount point of each Exec's /tmp and host binds of its
// extra mounts in that directory, and the bwrap arguments fixed at Create.
// Every Exec runs a fresh bwrap; the work dir and the cgroup carry over,
// /tmp does not.
type Sandbox struct {
	*hostbase.Sandbox
	host   *host
	view   *hostview.View
	tmpDir string   // where each Exec's /tmp tmpfs is mounted
	root   string   // an image's root skeleton (skeleton.Build), bound as bwrap's /
	args   []string // bwrap's arguments, fd numbers included
}

// Create checks spec against the host and makes the sandbox's cgroup,
// work dir tmpfs and host binds.
func (b *Backend) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	h, spec, err := b.Admit(spec)
	if err != nil {
		return nil, err
	}
	view, err := hostview.Plan(spec, hostview.Options{Hidden: []string{b.WorkRoot()}})
	if err != nil {
		return nil, err
	}
	// The work dir tmpfs is noexec unless tmp_exec: a bind keeps its
	// source's flags, and in bwrap's user namespace they are locked.
	s := &Sandbox{host: h, view: view}
	if s.Sandbox, err = b.NewSandbox(h, spec, !view.Exec, s.run); err != nil {
		return nil, err
	}
	cu := cleanup.Make(func() { s.Close(context.Background()) })
	defer cu.Clean()
	s.tmpDir = filepath.Join(s.Dir, "tmp")
	if err := os.Mkdir(s.tmpDir, 0o700); err != nil {
		return nil, sandbox.Errorf(sandbox.ErrInternal, "workdir_failed", "creating the /tmp mount point: %w", err)
	}
	if view.Image != "" {
		// The image under a tmpfs of the sandbox's, with the mount points
		// and generated files made in it here, through no symlink of the
		// image (bwrap, as root, would create them following one).
		s.root = filepath.Join(s.Dir, "root")
		if err := skeleton.Build(s.root, view); err != nil {
			return nil, sandbox.Errorf(sandbox.ErrInternal, "rootfs_failed", "making the image's root: %w", err)
		}
	}
	var mounts []string
	for i, m := range view.Mounts {
		p := filepath.Join(s.Dir, "m"+strconv.Itoa(i))
		if err := hostBind(m, p); err != nil {
			return nil, sandbox.Errorf(sandbox.ErrInternal, "mount_failed", "mounting %s: %w", m.Source, err)
		}
		mounts = append(mounts, p)
	}
	s.args = s.bwrapArgs(mounts)
	cu.Release()
	return s, nil
}

// tmpFlags are the mount flags of each Exec's /tmp.
func (s *Sandbox) tmpFlags() uintptr {
	f := uintptr(unix.MS_NOSUID | unix.MS_NODEV)
	if !s.view.Exec {
		f |= unix.MS_NOEXEC
	}
	return f
}

// hostBind binds m.Source on p (created) with the restrictions m asks for.
// bwrap then binds p, whose flags it cannot loosen: bwrap itself has no
// noexec for binds, and reaching p needs no permission on the source's
// parents.
func hostBind(m hostview.Bind, p string) error {
	st, err := os.Stat(m.Source)
	if err != nil {
		return err
	}
	if st.IsDir() {
		err = os.Mkdir(p, 0o700)
	} else {
		var f *os.File
		if f, err = os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600); err == nil {
			f.Close()
		}
	}
	if err != nil {
		return err
	}
	if err := unix.Mount(m.Source, p, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return err
	}
	attr := uint64(unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV)
	if !m.Writable {
		attr |= unix.MOUNT_ATTR_RDONLY
	}
	if !m.Exec {
		attr |= unix.MOUNT_ATTR_NOEXEC
	}
	if err := unix.MountSetattr(unix.AT_FDCWD, p, unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: attr}); err != nil {
		return fmt.Errorf("restricting the bind: %w", err)
	}
	return nil
}
