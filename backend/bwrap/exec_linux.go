package bwrap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/execbox/execbox/backend/internal/hostbase"
	"github.com/execbox/execbox/internal/host/cleanup"
	"github.com/execbox/execbox/internal/host/hostview"
	"github.com/execbox/execbox/internal/host/nsinit"
	"github.com/execbox/execbox/internal/host/proc"
	"github.com/execbox/execbox/sandbox"
)

// run runs p in a fresh bwrap under this sandbox's cgroup.
func (s *Sandbox) run(ctx context.Context, p *sandbox.Process) (*sandbox.Result, error) {
	// A fresh /tmp for every Exec.
	opts := hostbase.TmpfsOptions(s.Spec.Limits.TmpSize, 0o1777, hostbase.UID, hostbase.GID)
	if err := unix.Mount("tmpfs", s.tmpDir, "tmpfs", s.tmpFlags(), opts); err != nil {
		return nil, sandbox.Errorf(sandbox.ErrInternal, "tmp_failed", "mounting /tmp: %w", err)
	}
	defer unix.Unmount(s.tmpDir, unix.MNT_DETACH)

	ln, err := s.newLaunch()
	if err != nil {
		return nil, sandbox.Errorf(sandbox.ErrInternal, "start_failed", "preparing bwrap: %w", err)
	}
	defer ln.close()
	done := make(chan served, 1)
	go func() { done <- ln.serve(s.initConfig(p)) }()
	cmd := ln.cmd
	out, err := proc.Run(ctx, cmd, s.Supervision(p, func() error {
		err := ln.kill(cmd.Process.Pid)
		if s.Cgroup != nil {
			err = errors.Join(err, s.Cgroup.Kill())
		}
		return err
	}))
	// bwrap has exited. Its sandbox is dead or must be (it may still sit
	// before the block fd if bwrap was killed early); only then may the
	// block fd close, since a closed block fd lets the sandbox go on.
	ln.killChild()
	ln.closeChildEnds()
	sv := <-done
	if err != nil {
		return nil, sandbox.Errorf(sandbox.ErrInternal, "start_failed", "starting bwrap: %w", err)
	}
	res := s.Result(out)
	res.Usage = out.Usage() // bwrap waited for the init, which waited for the program
	var lost string
	if sv.err != nil {
		// bwrap failed before or while setting up; it says why on stderr.
		lost = "the bwrap sandbox failed: " + sv.err.Error()
		if msg := sandbox.LastLine(res.Stderr); msg != "" {
			lost += "; " + msg
		}
	}
	if err := hostbase.InitResult(res, out.Killed(), sv.st, lost); err != nil {
		return nil, err
	}
	s.Account(res, out.Killed(), s.Spec.Limits)
	return res, nil
}

// initConfig is the init's config for p.
func (s *Sandbox) initConfig(p *sandbox.Process) *initConfig {
	fixed := map[string]string{"HOME": hostview.WorkDir, "TMPDIR": hostview.Tmp, "PATH": "/usr/local/bin:/usr/bin:/bin"}
	return &initConfig{
		Args:    p.Args,
		Env:     sandbox.BuildEnv(os.Environ(), s.Spec.Policy, fixed, s.Spec.Env, p.Env),
		Dir:     path.Join(hostview.WorkDir, p.Dir),
		Rlimits: hostbase.Rlimits(p.LimitsFor(s.Spec.Limits), s.Cgroup != nil, helperTasks),
	}
}

// launch is one start of bwrap: the command, its fds and what is known of
// the sandbox's PID 1 while it starts.
type launch struct {
	s         *Sandbox
	cmd       *exec.Cmd
	ctl       *os.File   // our end of the control socket
	infoR     *os.File   // bwrap's info (the sandbox's host PID)
	blockW    *os.File   // one byte lets the sandbox's PID 1 go on
	childEnds []*os.File // bwrap's fds, closed once it has exited

	mu     sync.Mutex
	killed bool
	pidfd  int // of the sandbox's PID 1; -1 until known
}

type served struct {
	st  *nsinit.Status
	err error
}

// newLaunch prepares bwrap's command and fds. bwrap starts as host uid
// 65534 with an empty environment (its PID-1 helper would otherwise keep
// the launcher's environment readable in /proc/1/environ) and only the fds
// listed here.
func (s *Sandbox) newLaunch() (*launch, error) {
	l := &launch{s: s, pidfd: -1}
	cu := cleanup.Make(func() {
		l.closeChildEnds()
		l.close()
	})
	defer cu.Clean()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("creating the control socket: %w", err)
	}
	l.ctl = os.NewFile(uintptr(fds[0]), "ctl")
	ctlChild := os.NewFile(uintptr(fds[1]), "ctl-child")
	l.childEnds = append(l.childEnds, ctlChild)
	argsF, err := memfd("args", []byte(strings.Join(s.args, "\x00")+"\x00"))
	if err != nil {
		return nil, err
	}
	l.childEnds = append(l.childEnds, argsF)
	secF, err := memfd("seccomp", s.host.Own.filter)
	if err != nil {
		return nil, err
	}
	l.childEnds = append(l.childEnds, secF)
	infoR, infoW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("creating the info pipe: %w", err)
	}
	l.infoR = infoR
	l.childEnds = append(l.childEnds, infoW)
	blockR, blockW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("creating the block pipe: %w", err)
	}
	l.blockW = blockW
	l.childEnds = append(l.childEnds, blockR)
	extra := []*os.File{ctlChild, s.host.Own.exe, argsF, secF, infoW, blockR}
	files := s.view.Files
	if s.root != "" {
		files = nil // in the image's skeleton already
	}
	for _, f := range files {
		ff, err := memfd("file", []byte(f.Data))
		if err != nil {
			return nil, err
		}
		l.childEnds = append(l.childEnds, ff)
		extra = append(extra, ff)
	}
	// Only fds 0-2 and these may reach bwrap, which passes on whatever it
	// gets: an fd execbox inherited without close-on-exec gets it now.
	cloexecInherited()
	l.cmd = &exec.Cmd{
		Path:       s.host.Own.bwrap,
		Args:       command(),
		Env:        []string{},
		Dir:        "/",
		ExtraFiles: extra,
		SysProcAttr: &syscall.SysProcAttr{
			Credential: &syscall.Credential{Uid: hostbase.UID, Gid: hostbase.GID, Groups: []uint32{}},
		},
	}
	if s.Cgroup != nil {
		if fd, ok := s.Cgroup.FD(); ok {
			// v2: bwrap is born in the cgroup, everything it starts too.
			l.cmd.SysProcAttr.UseCgroupFD, l.cmd.SysProcAttr.CgroupFD = true, fd
		}
	}
	cu.Release()
	return l, nil
}

// memfd returns a sealed-size read-only file holding data, at offset 0.
func memfd(name string, data []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate("execbox-"+name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("creating memfd: %w", err)
	}
	f := os.NewFile(uintptr(fd), name)
	if _, err := f.Write(data); err != nil {
		f.Close()
		return nil, fmt.Errorf("writing memfd: %w", err)
	}
	if _, err := f.Seek(0, 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("rewinding memfd: %w", err)
	}
	return f, nil
}

// cloexecInherited sets close-on-exec on every fd above 2 that lacks it.
// Go opens everything close-on-exec, so these are fds execbox inherited;
// none of them is meant for a sandbox.
func cloexecInherited() {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd <= 2 {
			continue
		}
		if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && fl&unix.FD_CLOEXEC == 0 {
			unix.FcntlInt(uintptr(fd), unix.F_SETFD, fl|unix.FD_CLOEXEC)
		}
	}
}

// serve places the sandbox's PID 1 in the cgroup while bwrap holds it at
// the block fd, lets it go, sends the config and reads the status.
func (l *launch) serve(cfg *initConfig) served {
	var info struct {
		ChildPID int `json:"child-pid"`
	}
	if err := json.NewDecoder(l.infoR).Decode(&info); err != nil || info.ChildPID <= 0 {
		return served{err: errors.New("bwrap exited before creating the sandbox")}
	}
	pidfd, err := unix.PidfdOpen(info.ChildPID, 0)
	if err != nil {
		return served{err: fmt.Errorf("opening the sandbox's PID 1: %w", err)}
	}
	l.mu.Lock()
	l.pidfd = pidfd
	killed := l.killed
	l.mu.Unlock()
	if killed {
		l.killChild()
		return served{err: errors.New("killed while starting")}
	}
	if err := l.place(info.ChildPID); err != nil {
		l.killChild()
		return served{err: err}
	}
	if _, err := l.blockW.Write([]byte{'G'}); err != nil {
		l.killChild()
		return served{err: fmt.Errorf("releasing the sandbox: %w", err)}
	}
	if err := nsinit.WriteMsg(l.ctl, cfg); err != nil {
		return served{err: fmt.Errorf("sending the init config: %w", err)}
	}
	var ready initReady
	if err := nsinit.ReadMsg(l.ctl, &ready); err != nil {
		return served{err: fmt.Errorf("waiting for the init: %w", err)}
	}
	if err := l.placeThread(info.ChildPID, ready.TID); err != nil {
		return served{err: err}
	}
	if _, err := l.ctl.Write([]byte{goByte}); err != nil {
		return served{err: fmt.Errorf("starting the program: %w", err)}
	}
	var st nsinit.Status
	if err := nsinit.ReadMsg(l.ctl, &st); err != nil {
		return served{err: fmt.Errorf("reading the init's status: %w", err)}
	}
	return served{st: &st}
}

// place moves the sandbox's PID 1 (bwrap's child, held before it runs
// anything) and the bwrap monitor into the cgroup; on cgroup v2 both were
// born there.
func (l *launch) place(child int) error {
	cg := l.s.Cgroup
	if cg == nil || l.cmd.SysProcAttr.UseCgroupFD {
		return nil
	}
	if err := cg.Add(child); err != nil {
		return fmt.Errorf("placing the sandbox in its cgroup: %w", err)
	}
	// bwrap is the child's parent only while it lives: once it died (a
	// cancel right after the start) the child is reparented to the host's
	// init or a subreaper, which must never be moved (let alone frozen
	// and killed with the sandbox). So the parent counts only when it is a
	// child of this process, as bwrap is.
	if bwrap := parentOf(child); bwrap > 1 && bwrap != os.Getpid() && parentOf(bwrap) == os.Getpid() {
		if err := cg.Add(bwrap); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("placing bwrap in the cgroup: %w", err)
		}
	}
	return nil
}

// placeThread moves the init's thread nsTID (as the sandbox numbers it),
// which forks the program, into the program's pids leaf: the program is
// born there and held to its limit exactly, while the init's other
// threads and bwrap stay in the sandbox's cgroup above it.
func (l *launch) placeThread(child, nsTID int) error {
	cg := l.s.Cgroup
	if cg == nil || cg.ProgramLeafDir() == "" {
		return nil
	}
	tid, err := nsinit.HostTID(child, nsTID)
	if err != nil {
		return fmt.Errorf("placing the program's leaf: %w", err)
	}
	if err := cg.AddProgramThread(tid); err != nil {
		return fmt.Errorf("placing the program's leaf: %w", err)
	}
	return nil
}

// parentOf reads pid's parent from /proc, 0 if unknown.
func parentOf(pid int) int {
	f := proc.StatFields(pid)
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// kill ends the sandbox: its PID 1 (which takes its PID namespace along),
// any child bwrap made that we have not heard of yet, and bwrap.
func (l *launch) kill(bwrapPID int) error {
	l.mu.Lock()
	l.killed = true
	l.mu.Unlock()
	l.killChild()
	// Stop bwrap first: a stop takes effect only once a clone in progress
	// has returned, so a stopped bwrap's children list is complete. Killed
	// mid-clone instead, its new child would outlive it unseen: reparented
	// to init, in no cgroup, never killed.
	if unix.Kill(bwrapPID, unix.SIGSTOP) == nil {
		waitStopped(bwrapPID, 200*time.Millisecond)
	}
	if data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", bwrapPID, bwrapPID)); err == nil {
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil {
				unix.Kill(pid, unix.SIGKILL) // still bwrap's child, so not reused
			}
		}
	}
	if err := unix.Kill(bwrapPID, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
		return err
	}
	return nil
}

// waitStopped polls until process pid is stopped (or a zombie, or gone),
// at most d.
func waitStopped(pid int, d time.Duration) {
	deadline := time.Now().Add(d)
	for wait := 50 * time.Microsecond; time.Now().Before(deadline); wait = min(2*wait, 5*time.Millisecond) {
		f := proc.StatFields(pid)
		if f == nil || f[0] == "T" || f[0] == "t" || f[0] == "Z" {
			return
		}
		time.Sleep(wait)
	}
}

// killChild SIGKILLs the sandbox's PID 1 through its pidfd, if known.
func (l *launch) killChild() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.killed = true
	if l.pidfd >= 0 {
		unix.PidfdSendSignal(l.pidfd, unix.SIGKILL, nil, 0)
	}
}

// closeChildEnds closes our copies of bwrap's fds, so reads on their
// other ends see EOF once bwrap is gone.
func (l *launch) closeChildEnds() {
	for _, f := range l.childEnds {
		f.Close()
	}
	l.childEnds = nil
}

// close releases the rest, after serve has returned.
func (l *launch) close() {
	for _, f := range []*os.File{l.ctl, l.infoR, l.blockW} {
		if f != nil {
			f.Close()
		}
	}
	l.mu.Lock()
	if l.pidfd >= 0 {
		unix.Close(l.pidfd)
		l.pidfd = -1
	}
	l.mu.Unlock()
}

// Interface guards.
var (
	_ sandbox.Backend    = (*Backend)(nil)
	_ sandbox.Sandbox    = (*Sandbox)(nil)
	_ sandbox.Closer     = (*Backend)(nil)
	_ sandbox.Reconciler = (*Backend)(nil)
)
