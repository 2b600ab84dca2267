package gvisor

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/execbox/execbox/internal/cgroups"
	"github.com/execbox/execbox/internal/hostview"
	"github.com/execbox/execbox/internal/proc"
	"github.com/execbox/execbox/internal/workdir"
	"github.com/execbox/execbox/sandbox"
)

// Sandbox is one gVisor sandbox: a directory with the bundle, runsc's
// state and the work dir, and a cgroup. Every Exec starts a fresh gVisor
// sandbox (runsc run) from the bundle; the work dir and the cgroup carry
// over between them, /tmp does not.
type Sandbox struct {
	id          string
	cid         string // runsc's container id
	b           *Backend
	env         *hostEnv
	spec        sandbox.Spec
	view        *hostview.View
	dir         string // everything of the sandbox on the host
	paths       dirs
	cg          *cgroups.Cgroup // nil without cgroups
	wd          *workdir.Dir
	mounted     bool // the work dir tmpfs is mounted
	enforcement map[string]string
	last        cgroups.Stats // the cgroup's counters after the last Exec

	life sandbox.Lifecycle // operations, for Close
}

func (s *Sandbox) ID() string { return s.id }

// makeWorkDir makes the work dir and mounts a tmpfs of Limits.WorkSize on
// it, owned by the sandbox user.
func (s *Sandbox) makeWorkDir() error {
	wd, err := workdir.New(s.dir, sandboxUID, sandboxGID)
	if err != nil {
		return sandbox.Errorf(sandbox.ErrInternal, "workdir_failed", "creating work dir: %w", err)
	}
	s.wd = wd
	size := s.spec.Limits.WorkSize
	opts := fmt.Sprintf("size=%d,nr_inodes=%d,mode=0700,uid=%d,gid=%d", size, inodesFor(size), sandboxUID, sandboxGID)
	if err := unix.Mount("tmpfs", wd.Path, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		wd.Remove()
		return sandbox.Errorf(sandbox.ErrInternal, "workdir_failed", "mounting the work dir tmpfs: %w", err)
	}
	s.mounted = true
	return nil
}

// removeWorkDir unmounts and removes the work dir.
func (s *Sandbox) removeWorkDir() {
	if s.mounted {
		unix.Unmount(s.wd.Path, unix.MNT_DETACH)
		s.mounted = false
	}
	s.wd.Remove()
}

// inodesFor bounds a tmpfs's inodes by its size: one per KiB, within
// [1024, 1<<20].
func inodesFor(size int64) int64 {
	return min(max(size/1024, 1024), 1<<20)
}

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

// checkDir makes sure the working directory exists in the work dir, found
// without following a symlink.
func (s *Sandbox) checkDir(dir string) error {
	if dir == "" {
		return nil
	}
	root, err := unix.Open(s.wd.Path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return sandbox.Errorf(sandbox.ErrInternal, "workdir_failed", "opening the work dir: %w", err)
	}
	defer unix.Close(root)
	fd, err := unix.Openat2(root, dir, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return sandbox.Errorf(sandbox.ErrInvalid, "dir_not_found", "working directory %s is not a directory in the work dir: %w", dir, err)
	}
	unix.Close(fd)
	return nil
}

// Exec runs p in a fresh gVisor sandbox under this sandbox's cgroup.
func (s *Sandbox) Exec(ctx context.Context, p *sandbox.Process) (*sandbox.Result, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := s.life.Begin(s.id, cancel); err != nil {
		return nil, err
	}
	defer s.life.Done()
	if err := s.checkDir(p.Dir); err != nil {
		return nil, err
	}
	if err := s.writeBundle(p); err != nil {
		return nil, sandbox.Errorf(sandbox.ErrInternal, "bundle_failed", "preparing the sandbox: %w", err)
	}
	for _, f := range []string{s.paths.errorLog(), s.paths.runLog()} {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, sandbox.Errorf(sandbox.ErrInternal, "bundle_failed", "clearing runsc's log: %w", err)
		}
	}

	l := s.spec.Limits
	wall := p.WallLimit(l)
	r := s.env.runsc
	cmd := r.runCmd(s.paths, s.spec.Policy.Network, s.cid)
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	cpuHit := s.watchCPU(l.CPUTime, stopRun)
	out, err := proc.Run(runCtx, cmd, proc.Options{
		Wall: wall, Output: l.Output, OutputLimitKill: l.OutputLimitKill,
		Stdin: p.Stdin, Stdout: p.Stdout, Stderr: p.Stderr,
		Kill: func() error { return s.kill(cmd.Process) },
	})
	overCPU := cpuHit()
	cleanErr := s.cleanup()
	if err != nil {
		return nil, sandbox.Errorf(sandbox.ErrInternal, "start_failed", "starting runsc: %w", err)
	}
	res := out.Result(s.id, Name, sandbox.IsolationKernel)
	res.Enforcement = maps.Clone(s.enforcement)
	if overCPU && out.Reason == sandbox.ReasonCanceled && ctx.Err() == nil {
		res.Reason = sandbox.ReasonCPULimit
		res.Message = fmt.Sprintf("the CPU time limit of %v was reached (the sandbox's cgroup: sentry, gofer and program together)", l.CPUTime)
	}
	killed := out.Reason == sandbox.ReasonTimeout || out.Reason == sandbox.ReasonCanceled || out.Reason == sandbox.ReasonOutputLimit
	runLog, _ := os.ReadFile(s.paths.runLog())
	ws, ok := exitStatus(runLog, cmd.Process.Pid)
	switch {
	case killed:
		// We killed the sandbox, and the program with it.
		res.ExitCode, res.Signal = -1, "SIGKILL"
	case ok:
		res.ExitCode, res.Signal, res.Reason = ws.ExitStatus(), "", sandbox.ReasonExited
		if ws.Signaled() {
			res.ExitCode, res.Signal = -1, unix.SignalName(ws.Signal())
			res.Reason = sandbox.ReasonOf(ws.Signal())
		}
	default:
		msg := runscErrors(s.paths.errorLog())
		if msg == "" {
			msg = strings.TrimSpace(res.Stderr)
		}
		if why, ok := notFound(msg); ok {
			return nil, sandbox.Errorf(sandbox.ErrInvalid, "program_not_found", "starting %q in the sandbox: %s", p.Args[0], why)
		}
		res.Reason, res.ExitCode, res.Signal = sandbox.ReasonSandboxError, -1, ""
		res.Message = "runsc failed"
		if out.Signal != "" {
			res.Message += " (ended by " + out.Signal + ")"
		} else {
			res.Message += fmt.Sprintf(" (exit status %d)", out.ExitCode)
		}
		if msg != "" {
			res.Message += ": " + msg
		}
	}
	if s.cg != nil {
		s.applyStats(res, killed)
	}
	if cleanErr != nil && res.Reason != sandbox.ReasonSandboxError {
		// The program ran, but something of the run may be left; say so
		// rather than hide it.
		res.Message = strings.TrimSpace(res.Message + " (cleaning up after runsc: " + cleanErr.Error() + ")")
	}
	return res, nil
}

// cpuPoll is how often the CPU time of a running sandbox is checked.
const cpuPoll = 100 * time.Millisecond

// watchCPU calls stop once the sandbox's cgroup has used limit of CPU time
// since the call. The returned func stops watching and reports whether the
// limit was hit. Without a cgroup it does nothing.
func (s *Sandbox) watchCPU(limit time.Duration, stop context.CancelFunc) func() bool {
	if s.cg == nil || limit <= 0 {
		return func() bool { return false }
	}
	base, err := s.cg.Stats()
	if err != nil {
		return func() bool { return false }
	}
	var hit atomic.Bool
	quit, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(cpuPoll)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
			}
			if st, err := s.cg.Stats(); err == nil && st.CPU-base.CPU >= limit {
				hit.Store(true)
				stop()
				return
			}
		}
	}()
	return func() bool {
		close(quit)
		<-finished
		return hit.Load()
	}
}

// kill ends the run. runsc kills the container's processes and, seeing
// the container end, tears the sandbox down and exits by itself; it gets a
// moment for that. Then every process left in the sandbox's cgroup (the
// sentry, the gofer, ptrace stubs) is killed, and the runsc process last.
// A runsc process that has exited already has taken the sandbox down with
// it; only the cgroup is checked then.
func (s *Sandbox) kill(p *os.Process) error {
	var errs []error
	alive := p.Signal(syscall.Signal(0)) == nil
	if alive {
		if err := s.env.runsc.kill(s.paths, s.cid); err == nil {
			waitExit(p, runscTeardown)
		}
	}
	if s.cg != nil {
		errs = append(errs, sweep(s.cg))
	}
	if p.Signal(syscall.Signal(0)) == nil {
		if err := p.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// runscTeardown is how long runsc gets to take the sandbox down after its
// container was killed.
const runscTeardown = time.Second

// waitExit waits until p has exited and been reaped, or d has passed.
func waitExit(p *os.Process, d time.Duration) {
	deadline := time.Now().Add(d)
	for p.Signal(syscall.Signal(0)) == nil && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
}

// sweep SIGKILLs every process in the cgroup until none is left. The
// sandbox's host processes fork only at the sentry's request, so killing
// them in a loop ends; the v1 freezer is no help here, since ptrace-stopped
// stubs can keep it from ever reaching FROZEN. What is still there after
// the loop is left to the cgroup's own kill.
func sweep(cg *cgroups.Cgroup) error {
	deadline := time.Now().Add(2 * time.Second)
	for wait := time.Millisecond; ; wait = min(2*wait, 20*time.Millisecond) {
		pids := cgroupProcs(cg)
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return cg.Kill()
		}
		for _, pid := range pids {
			unix.Kill(pid, unix.SIGKILL)
		}
		time.Sleep(wait)
	}
}

// cgroupProcs lists the processes in any of the cgroup's leaves.
func cgroupProcs(cg *cgroups.Cgroup) []int {
	var out []int
	for _, d := range cg.Dirs() {
		data, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil && !slices.Contains(out, pid) {
				out = append(out, pid)
			}
		}
	}
	return out
}

// cleanup removes what a run may leave: runsc's state (only when runsc
// did not remove it itself, i.e. it was killed) and cgroup leaves runsc
// made in hierarchies other than ours.
func (s *Sandbox) cleanup() error {
	var errs []error
	if ents, err := os.ReadDir(s.paths.state); err == nil && len(ents) > 0 {
		if err := s.env.runsc.delete(s.paths, s.cid); err != nil {
			// delete fails when the container never got as far as having
			// state; what matters is that nothing is left.
			if ents, _ := os.ReadDir(s.paths.state); len(ents) > 0 {
				errs = append(errs, fmt.Errorf("runsc delete: %w", err))
			}
		}
		if err := clearDir(s.paths.state); err != nil {
			errs = append(errs, err)
		}
	}
	if s.cg != nil {
		if err := sweep(s.cg); err != nil {
			errs = append(errs, err)
		}
		removeExtra(s.env.hier, s.cg.Name(), s.cg.Dirs()...)
	}
	return errors.Join(errs...)
}

// clearDir removes everything inside dir.
func clearDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// applyStats adds the cgroup's view: usage, and an OOM kill as the reason
// the run ended. The counters include the sentry and the gofer.
func (s *Sandbox) applyStats(res *sandbox.Result, killed bool) {
	after, err := s.cg.Stats()
	if err != nil {
		res.Message = strings.TrimSpace(res.Message + " (cgroup stats unavailable: " + err.Error() + ")")
		return
	}
	// The host pids limit is only a backstop (the sentry enforces
	// Limits.Pids), so a refused fork there is not the program's limit.
	l := s.spec.Limits
	l.Pids = 0
	if cgroups.Explain(res, s.last, after, l, killed) == sandbox.ReasonMemoryLimit {
		// The OOM killer takes the sentry: the whole sandbox, not a process in it.
		res.ExitCode, res.Signal = -1, "SIGKILL"
		res.Message = fmt.Sprintf("the memory limit of %d bytes was reached; the host kernel's OOM killer ended the gVisor sandbox", l.Memory)
	}
	s.last = after
}

// Close ends a running Exec and removes the cgroup, the work dir's mount
// and the sandbox's directory.
func (s *Sandbox) Close(ctx context.Context) error {
	if !s.life.Close() {
		return nil
	}
	var errs []error
	if err := s.cleanup(); err != nil {
		errs = append(errs, err)
	}
	if s.cg != nil {
		if err := s.cg.Close(); err != nil {
			errs = append(errs, fmt.Errorf("removing cgroup: %w", err))
		}
		removeExtra(s.env.hier, s.cg.Name())
	}
	if s.mounted {
		if err := unix.Unmount(s.wd.Path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			errs = append(errs, fmt.Errorf("unmounting the work dir: %w", err))
		}
	}
	if err := os.RemoveAll(s.dir); err != nil {
		errs = append(errs, fmt.Errorf("removing the sandbox dir: %w", err))
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
