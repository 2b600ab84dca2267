package hostbase

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/execbox/execbox/internal/host/cgroups"
	"github.com/execbox/execbox/internal/host/cleanup"
	"github.com/execbox/execbox/internal/host/proc"
	"github.com/execbox/execbox/internal/host/workdir"
	"github.com/execbox/execbox/sandbox"
)

// Run is a backend's exec phase: it runs p in the sandbox to its end. Exec
// calls it with p checked and the run registered, so that Close cancels
// ctx and waits for it.
type Run func(ctx context.Context, p *sandbox.Process) (*sandbox.Result, error)

// WorkSandbox is what every sandbox with a work dir on this host has: its
// id, its spec, the work dir, the operation lifecycle and the backend's
// Run. It gives the sandbox ID, WriteFiles, Artifacts and Exec, and the
// preamble of Close.
type WorkSandbox struct {
	// Spec is the sandbox's spec, the default limits applied.
	Spec sandbox.Spec
	// Work is the work dir, /work inside.
	Work *workdir.Dir

	id    string
	run   Run
	life  sandbox.Lifecycle
	files sync.Mutex // WriteFiles and Artifacts, one at a time (the work dir's baseline)
}

// NewWorkSandbox returns the work-dir part of a new sandbox for spec
// whose work dir is work and whose processes run runs.
func NewWorkSandbox(spec sandbox.Spec, work *workdir.Dir, run Run) *WorkSandbox {
	return &WorkSandbox{Spec: spec, Work: work, id: sandbox.NewID(), run: run}
}

func (s *WorkSandbox) ID() string { return s.id }

// WriteFiles writes files into the work dir. It may run while an Exec
// runs (workdir.Dir never follows a symlink the program plants); it waits
// for a running Artifacts.
func (s *WorkSandbox) WriteFiles(ctx context.Context, files map[string][]byte) error {
	if err := s.life.Begin(s.id, nil); err != nil {
		return err
	}
	defer s.life.Done()
	s.files.Lock()
	defer s.files.Unlock()
	return s.Work.Write(files)
}

// Artifacts collects the work dir. It may run while an Exec runs; it
// waits for a running WriteFiles.
func (s *WorkSandbox) Artifacts(ctx context.Context) (sandbox.Artifacts, error) {
	if err := s.life.Begin(s.id, nil); err != nil {
		return sandbox.Artifacts{}, err
	}
	defer s.life.Done()
	s.files.Lock()
	defer s.files.Unlock()
	return s.Work.Collect(s.Spec.Limits.ArtifactFiles, s.Spec.Limits.ArtifactBytes)
}

// Exec checks p, registers the run (one at a time: a second is ErrBusy
// "sandbox_busy"; Close cancels it and waits) and runs it with the
// backend's Run.
func (s *WorkSandbox) Exec(ctx context.Context, p *sandbox.Process) (*sandbox.Result, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	end, err := s.life.BeginExec(s.id, cancel)
	if err != nil {
		return nil, err
	}
	defer end()
	return s.run(ctx, p)
}

// BeginClose ends a running Exec, refuses new operations and waits for
// the running ones. It reports true only the first time, when the caller
// is to release the sandbox's resources.
func (s *WorkSandbox) BeginClose() bool { return s.life.Close() }

// Supervision are proc's options for running p under the sandbox's
// limits; kill ends the whole process tree.
func (s *WorkSandbox) Supervision(p *sandbox.Process, kill func() error) proc.Options {
	l := p.LimitsFor(s.Spec.Limits)
	return proc.Options{
		Wall: l.Wall, Output: l.Output, OutputLimitKill: l.OutputLimitKill,
		Stdin: p.Stdin, Stdout: p.Stdout, Stderr: p.Stderr, TeeAll: p.Lasting,
		Kill: kill,
	}
}

// Sandbox is the host side of one sandbox: a work dir (as root a tmpfs of
// Limits.WorkSize, so nothing the program writes reaches the host's disk),
// a cgroup with the limits, and with Options.SandboxDir a directory of its
// own. A backend's Sandbox embeds it and adds Exec.
type Sandbox struct {
	WorkSandbox
	// Dir is <base>/<id>, holding everything of the sandbox on the host;
	// "" without Options.SandboxDir.
	Dir string
	// Cgroup holds every process of the sandbox; nil without cgroups.
	Cgroup *cgroups.Cgroup
	// Enforcement names the mechanism per limit, for every Result.
	Enforcement map[string]string

	backend string
	iso     sandbox.Isolation
	mounted bool           // the work dir tmpfs is mounted
	last    cgroups.Stats  // the cgroup's counters after the last Exec
	onClose []func() error // the backend's own teardown
}

// NewSandbox makes the host side of a sandbox for spec (from Admit) whose
// processes run runs: its directory, cgroup and work dir, mounting the
// work dir's tmpfs noexec when noexec is set. Whatever it made is removed
// again when a step fails; what the backend adds afterwards it undoes with
// Close.
func (b *Backend[F]) NewSandbox(h *Host[F], spec sandbox.Spec, noexec bool, run Run) (_ *Sandbox, err error) {
	s := &Sandbox{WorkSandbox: WorkSandbox{Spec: spec, id: sandbox.NewID(), run: run}, backend: b.opts.Name, iso: b.opts.Isolation}
	s.Enforcement = maps.Clone(h.Limits)
	if spec.Policy.Network == sandbox.NetworkHost {
		s.Enforcement["network"] = b.opts.HostNetwork
	}
	cu := cleanup.Make(func() { s.release() })
	defer cu.Clean()
	parent := h.Base
	if b.opts.SandboxDir {
		s.Dir = filepath.Join(h.Base, s.id)
		if err := os.Mkdir(s.Dir, 0o711); err != nil {
			return nil, sandbox.Errorf(sandbox.ErrInternal, "workdir_failed", "creating sandbox dir: %w", err)
		}
		parent = s.Dir
	}
	if h.Cgroups != nil {
		l := cgroups.Limits{Memory: spec.Limits.Memory, Pids: b.opts.CgroupPids(spec.Limits.Pids), CPUs: spec.Limits.CPUs}
		if b.opts.ProgramLeaf && spec.Limits.Pids > 0 {
			// The program's leaf: its limit plus the one init thread that
			// forks it; the sandbox's cgroup holds that too.
			l.ProgramPids = spec.Limits.Pids + 1
			l.Pids++
		}
		if s.Cgroup, err = h.Cgroups.Create(s.id, l); err != nil {
			return nil, sandbox.Errorf(sandbox.ErrInternal, "cgroup_failed", "creating cgroup: %w", err)
		}
	}
	if s.Work, err = workdir.New(parent, h.UID, h.GID); err != nil {
		return nil, sandbox.Errorf(sandbox.ErrInternal, "workdir_failed", "creating work dir: %w", err)
	}
	if !h.Rootless() {
		// The work dir's own size limit: a tmpfs only this sandbox writes.
		flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV)
		if noexec {
			flags |= unix.MS_NOEXEC
		}
		if err := unix.Mount("tmpfs", s.Work.Path, "tmpfs", flags, TmpfsOptions(spec.Limits.WorkSize, 0o700, h.UID, h.GID)); err != nil {
			return nil, sandbox.Errorf(sandbox.ErrInternal, "workdir_failed", "mounting the work dir tmpfs: %w", err)
		}
		s.mounted = true
	}
	cu.Release()
	return s, nil
}

// TmpfsOptions are the mount options of a tmpfs of size bytes owned by
// uid:gid.
func TmpfsOptions(size int64, mode os.FileMode, uid, gid int) string {
	return fmt.Sprintf("size=%d,nr_inodes=%d,mode=%04o,uid=%d,gid=%d", size, Inodes(size), mode, uid, gid)
}

// Inodes bounds a tmpfs's inodes by its size: one per KiB, within
// [1024, 1<<20].
func Inodes(size int64) int64 {
	return min(max(size/1024, 1024), 1<<20)
}

// Result is the Result of a run that ended as out: how, its output and
// wall time, and the sandbox's enforcement (a copy, the run's own to
// change).
func (s *Sandbox) Result(out *proc.Outcome) *sandbox.Result {
	res := out.Result(s.id, s.backend, s.iso)
	res.Enforcement = maps.Clone(s.Enforcement)
	return res
}

// OnClose adds a step of the backend's own to Close; the steps run newest
// first, before the cgroup, the work dir and the directory are removed.
func (s *Sandbox) OnClose(f func() error) { s.onClose = append(s.onClose, f) }

// Account adds the cgroup's view of a run to res: usage, and an OOM kill
// or the pids limit as the reason a failed program ended (see
// cgroups.Explain; l are the limits held against the counters). It
// returns the reason it set.
func (s *Sandbox) Account(res *sandbox.Result, killed bool, l sandbox.Limits) sandbox.Reason {
	if s.Cgroup == nil {
		return ""
	}
	after, err := s.Cgroup.Stats()
	if err != nil {
		res.Message = strings.TrimSpace(res.Message + " (cgroup stats unavailable: " + err.Error() + ")")
		return ""
	}
	r := cgroups.Explain(res, s.last, after, l, killed)
	s.last = after
	return r
}

// Close ends a running Exec and removes everything of the sandbox.
func (s *Sandbox) Close(ctx context.Context) error {
	if !s.BeginClose() {
		return nil
	}
	if err := s.release(); err != nil {
		return sandbox.Errorf(sandbox.ErrInternal, "close_failed", "closing sandbox %s: %w", s.id, err)
	}
	return nil
}

// release removes what the sandbox holds, as far as it got.
func (s *Sandbox) release() error {
	var errs []error
	for i := len(s.onClose) - 1; i >= 0; i-- {
		errs = append(errs, s.onClose[i]())
	}
	if s.Cgroup != nil {
		if err := s.Cgroup.Close(); err != nil {
			errs = append(errs, fmt.Errorf("removing cgroup: %w", err))
		}
	}
	if s.mounted {
		if err := unix.Unmount(s.Work.Path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			errs = append(errs, fmt.Errorf("unmounting the work dir: %w", err))
		}
	}
	if s.Work != nil {
		errs = append(errs, s.Work.Remove())
	}
	if s.Dir != "" {
		// Mounts the backend made in it go first; a host bind's source is
		// never emptied.
		errs = append(errs, workdir.RemoveTree(s.Dir))
	}
	return errors.Join(errs...)
}

// Memory is what the sandbox's processes hold now, from its cgroup.
func (s *Sandbox) Memory() (int64, error) {
	if s.Cgroup == nil {
		return 0, sandbox.Errorf(sandbox.ErrUnavailable, "no_cgroup", "sandbox %s has no cgroup to measure", s.id)
	}
	return s.Cgroup.Memory()
}
