package native

import (
	"context"
	"errors"
	"os"
	"path"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/execbox/execbox/backend/internal/hostbase"
	"github.com/execbox/execbox/internal/host/hostview"
	"github.com/execbox/execbox/internal/host/nsinit"
	"github.com/execbox/execbox/internal/host/proc"
	"github.com/execbox/execbox/sandbox"
)

// run runs p in a fresh set of namespaces under this sandbox's cgroup.
func (s *Sandbox) run(ctx context.Context, p *sandbox.Process) (*sandbox.Result, error) {
	cfg := s.initConfig(p)
	opts := nsinit.Options{
		InitPath:   s.host.Own.initPath,
		Cloneflags: nsinit.Namespaces,
		CgroupFD:   -1,
	}
	if s.Spec.Policy.Network != sandbox.NetworkHost {
		opts.Cloneflags |= unix.CLONE_NEWNET
	}
	if s.host.Rootless() {
		// Unprivileged: one line per map, setgroups denied; the init is
		// the sandbox user and keeps the capabilities it needs for setup
		// as ambient ones (dropped again before the program starts).
		opts.UIDMap = []syscall.SysProcIDMap{{ContainerID: hostbase.UID, HostID: s.host.UID, Size: 1}}
		opts.GIDMap = []syscall.SysProcIDMap{{ContainerID: hostbase.GID, HostID: s.host.GID, Size: 1}}
		opts.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_NET_ADMIN, unix.CAP_SETPCAP, unix.CAP_SETUID, unix.CAP_SETGID}
	} else {
		// The init is root inside (host root's caps do not reach beyond
		// its namespaces); the program is 65534 inside and on the host.
		opts.UIDMap = []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}, {ContainerID: hostbase.UID, HostID: hostbase.UID, Size: 1}}
		opts.GIDMap = []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}, {ContainerID: hostbase.GID, HostID: hostbase.GID, Size: 1}}
		opts.Setgroups = true
	}
	var place func(pid, tid int) error
	if cg := s.Cgroup; cg != nil {
		v2 := false
		if fd, ok := cg.FD(); ok {
			opts.CgroupFD, v2 = fd, true // v2: born in the cgroup, no window
		} else {
			cfg.NewCgroupNS = true
		}
		place = func(pid, tid int) error {
			if !v2 {
				// v1: moved while it waits for its go-ahead.
				if err := cg.Add(pid); err != nil {
					return err
				}
			}
			if cg.ProgramLeafDir() == "" {
				return nil
			}
			// The thread that forks the program, into the program's pids
			// leaf: the program is born there, the init's other threads
			// stay out of its limit.
			return cg.AddProgramThread(tid)
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
	out, err := proc.Run(ctx, cmd, s.Supervision(p, func() error {
		// SIGKILL to PID 1 ends the whole PID namespace; the cgroup
		// catches anything that got out of it.
		kerr := cmd.Process.Kill()
		if errors.Is(kerr, os.ErrProcessDone) {
			// The init has exited and been reaped, and the kernel does not
			// let PID 1 go before the rest of its PID namespace: nothing
			// is left to kill.
			return nil
		}
		if s.Cgroup != nil {
			kerr = errors.Join(kerr, s.Cgroup.Kill())
		}
		return kerr
	}))
	launch.Release()
	sv := <-done
	if err != nil {
		return nil, sandbox.Errorf(sandbox.ErrInternal, "start_failed", "starting the sandbox init: %w", err)
	}
	res := s.Result(out)
	res.Usage = out.Usage() // the init's usage includes the program it waited for
	var lost string
	if sv.err != nil {
		lost = "the sandbox init failed: " + sv.err.Error()
		if out.Signal != "" {
			lost += " (init ended by " + out.Signal + ")"
		}
	}
	if err := hostbase.InitResult(res, out.Killed(), sv.st, lost); err != nil {
		return nil, err
	}
	s.Account(res, out.Killed(), s.Spec.Limits)
	return res, nil
}

// initConfig is the init's config for p.
func (s *Sandbox) initConfig(p *sandbox.Process) *nsinit.Config {
	l := p.LimitsFor(s.Spec.Limits)
	fixed := map[string]string{"HOME": hostview.WorkDir, "TMPDIR": hostview.Tmp, "PATH": "/usr/local/bin:/usr/bin:/bin"}
	cfg := &nsinit.Config{
		Args:        p.Args,
		Env:         sandbox.BuildEnv(os.Environ(), s.Spec.Policy, fixed, s.Spec.Env, p.Env),
		Dir:         path.Join(hostview.WorkDir, p.Dir),
		UID:         hostbase.UID,
		GID:         hostbase.GID,
		NoSetgroups: s.host.Rootless(),
		Hostname:    hostview.Hostname,
		Root:        s.host.Own.rootDir,
		RootSize:    1 << 20,
		Image:       s.plan.image,
		Binds:       s.plan.binds,
		Files:       s.plan.files,
		Symlinks:    s.plan.symlinks,
		Devices:     s.plan.devices,
		DevLinks:    s.plan.devLinks,
		Tmp:         nsinit.Tmp{Size: l.TmpSize, Inodes: hostbase.Inodes(l.TmpSize), Exec: s.plan.exec},
		Mounts:      append([]nsinit.Bind{{Source: s.Work.Path, Target: hostview.WorkDir, Writable: true, Exec: s.plan.exec}}, s.plan.mounts...),
		Loopback:    s.Spec.Policy.Network != sandbox.NetworkHost,
		Rlimits:     hostbase.Rlimits(l, s.Cgroup != nil, initThreads),
		Seccomp:     s.host.Own.filter,
	}
	if s.host.Own.llABI > 0 {
		cfg.Landlock = &nsinit.Landlock{RW: s.plan.rw}
	}
	return cfg
}

// Interface guards.
var (
	_ sandbox.Backend    = (*Backend)(nil)
	_ sandbox.Sandbox    = (*Sandbox)(nil)
	_ sandbox.Closer     = (*Backend)(nil)
	_ sandbox.Reconciler = (*Backend)(nil)
)
