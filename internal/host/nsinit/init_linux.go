package nsinit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/execbox/execbox/internal/host/landlock"
	"github.com/execbox/execbox/internal/host/reexec"
)

// ctlFD is the control socket's number in the init (the first ExtraFile).
const ctlFD = 3

func init() { reexec.Entry(EntryName, Main) }

// Main is the init. It runs as PID 1 of the sandbox's namespaces, with fd
// 3 as its control socket, and never returns.
func Main() {
	// Everything below runs on this one thread: the capability sets,
	// seccomp filter and cgroup namespace the program inherits are per
	// thread, and the program is forked from here.
	runtime.LockOSThread()
	// Whatever was inherited stays out of the program.
	_ = unix.CloseRange(ctlFD, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	ctl := os.NewFile(ctlFD, "nsinit-control")
	// The parent learns our host PID from this message's credentials and
	// places us in the cgroup while we set up, this thread (which forks
	// the program; its id follows the version byte) in the program's own
	// leaf; we wait for its go-ahead before the program starts. The
	// runtime's threads started from now on come from its template thread,
	// not from this locked one, so they stay out of the program's leaf.
	if _, err := ctl.Write(binary.BigEndian.AppendUint32([]byte{protocol}, uint32(unix.Gettid()))); err != nil {
		exit(125)
	}
	var cfg Config
	if err := ReadMsg(ctl, &cfg); err != nil {
		exit(125) // the parent went away
	}
	st := run(&cfg, ctl)
	msg, err := frame(st)
	if err == nil {
		_, err = ctl.Write(msg)
	}
	if err != nil {
		exit(125)
	}
	// Exiting as PID 1 makes the kernel kill whatever the program left.
	exit(0)
}

// exit ends the init at once: syscall.Exit skips os.Exit's runtime hooks,
// which have nothing to do here (and sleep a second in race-enabled test
// binaries, which re-execute as the init).
func exit(code int) { syscall.Exit(code) }

// run sets the sandbox up, runs the program and waits for it.
func run(c *Config, ctl *os.File) *Status {
	// The go-ahead: the parent has placed us in the sandbox's cgroup.
	// Without it (placement failed, or the parent went away) nothing runs;
	// and we never report or exit before it either, or the parent would
	// try to place a process that is gone and lose our status.
	awaited := false
	awaitGo := func() {
		if awaited {
			return
		}
		awaited = true
		var b [1]byte
		if n, _ := ctl.Read(b[:]); n != 1 || b[0] != goByte {
			exit(125)
		}
	}
	fail := func(code string, err error) *Status {
		awaitGo()
		return &Status{Code: code, Error: err.Error(), ExitCode: -1}
	}
	if err := c.Validate(); err != nil {
		return fail(CodeSetup, fmt.Errorf("checking config: %w", err))
	}
	if err := setupRoot(c); err != nil {
		return fail(CodeSetup, err)
	}
	if c.Loopback {
		if err := loopbackUp(); err != nil {
			return fail(CodeSetup, err)
		}
	}
	if err := unix.Sethostname([]byte(c.Hostname)); err != nil {
		return fail(CodeSetup, fmt.Errorf("setting hostname: %w", err))
	}
	if st, err := os.Stat(c.Dir); err != nil || !st.IsDir() {
		return fail(CodeDirNotFound, fmt.Errorf("working directory %s is not a directory in the sandbox", c.Dir))
	}
	prog, err := LookPath(c.Args[0], c.Env, c.Dir)
	if err != nil {
		return fail(ProgramErrorCode(err), err)
	}
	awaitGo()
	if c.NewCgroupNS {
		if err := unix.Unshare(unix.CLONE_NEWCGROUP); err != nil {
			return fail(CodeSetup, fmt.Errorf("unsharing the cgroup namespace: %w", err))
		}
	}
	if processWide(c.Rlimits) {
		return runHelper(c, prog)
	}
	st := &Status{}
	desc, err := restrict(c)
	if err != nil {
		return fail(CodeSetup, err)
	}
	st.Landlock = desc
	if err := setRlimits(c.Rlimits); err != nil {
		return fail(CodeSetup, err)
	}
	// Nothing but 0-2 may reach the program.
	_ = unix.CloseRange(ctlFD, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	cred := &syscall.Credential{Uid: uint32(c.UID), Gid: uint32(c.GID), Groups: []uint32{}, NoSetGroups: c.NoSetgroups}
	pid, err := syscall.ForkExec(prog, c.Args, &syscall.ProcAttr{
		Dir:   c.Dir,
		Env:   c.Env,
		Files: []uintptr{0, 1, 2},
		Sys:   &syscall.SysProcAttr{Credential: cred},
	})
	if err != nil {
		return fail(ExecErrorCode(err), fmt.Errorf("starting %s: %w", c.Args[0], err))
	}
	ws := Reap(pid)
	switch {
	case ws.Signaled():
		st.ExitCode, st.Signal = -1, int(ws.Signal())
	default:
		st.ExitCode = ws.ExitStatus()
	}
	return st
}

// Reap waits for pid, reaping every other child (orphans re-parented to
// PID 1) on the way. Any PID-1 init of a sandbox uses it.
func Reap(pid int) unix.WaitStatus {
	for {
		var ws unix.WaitStatus
		got, err := unix.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			// ECHILD cannot happen before pid is reaped; report a kill.
			return unix.WaitStatus(unix.SIGKILL)
		}
		if got == pid {
			return ws
		}
	}
}

// LookPath finds prog as a shell would, with the program's own PATH, in
// the (new) root it is called in. Its error is a *ProgramError: CodeNotFound
// when there is no such program, CodeNotExecutable when there is one that
// cannot be executed (a directory or other non-regular file, or one
// without an execute bit).
func LookPath(prog string, env []string, dir string) (string, error) {
	if strings.Contains(prog, "/") {
		p := prog
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if err := checkExecutable(p); err != nil {
			err.Msg = fmt.Sprintf("program %q: %s", prog, err.Msg)
			return "", err
		}
		return prog, nil
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, d := range filepath.SplitList(path) {
		if !filepath.IsAbs(d) {
			continue
		}
		if p := filepath.Join(d, prog); checkExecutable(p) == nil {
			return p, nil
		}
	}
	return "", &ProgramError{Code: CodeNotFound, Msg: fmt.Sprintf("program %q not found in the sandbox's PATH", prog)}
}

// ProgramError says why a program cannot be started: Code is CodeNotFound
// (exit 127, like a shell) or CodeNotExecutable (exit 126).
type ProgramError struct {
	Code string
	Msg  string
}

func (e *ProgramError) Error() string { return e.Msg }

// ProgramErrorCode is err's Code when it is a *ProgramError, else
// CodeStartFailed.
func ProgramErrorCode(err error) string {
	var pe *ProgramError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return CodeStartFailed
}

// ExecErrorCode classifies a failed fork and exec of the program as a
// shell does: ENOENT (no such file, or a script's interpreter missing) is
// CodeNotFound; the errors by which execve refuses a file that is there
// (EACCES, ENOEXEC, EISDIR, ENOTDIR, ETXTBSY, ELOOP, ENAMETOOLONG) are
// CodeNotExecutable; anything else is CodeStartFailed.
func ExecErrorCode(err error) string {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return CodeStartFailed
	}
	switch errno {
	case unix.ENOENT:
		return CodeNotFound
	case unix.EACCES, unix.ENOEXEC, unix.EISDIR, unix.ENOTDIR, unix.ETXTBSY, unix.ELOOP, unix.ENAMETOOLONG:
		return CodeNotExecutable
	}
	return CodeStartFailed
}

func checkExecutable(p string) *ProgramError {
	st, err := os.Stat(p)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return &ProgramError{Code: CodeNotFound, Msg: "not found in the sandbox"}
	case err != nil:
		return &ProgramError{Code: CodeNotExecutable, Msg: "cannot be executed: " + errors.Unwrap(err).Error()}
	case st.IsDir():
		return &ProgramError{Code: CodeNotExecutable, Msg: "is a directory"}
	case !st.Mode().IsRegular():
		return &ProgramError{Code: CodeNotExecutable, Msg: "not a regular file"}
	case st.Mode().Perm()&0o111 == 0:
		return &ProgramError{Code: CodeNotExecutable, Msg: "not executable (no execute permission)"}
	}
	return nil
}

// loopbackUp brings lo up, so the program can talk to itself over
// 127.0.0.1 while nothing else is reachable.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("bringing lo up: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("bringing lo up: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bringing lo up: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bringing lo up: %w", err)
	}
	return nil
}

// restrict applies to the calling thread what the program inherits from
// it: Landlock (its description returned), empty capability sets but the
// effective and permitted ones the change of ids needs, no_new_privs and
// the seccomp filter.
func restrict(c *Config) (string, error) {
	desc := ""
	if c.Landlock != nil {
		d, err := landlock.RestrictThread([]string{"/"}, c.Landlock.RW)
		if err != nil {
			return "", fmt.Errorf("restricting with landlock: %w", err)
		}
		desc = d
	}
	if err := dropCapabilities(); err != nil {
		return "", err
	}
	if err := installSeccomp(c.Seccomp); err != nil {
		return "", err
	}
	return desc, nil
}

// setRlimits sets the program's limits on the init, which the fork copies:
// only those that bind each process on its own (see processWide).
// syscall.Setrlimit (not unix's) so the runtime does not restore its own
// RLIMIT_NOFILE in the child.
func setRlimits(ls []Rlimit) error {
	for _, l := range ls {
		if err := syscall.Setrlimit(l.Resource, &syscall.Rlimit{Cur: l.Cur, Max: l.Max}); err != nil {
			return fmt.Errorf("setting rlimit %d to %d/%d: %w", l.Resource, l.Cur, l.Max, err)
		}
	}
	return nil
}
