package nsinit

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/execbox/execbox/internal/host/reexec"
)

// execEntry is the reexec entry point of the exec helper: a fresh process
// forked by the init that takes on the program's restrictions and rlimits
// and becomes the program. It is used when an rlimit is process-wide
// (RLIMIT_AS, RLIMIT_DATA, RLIMIT_NPROC, the rootless stand-ins for a
// cgroup): set on the init, such a limit bound the init for the program's
// whole life, below the address space the Go runtime had reserved, and
// the first mapping it needed afterwards (a thread, a span) killed it and
// lost the program's status.
const execEntry = "nsinit-exec"

func init() { reexec.Entry(execEntry, execMain) }

// execPlan is what the init sends the helper.
type execPlan struct {
	Prog   string  `json:"prog"` // c.Args[0] found in PATH
	Config *Config `json:"config"`
}

// The helper's last word before the point of no return is readyByte;
// after it, a failed step sends one step byte and a 4-byte errno, written
// without allocating: the rlimits are set then.
const (
	readyByte   = 'R'
	stepRlimit  = 'l'
	stepExecute = 'x'
)

// processWide says whether ls holds a limit that must not bind the init.
func processWide(ls []Rlimit) bool {
	return slices.ContainsFunc(ls, func(l Rlimit) bool {
		return l.Resource == unix.RLIMIT_AS || l.Resource == unix.RLIMIT_DATA || l.Resource == unix.RLIMIT_NPROC
	})
}

// runHelper runs the program through the exec helper and waits for it.
func runHelper(c *Config, prog string) *Status {
	setupErr := func(err error) *Status { return &Status{Code: CodeSetup, Error: err.Error(), ExitCode: -1} }
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return setupErr(fmt.Errorf("creating the exec helper's socket: %w", err))
	}
	ours := os.NewFile(uintptr(fds[0]), "nsinit-exec")
	defer ours.Close()
	_ = unix.CloseRange(ctlFD, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	// Its environment is empty: the program's reaches it in the plan, not
	// as the helper's own (GODEBUG and the like would steer its runtime).
	pid, err := syscall.ForkExec("/proc/self/exe", []string{reexec.Arg0(execEntry)}, &syscall.ProcAttr{
		Dir:   "/",
		Env:   []string{},
		Files: []uintptr{0, 1, 2, uintptr(fds[1])},
	})
	unix.Close(fds[1])
	if err != nil {
		return setupErr(fmt.Errorf("starting the exec helper: %w", err))
	}
	landlock, failed := helperStatus(ours, WriteMsg(ours, execPlan{Prog: prog, Config: c}), c.Args[0])
	ours.Close() // a helper still reading the plan ends
	ws := Reap(pid)
	if failed != nil {
		failed.Landlock = landlock
		return failed
	}
	st := &Status{Landlock: landlock}
	if ws.Signaled() {
		st.ExitCode, st.Signal = -1, int(ws.Signal())
	} else {
		st.ExitCode = ws.ExitStatus()
	}
	return st
}

// helperStatus reads what the helper says until its end of the socket
// closes: what Landlock enforced, and nil when the program runs (the
// socket closed on exec after the ready byte), else why it does not.
func helperStatus(r io.Reader, werr error, name string) (landlock string, failed *Status) {
	for {
		var b [1]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			if werr != nil {
				return landlock, &Status{Code: CodeSetup, Error: fmt.Sprintf("sending the exec helper its plan: %v", werr), ExitCode: -1}
			}
			return landlock, &Status{Code: CodeSetup, Error: "the exec helper ended before it ran the program", ExitCode: -1}
		}
		if b[0] == readyByte {
			break
		}
		// Else a Status frame, whose length's first byte is 0 (< 16 MiB).
		var rest [3]byte
		if _, err := io.ReadFull(r, rest[:]); err != nil {
			return landlock, &Status{Code: CodeSetup, Error: "the exec helper sent a cut message", ExitCode: -1}
		}
		var m Status
		if err := ReadMsg(io.MultiReader(bytes.NewReader(append(b[:], rest[:]...)), r), &m); err != nil {
			return landlock, &Status{Code: CodeSetup, Error: fmt.Sprintf("reading the exec helper: %v", err), ExitCode: -1}
		}
		if m.Error != "" {
			return landlock, &Status{Code: m.Code, Error: m.Error, ExitCode: -1}
		}
		landlock = m.Landlock
	}
	var fail [5]byte
	n, _ := io.ReadFull(r, fail[:])
	switch {
	case n == 0:
		return landlock, nil // exec closed the socket: the program runs
	case n < len(fail):
		return landlock, &Status{Code: CodeSetup, Error: "the exec helper sent a cut message", ExitCode: -1}
	}
	errno := syscall.Errno(binary.BigEndian.Uint32(fail[1:]))
	if fail[0] == stepExecute {
		return landlock, &Status{Code: ExecErrorCode(errno), Error: fmt.Sprintf("starting %s: %v", name, errno), ExitCode: -1}
	}
	return landlock, &Status{Code: CodeSetup, Error: fmt.Sprintf("setting the rlimits: %v", errno), ExitCode: -1}
}

// execMain is the helper. It restricts its one thread as the init does
// for a program it forks, reports, sets the rlimits and executes the
// program: from the rlimits on it makes raw system calls only, as a new
// mapping would now fail.
func execMain() {
	runtime.LockOSThread()
	ctl := os.NewFile(ctlFD, "nsinit-exec")
	var p execPlan
	if err := ReadMsg(ctl, &p); err != nil || p.Config == nil {
		exit(125)
	}
	_ = unix.CloseRange(ctlFD, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	report := func(code string, err error) {
		_ = WriteMsg(ctl, Status{Code: code, Error: err.Error()})
		exit(125)
	}
	c := p.Config
	desc, err := restrict(c)
	if err != nil {
		report(CodeSetup, err)
	}
	if desc != "" {
		_ = WriteMsg(ctl, Status{Landlock: desc})
	}
	if err := becomeUser(c); err != nil {
		report(CodeSetup, err)
	}
	if err := unix.Chdir(c.Dir); err != nil {
		report(CodeSetup, fmt.Errorf("entering the working directory %s: %w", c.Dir, err))
	}
	prog, err := unix.BytePtrFromString(p.Prog)
	if err != nil {
		report(CodeStartFailed, err)
	}
	argv, err := syscall.SlicePtrFromStrings(c.Args)
	if err != nil {
		report(CodeStartFailed, err)
	}
	envv, err := syscall.SlicePtrFromStrings(c.Env)
	if err != nil {
		report(CodeStartFailed, err)
	}
	rlimits := make([]unix.Rlimit, len(c.Rlimits))
	for i, l := range c.Rlimits {
		rlimits[i] = unix.Rlimit{Cur: l.Cur, Max: l.Max}
	}
	ready := [1]byte{readyByte}
	var fail [5]byte
	debug.SetGCPercent(-1)
	// Raw from here: nothing allocates.
	say := func(step byte, errno syscall.Errno) {
		fail[0] = step
		binary.BigEndian.PutUint32(fail[1:], uint32(errno))
		unix.RawSyscall(unix.SYS_WRITE, ctlFD, uintptr(unsafe.Pointer(&fail[0])), uintptr(len(fail)))
		unix.RawSyscall(unix.SYS_EXIT_GROUP, 125, 0, 0)
	}
	if _, _, errno := unix.RawSyscall(unix.SYS_WRITE, ctlFD, uintptr(unsafe.Pointer(&ready[0])), 1); errno != 0 {
		unix.RawSyscall(unix.SYS_EXIT_GROUP, 125, 0, 0)
	}
	for i, l := range c.Rlimits {
		if _, _, errno := unix.RawSyscall6(unix.SYS_PRLIMIT64, 0, uintptr(l.Resource), uintptr(unsafe.Pointer(&rlimits[i])), 0, 0, 0); errno != 0 {
			say(stepRlimit, errno)
		}
	}
	_, _, errno := unix.RawSyscall(unix.SYS_EXECVE, uintptr(unsafe.Pointer(prog)), uintptr(unsafe.Pointer(&argv[0])), uintptr(unsafe.Pointer(&envv[0])))
	say(stepExecute, errno)
}

// becomeUser gives the calling thread (and so the program it executes)
// the program's ids, as syscall.ForkExec's Credential does in a child:
// no supplementary groups, then the gid, then the uid.
func becomeUser(c *Config) error {
	if !c.NoSetgroups {
		if _, _, errno := unix.RawSyscall(unix.SYS_SETGROUPS, 0, 0, 0); errno != 0 {
			return fmt.Errorf("clearing the supplementary groups: %w", errno)
		}
	}
	if _, _, errno := unix.RawSyscall(unix.SYS_SETGID, uintptr(c.GID), 0, 0); errno != 0 {
		return fmt.Errorf("setting gid %d: %w", c.GID, errno)
	}
	if _, _, errno := unix.RawSyscall(unix.SYS_SETUID, uintptr(c.UID), 0, 0); errno != 0 {
		return fmt.Errorf("setting uid %d: %w", c.UID, errno)
	}
	return nil
}
