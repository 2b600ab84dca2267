package native

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/execbox/execbox/internal/workdir"
	"github.com/execbox/execbox/internal/cgroups"
	"github.com/execbox/execbox/internal/nsinit"
	"github.com/execbox/execbox/internal/proc"
	"github.com/execbox/execbox/sandbox"
)

// Sandbox is one native sandbox: a cgroup, a work dir and a plan. Every
// Exec starts a fresh init in fresh namespaces; the work dir (and the
// cgroup's limits) carry over between them, /tmp does not.
type Sandbox struct {
	id          string
	b           *Backend
	env         *hostEnv
	spec        sandbox.Spec
	plan        *plan
	cg          *cgroups.Cgroup // nil without cgroups
	wd          *workdir.Dir
	mounted     bool // the work dir tmpfs is mounted
	enforcement map[string]string
	last        cgroups.Stats // the cgroup's counters after the last Exec

	life sandbox.Lifecycle // operations, for Close
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

// Exec runs p in a fresh set of namespaces under this sandbox's cgroup.
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

	l := s.spec.Limits
	wall := p.WallLimit(l)
	cfg := s.initConfig(p)
	opts := nsinit.Options{
		InitPath:   s.env.initPath,
		Cloneflags: nsinit.Namespaces,
		CgroupFD:   -1,
	}
	if s.spec.Policy.Network != sandbox.NetworkHost {
		opts.Cloneflags |= unix.CLONE_NEWNET
	}
	if s.env.rootless {
		// Unprivileged: one line per map, setgroups denied; the init is
		// the sandbox user and keeps the capabilities it needs for setup
		// as ambient ones (dropped again before the program starts).
		opts.UIDMap = []syscall.SysProcIDMap{{ContainerID: sandboxUID, HostID: s.env.hostUID, Size: 1}}
		opts.GIDMap = []syscall.SysProcIDMap{{ContainerID: sandboxGID, HostID: s.env.hostGID, Size: 1}}
		opts.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_NET_ADMIN, unix.CAP_SETPCAP, unix.CAP_SETUID, unix.CAP_SETGID}
	} else {
		// The init is root inside (host root's caps do not reach beyond
		// its namespaces); the program is 65534 inside and on the host.
		opts.UIDMap = []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}, {ContainerID: sandboxUID, HostID: sandboxUID, Size: 1}}
		opts.GIDMap = []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}, {ContainerID: sandboxGID, HostID: sandboxGID, Size: 1}}
		opts.Setgroups = true
	}
	var place func(int) error
	if s.cg != nil {
		if fd, ok := s.cg.FD(); ok {
			opts.CgroupFD = fd // v2: born in the cgroup, no window
		} else {
			place = s.cg.Add // v1: moved while it waits for its config
			cfg.NewCgroupNS = true
		}
	}
	launch, err := nsinit.NewLaunch(cfg, opts)
	if err != nil {
		return nil, sandbox.Errorf(sandbox.ErrInternal, "init_failed", "preparing the sandbox init: %w", err)
	}
	type served struct {
		st  *nsinit.Status
		err error
	}
	done := make(chan served, 1)
	go func() {
		st, err := launch.Serve(place)
		done <- served{st, err}
	}()
	cmd := launch.Cmd
	out, err := proc.Run(ctx, cmd, proc.Options{
		Wall: wall, Output: l.Output, OutputLimitKill: l.OutputLimitKill,
		Stdin: p.Stdin, Stdout: p.Stdout, Stderr: p.Stderr,
		Kill: func() error {
			// SIGKILL to PID 1 ends the whole PID namespace; the cgroup
			// catches anything that got out of it.
			kerr := cmd.Process.Kill()
			if errors.Is(kerr, os.ErrProcessDone) {
				// The init has exited and been reaped, and the kernel
				// does not let PID 1 go before the rest of its PID
				// namespace: nothing is left to kill.
				return nil
			}
			if s.cg != nil {
				kerr = errors.Join(kerr, s.cg.Kill())
			}
			return kerr
		},
	})
	launch.Release()
	sv := <-done
	if err != nil {
		return nil, sandbox.Errorf(sandbox.ErrInternal, "start_failed", "starting the sandbox init: %w", err)
	}
	res := out.Result(s.id, Name, sandbox.IsolationProcess)
	res.Usage = out.Usage() // the init's usage includes the program it waited for
	res.Enforcement = maps.Clone(s.enforcement)
	killed := out.Reason == sandbox.ReasonTimeout || out.Reason == sandbox.ReasonCanceled || out.Reason == sandbox.ReasonOutputLimit
	switch {
	case sv.err != nil && killed:
		// We killed the init before it could report: the program died of
		// our SIGKILL.
		res.ExitCode, res.Signal = -1, "SIGKILL"
	case sv.err != nil:
		res.Reason, res.ExitCode, res.Signal = sandbox.ReasonSandboxError, -1, ""
		res.Message = "the sandbox init failed: " + sv.err.Error()
		if out.Signal != "" {
			res.Message += " (init ended by " + out.Signal + ")"
		}
	case sv.st.Code == nsinit.CodeNotFound || sv.st.Code == nsinit.CodeDirNotFound:
		return nil, sandbox.Errorf(sandbox.ErrInvalid, sv.st.Code, "%s", sv.st.Error)
	case sv.st.Error != "":
		res.Reason, res.ExitCode, res.Signal = sandbox.ReasonSandboxError, -1, ""
		res.Message = "setting up the sandbox: " + sv.st.Error
	default:
		res.ExitCode, res.Signal = sv.st.ExitCode, ""
		if sv.st.Signal != 0 {
			res.Signal = unix.SignalName(syscall.Signal(sv.st.Signal))
		}
		if !killed {
			res.Reason = sandbox.ReasonOf(syscall.Signal(sv.st.Signal))
		}
		if sv.st.Landlock != "" {
			res.Enforcement["landlock"] = sv.st.Landlock
		}
	}
	if s.cg != nil {
		s.applyStats(res, killed)
	}
	return res, nil
}

// applyStats adds the cgroup's view: usage, and OOM kills or the pids
// limit as the reason a failed program ended.
func (s *Sandbox) applyStats(res *sandbox.Result, killed bool) {
	after, err := s.cg.Stats()
	if err != nil {
		res.Message = strings.TrimSpace(res.Message + " (cgroup stats unavailable: " + err.Error() + ")")
		return
	}
	cgroups.Explain(res, s.last, after, s.spec.Limits, killed)
	s.last = after
}

// initConfig is the init's config for p.
func (s *Sandbox) initConfig(p *sandbox.Process) *nsinit.Config {
	l := s.spec.Limits
	fixed := map[string]string{"HOME": workDir, "TMPDIR": "/tmp", "PATH": "/usr/local/bin:/usr/bin:/bin"}
	env := sandbox.BuildEnv(os.Environ(), s.spec.Policy, fixed, s.spec.Env, p.Env)
	cpu := uint64(max(l.CPUTime/time.Second, 1))
	rl := []nsinit.Rlimit{
		{Resource: unix.RLIMIT_NOFILE, Cur: uint64(l.NoFile), Max: uint64(l.NoFile)},
		{Resource: unix.RLIMIT_FSIZE, Cur: uint64(l.FileSize), Max: uint64(l.FileSize)},
		// SIGXCPU at the soft limit (reason cpu_limit), SIGKILL a second later.
		{Resource: unix.RLIMIT_CPU, Cur: cpu, Max: cpu + 1},
		// No core files: they would land in /work.
		{Resource: unix.RLIMIT_CORE, Cur: 0, Max: 0},
	}
	if s.cg == nil {
		// Stand-ins for the missing controllers; Enforcement says so.
		rl = append(rl,
			nsinit.Rlimit{Resource: unix.RLIMIT_AS, Cur: uint64(l.Memory), Max: uint64(l.Memory)},
			nsinit.Rlimit{Resource: unix.RLIMIT_NPROC, Cur: uint64(l.Pids + initThreads), Max: uint64(l.Pids + initThreads)},
		)
	}
	cfg := &nsinit.Config{
		Args:        p.Args,
		Env:         env,
		Dir:         path.Join(workDir, p.Dir),
		UID:         sandboxUID,
		GID:         sandboxGID,
		NoSetgroups: s.env.rootless,
		Hostname:    hostname,
		Root:        s.env.rootDir,
		RootSize:    1 << 20,
		Binds:       s.plan.binds,
		Files:       s.plan.files,
		Symlinks:    s.plan.symlinks,
		Devices:     s.plan.devices,
		DevLinks:    s.plan.devLinks,
		Tmp:         nsinit.Tmp{Size: l.TmpSize, Inodes: inodesFor(l.TmpSize), Exec: s.plan.exec},
		Mounts:      append([]nsinit.Bind{{Source: s.wd.Path, Target: workDir, Writable: true, Exec: s.plan.exec}}, s.plan.mounts...),
		Loopback:    s.spec.Policy.Network != sandbox.NetworkHost,
		Rlimits:     rl,
		Seccomp:     s.env.filter,
	}
	if s.env.llABI > 0 {
		cfg.Landlock = &nsinit.Landlock{RW: s.plan.rw}
	}
	return cfg
}

// Close ends a running Exec and removes the cgroup, the work dir's mount
// and the work dir.
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
	if s.mounted {
		if err := unix.Unmount(s.wd.Path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			errs = append(errs, fmt.Errorf("unmounting the work dir: %w", err))
		}
	}
	if err := s.wd.Remove(); err != nil {
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
