package bwrap

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/execbox/execbox/internal/cgroups"
	"github.com/execbox/execbox/internal/hostview"
	"github.com/execbox/execbox/internal/workdir"
	"github.com/execbox/execbox/sandbox"
)

// Sandbox is one bwrap sandbox: a host directory holding its work dir (a
// tmpfs), the mount point of each Exec's /tmp and host binds of its extra
// mounts, a cgroup, and the bwrap arguments fixed at Create. Every Exec
// runs a fresh bwrap; the work dir and the cgroup carry over, /tmp does
// not.
type Sandbox struct {
	id          string
	b           *Backend
	env         *hostEnv
	spec        sandbox.Spec
	view        *hostview.View
	dir         string // <base>/<id>
	tmpDir      string // where each Exec's /tmp tmpfs is mounted
	cg          *cgroups.Cgroup
	wd          *workdir.Dir
	args        []string // bwrap's arguments, fd numbers included
	enforcement map[string]string
	last        cgroups.Stats

	life sandbox.Lifecycle // operations, for Close
}

// Create validates spec against the host and makes the sandbox's cgroup,
// work dir tmpfs and host binds.
func (b *Backend) Create(ctx context.Context, spec sandbox.Spec) (sb sandbox.Sandbox, err error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	e := b.hostEnv()
	if e.err != nil {
		return nil, sandbox.Errorf(sandbox.ErrUnavailable, "bwrap_unavailable", "bwrap backend: %w", e.err)
	}
	spec.Limits = spec.Limits.WithDefaults(b.defaults)
	view, err := hostview.Plan(spec, hostview.Options{Hidden: []string{b.workRoot}})
	if err != nil {
		return nil, err
	}
	s := &Sandbox{id: sandbox.NewID(), b: b, env: e, spec: spec, view: view}
	s.enforcement = maps.Clone(e.limits)
	if spec.Policy.Network == sandbox.NetworkHost {
		s.enforcement["network"] = "host network (policy network=host, bwrap --share-net)"
	}
	s.dir = filepath.Join(e.base, s.id)
	if err := os.Mkdir(s.dir, 0o711); err != nil {
		return nil, sandbox.Errorf(sandbox.ErrInternal, "workdir_failed", "creating sandbox dir: %w", err)
	}
	defer func() {
		if err != nil {
			if s.cg != nil {
				s.cg.Close()
			}
			removeTree(s.dir)
		}
	}()
	if e.cg != nil {
		s.cg, err = e.cg.Create(s.id, cgroups.Limits{Memory: spec.Limits.Memory, Pids: spec.Limits.Pids + helperTasks, CPUs: spec.Limits.CPUs})
		if err != nil {
			return nil, sandbox.Errorf(sandbox.ErrInternal, "cgroup_failed", "creating cgroup: %w", err)
		}
	}
	if s.wd, err = workdir.New(s.dir, sandboxUID, sandboxGID); err != nil {
		return nil, sandbox.Errorf(sandbox.ErrInternal, "workdir_failed", "creating work dir: %w", err)
	}
	// The work dir's own size limit: a tmpfs only this sandbox writes,
	// noexec unless tmp_exec (a bind keeps its source's flags, and in
	// bwrap's user namespace they are locked).
	if err := unix.Mount("tmpfs", s.wd.Path, "tmpfs", s.tmpFlags(), tmpfsOpts(spec.Limits.WorkSize, 0o700)); err != nil {
		return nil, sandbox.Errorf(sandbox.ErrInternal, "workdir_failed", "mounting the work dir tmpfs: %w", err)
	}
	s.tmpDir = filepath.Join(s.dir, "tmp")
	if err := os.Mkdir(s.tmpDir, 0o700); err != nil {
		return nil, sandbox.Errorf(sandbox.ErrInternal, "workdir_failed", "creating the /tmp mount point: %w", err)
	}
	var mounts []string
	for i, m := range view.Mounts {
		p := filepath.Join(s.dir, "m"+strconv.Itoa(i))
		if err := hostBind(m, p); err != nil {
			return nil, sandbox.Errorf(sandbox.ErrInternal, "mount_failed", "mounting %s: %w", m.Source, err)
		}
		mounts = append(mounts, p)
	}
	s.args = s.bwrapArgs(mounts)
	return s, nil
}

// tmpFlags are the mount flags of /tmp and the work dir.
func (s *Sandbox) tmpFlags() uintptr {
	f := uintptr(unix.MS_NOSUID | unix.MS_NODEV)
	if !s.view.Exec {
		f |= unix.MS_NOEXEC
	}
	return f
}

func tmpfsOpts(size int64, mode os.FileMode) string {
	return fmt.Sprintf("size=%d,nr_inodes=%d,mode=%04o,uid=%d,gid=%d", size, inodesFor(size), mode, sandboxUID, sandboxGID)
}

// inodesFor bounds a tmpfs's inodes by its size: one per KiB, within
// [1024, 1<<20].
func inodesFor(size int64) int64 {
	return min(max(size/1024, 1024), 1<<20)
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

func (s *Sandbox) ID() string { return s.id }

func (s *Sandbox) WriteFiles(ctx context.Context, files map[string][]byte) error {
	if err := s.life.Begin(s.id, nil); err != nil {
		return err
	}
	defer s.life.Done()
	return s.wd.Write(files)
}

func (s *Sandbox) Artifacts(ctx context.Context) (sandbox.Artifacts, error) {
	if err := s.life.Begin(s.id, nil); err != nil {
		return sandbox.Artifacts{}, err
	}
	defer s.life.Done()
	return s.wd.Collect(s.spec.Limits.ArtifactFiles, s.spec.Limits.ArtifactBytes)
}

// Close ends a running Exec and removes the cgroup, the mounts and the
// sandbox's directory.
func (s *Sandbox) Close(ctx context.Context) error {
	if !s.life.Close() {
		return nil
	}
	var errs []error
	if s.cg != nil {
		if err := s.cg.Close(); err != nil {
			errs = append(errs, fmt.Errorf("removing cgroup: %w", err))
		}
	}
	if err := removeTree(s.dir); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return sandbox.Errorf(sandbox.ErrInternal, "close_failed", "closing sandbox %s: %w", s.id, err)
	}
	return nil
}

// Interface guards.
var (
	_ sandbox.Backend    = (*Backend)(nil)
	_ sandbox.Sandbox    = (*Sandbox)(nil)
	_ sandbox.Closer     = (*Backend)(nil)
	_ sandbox.Reconciler = (*Backend)(nil)
)
