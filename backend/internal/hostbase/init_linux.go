package hostbase

import (
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/execbox/execbox/internal/host/nsinit"
	"github.com/execbox/execbox/sandbox"
)

// Rlimits are the program's rlimits under l. Without a cgroup, RLIMIT_AS
// and RLIMIT_NPROC (counted per user namespace, so per sandbox; plus
// tasks for the backend's own) stand in for the memory and pids
// controllers, and Enforcement says so.
func Rlimits(l sandbox.Limits, cgroup bool, tasks int) []nsinit.Rlimit {
	cpu := uint64(max(l.CPUTime/time.Second, 1))
	rl := []nsinit.Rlimit{
		{Resource: unix.RLIMIT_NOFILE, Cur: uint64(l.NoFile), Max: uint64(l.NoFile)},
		{Resource: unix.RLIMIT_FSIZE, Cur: uint64(l.FileSize), Max: uint64(l.FileSize)},
		// SIGXCPU at the soft limit (reason cpu_limit), SIGKILL a second later.
		{Resource: unix.RLIMIT_CPU, Cur: cpu, Max: cpu + 1},
		// No core files: they would land in /work.
		{Resource: unix.RLIMIT_CORE, Cur: 0, Max: 0},
	}
	if !cgroup {
		rl = append(rl,
			nsinit.Rlimit{Resource: unix.RLIMIT_AS, Cur: uint64(l.Memory), Max: uint64(l.Memory)},
			nsinit.Rlimit{Resource: unix.RLIMIT_NPROC, Cur: uint64(l.Pids + tasks), Max: uint64(l.Pids + tasks)},
		)
	}
	return rl
}

// InitResult completes res from what the sandbox's init (internal/host/nsinit's
// protocol) reported: st, or nil when it ended without a report, lost then
// saying why. killed: execbox killed the run (timeout, cancel, output
// limit), so a missing report means the program died of that SIGKILL. A
// program that is not there or cannot be executed ended like a shell says
// (reason exited, sandbox.ExitNotFound or sandbox.ExitNotExecutable, the
// cause in Message); a working directory that is not there is the caller's
// mistake, returned as ErrInvalid.
func InitResult(res *sandbox.Result, killed bool, st *nsinit.Status, lost string) error {
	switch {
	case st == nil && killed:
		res.ExitCode, res.Signal = -1, "SIGKILL"
	case st == nil:
		res.Reason, res.ExitCode, res.Signal = sandbox.ReasonSandboxError, -1, ""
		res.Message = lost
	case st.Code == nsinit.CodeNotFound && !killed:
		res.Reason, res.ExitCode, res.Signal, res.Message = sandbox.ReasonExited, sandbox.ExitNotFound, "", st.Error
	case st.Code == nsinit.CodeNotExecutable && !killed:
		res.Reason, res.ExitCode, res.Signal, res.Message = sandbox.ReasonExited, sandbox.ExitNotExecutable, "", st.Error
	case st.Code == nsinit.CodeDirNotFound:
		return sandbox.Errorf(sandbox.ErrInvalid, st.Code, "%s", st.Error)
	case st.Error != "":
		res.Reason, res.ExitCode, res.Signal = sandbox.ReasonSandboxError, -1, ""
		res.Message = "setting up the sandbox: " + st.Error
	default:
		res.ExitCode, res.Signal = st.ExitCode, ""
		if st.Signal != 0 {
			res.Signal = unix.SignalName(syscall.Signal(st.Signal))
		}
		if !killed {
			res.Reason = sandbox.ReasonOf(syscall.Signal(st.Signal))
		}
		if st.Landlock != "" {
			res.Enforcement["landlock"] = st.Landlock
		}
	}
	return nil
}
