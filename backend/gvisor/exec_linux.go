package gvisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/execbox/execbox/internal/host/cgroups"
	"github.com/execbox/execbox/internal/host/proc"
	"github.com/execbox/execbox/internal/host/workdir"
	"github.com/execbox/execbox/sandbox"
)

// run runs p in a fresh gVisor sandbox under this sandbox's cgroup.
func (s *Sandbox) run(ctx context.Context, p *sandbox.Process) (*sandbox.Result, error) {
	if err := s.Work.CheckDir(p.Dir); err != nil {
		return nil, err
	}
	if err := s.writeBundle(p); err != nil {
		return nil, sandbox.Errorf(sandbox.ErrInternal, "bundle_failed", "preparing the sandbox: %w", err)
	}
	if err := os.Remove(s.paths.errorLog()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, sandbox.Errorf(sandbox.ErrInternal, "bundle_failed", "clearing runsc's log: %w", err)
	}
	log, err := openRunLog(s.paths.runLog())
	if err != nil {
		return nil, sandbox.Errorf(sandbox.ErrInternal, "bundle_failed", "%w", err)
	}

	l := p.LimitsFor(s.Spec.Limits)
	cmd := s.host.Own.runsc.runCmd(s.paths, s.Spec.Policy.Network, s.cid)
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	cpuHit := s.watchCPU(l.CPUTime, stopRun)
	sp := *p
	var live *liveStderr
	if p.Stderr != nil {
		live = newLiveStderr(p.Stderr)
		sp.Stderr = live
		defer live.end(nil)
	}
	out, err := proc.Run(runCtx, cmd, s.Supervision(&sp, func() error { return s.kill(cmd.Process) }))
	overCPU := cpuHit()
	// No process of the run is left after cleanup (the cgroup is swept),
	// so nothing writes to the log any more.
	cleanErr := errors.Join(s.cleanup(), log.Close())
	s.lastLog = log
	if err != nil {
		return nil, sandbox.Errorf(sandbox.ErrInternal, "start_failed", "starting runsc: %w", err)
	}
	res := s.Result(out)
	if overCPU && out.Reason == sandbox.ReasonCanceled && ctx.Err() == nil {
		res.Reason = sandbox.ReasonCPULimit
		res.Message = fmt.Sprintf("the CPU time limit of %v was reached (the sandbox's cgroup: sentry, gofer and program together)", l.CPUTime)
	}
	ws, ok := log.status(cmd.Process.Pid)
	switch {
	case out.Killed():
		// We killed the sandbox, and the program with it.
		res.ExitCode, res.Signal = -1, "SIGKILL"
	case ok:
		res.ExitCode, res.Signal, res.Reason = ws.ExitStatus(), "", sandbox.ReasonExited
		if ws.Signaled() {
			res.ExitCode, res.Signal = -1, unix.SignalName(ws.Signal())
			res.Reason = sandbox.ReasonOf(ws.Signal())
		}
	default:
		// runsc failed: its own error, which it printed to the program's
		// stderr too, is the result's message, never the program's output.
		msgs := runscErrors(s.paths.errorLog())
		res.Stderr = withoutRunsc(res.Stderr, msgs)
		if live != nil {
			live.end(msgs)
		}
		msg := strings.Join(msgs, "; ")
		if code, why, ok := startFailure(p.Args[0], msg); ok {
			res.Reason, res.ExitCode, res.Signal, res.Message = sandbox.ReasonExited, code, "", why
			break
		}
		if msg == "" {
			// Not even an error of its own: what it printed, or its log.
			msg = strings.TrimSpace(res.Stderr)
		}
		if msg == "" && len(log.tail) > 0 {
			msg = "its log ends: " + strings.Join(log.tail[max(len(log.tail)-3, 0):], " | ")
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
	s.account(res, out.Killed())
	if log.forkFailed > 0 && !out.Killed() && !res.Succeeded() && (res.Reason == sandbox.ReasonExited || res.Reason == sandbox.ReasonSignaled) {
		// The sentry refused a fork: its RLIMIT_NPROC is Limits.Pids, the
		// program's tasks (threads included).
		res.Reason = sandbox.ReasonPidsLimit
		res.Message = fmt.Sprintf("the limit of %d processes was reached (a fork or clone failed %d time(s))", l.Pids, log.forkFailed)
	} else if log.forkFailed > 0 && res.Succeeded() {
		res.Message = fmt.Sprintf("the limit of %d processes was reached (a fork or clone failed %d time(s)); the program went on and exited 0", l.Pids, log.forkFailed)
	}
	if cleanErr != nil && res.Reason != sandbox.ReasonSandboxError {
		// The program ran, but something of the run may be left; say so
		// rather than hide it.
		res.Message = strings.TrimSpace(res.Message + " (cleaning up after runsc: " + cleanErr.Error() + ")")
	}
	return res, nil
}

// account adds the cgroup's view: usage, and an OOM kill as the reason the
// run ended. The counters include the sentry and the gofer.
func (s *Sandbox) account(res *sandbox.Result, killed bool) {
	// The host pids limit is only a backstop (the sentry enforces
	// Limits.Pids), so a refused fork there is not the program's limit.
	l := s.Spec.Limits
	l.Pids = 0
	if s.Account(res, killed, l) == sandbox.ReasonMemoryLimit {
		// The OOM killer takes the sentry: the whole sandbox, not a process in it.
		res.ExitCode, res.Signal = -1, "SIGKILL"
		res.Message = fmt.Sprintf("the memory limit of %d bytes was reached; the host kernel's OOM killer ended the gVisor sandbox", l.Memory)
	}
}

// cpuPoll is how often the CPU time of a running sandbox is checked.
const cpuPoll = 100 * time.Millisecond

// watchCPU calls stop once the sandbox's cgroup has used limit of CPU time
// since the call. The returned func stops watching and reports whether the
// limit was hit. Without a cgroup it does nothing.
func (s *Sandbox) watchCPU(limit time.Duration, stop context.CancelFunc) func() bool {
	if s.Cgroup == nil || limit <= 0 {
		return func() bool { return false }
	}
	base, err := s.Cgroup.Stats()
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
			if st, err := s.Cgroup.Stats(); err == nil && st.CPU-base.CPU >= limit {
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
		if err := s.host.Own.runsc.kill(s.paths, s.cid); err == nil {
			waitExit(p, runscTeardown)
		}
	}
	if s.Cgroup != nil {
		errs = append(errs, sweep(s.Cgroup))
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
		pids, err := cg.Procs()
		if err != nil {
			return cg.Kill()
		}
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

// cleanup removes what a run may leave: mounts runsc made in its root
// (newer releases pin a network namespace there unless told otherwise),
// runsc's state (only when runsc did not remove it itself, i.e. it was
// killed) and cgroup leaves runsc made in hierarchies other than ours.
func (s *Sandbox) cleanup() error {
	var errs []error
	if err := workdir.UnmountUnder(s.paths.state); err != nil {
		errs = append(errs, err)
	}
	if ents, err := os.ReadDir(s.paths.state); err == nil && len(ents) > 0 {
		if err := s.host.Own.runsc.delete(s.paths, s.cid); err != nil {
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
	if s.Cgroup != nil {
		if err := sweep(s.Cgroup); err != nil {
			errs = append(errs, err)
		}
		removeExtra(s.host.Own.hier, s.Cgroup.Name(), s.Cgroup.Dirs()...)
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

// Interface guards.
var (
	_ sandbox.Backend    = (*Backend)(nil)
	_ sandbox.Sandbox    = (*Sandbox)(nil)
	_ sandbox.Closer     = (*Backend)(nil)
	_ sandbox.Reconciler = (*Backend)(nil)
)
