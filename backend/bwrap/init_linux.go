package bwrap

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/execbox/execbox/internal/host/nsinit"
	"github.com/execbox/execbox/internal/host/reexec"
)

// The sandbox init is this binary's reexec entry point initEntry, executed
// by bwrap (--as-pid-1) through the fd execbox holds on its own
// executable. It is PID 1 of the sandbox: it reads its config from the
// control socket (nsinit's framing), starts the program, reaps until the
// program ends and reports the exact wait status, which bwrap itself would
// fold into 128+signal.
const (
	initEntry = "bwrap-init"
	ctlFD     = 3 // the control socket, in the init
	exeFD     = 4 // this executable, in the init
)

// initConfig is what the init does; the backend decides all of it.
type initConfig struct {
	Args    []string        `json:"args"`
	Env     []string        `json:"env"`
	Dir     string          `json:"dir"`
	Rlimits []nsinit.Rlimit `json:"rlimits,omitempty"`
}

// initReady is the init's answer to its config: the id of the thread that
// will fork the program, in the sandbox's PID namespace. The parent moves
// that thread into the program's pids leaf and sends goByte.
type initReady struct {
	TID int `json:"tid"`
}

// goByte lets the init fork the program.
const goByte = 'G'

func init() { reexec.Entry(initEntry, initMain) }

// initMain runs the init; anywhere but as a sandbox's PID 1 it refuses.
func initMain() {
	// The program is forked from this thread, which the parent puts in the
	// program's pids leaf; the Go runtime starts its later threads from its
	// template thread (made now, while this thread is still in the
	// sandbox's cgroup), so they stay out of the program's limit.
	runtime.LockOSThread()
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "the bwrap sandbox init runs only as PID 1 of a sandbox")
		reexec.Exit(2)
	}
	ctl := os.NewFile(ctlFD, "ctl")
	if err := nsinit.WriteMsg(ctl, runInit(ctl)); err != nil {
		reexec.Exit(2)
	}
	// Exiting ends the PID namespace: the kernel kills what is left.
	reexec.Exit(0)
}

// runInit runs the program and says how it ended.
func runInit(ctl *os.File) *nsinit.Status {
	fail := func(code string, err error) *nsinit.Status {
		return &nsinit.Status{Code: code, Error: err.Error(), ExitCode: -1}
	}
	// The program may not ptrace us or read our /proc files, and gets no fd
	// but 0-2: everything bwrap passed through is closed at its exec.
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	_ = unix.Close(exeFD)
	_ = unix.CloseRange(ctlFD, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	// PID 1 gets only signals it handles. Catch (and drop) those on which
	// the Go runtime would exit or crash, so the program cannot take the
	// init down with kill(1, …); the others the runtime ignores already.
	// Caught, not ignored: the program's dispositions reset at its exec.
	// (Catching all 64 costs 1.5 ms.)
	sigs := make(chan os.Signal, 64)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT, syscall.SIGILL, syscall.SIGTRAP,
		syscall.SIGABRT, syscall.SIGSTKFLT, syscall.SIGSYS, syscall.SIGBUS, syscall.SIGFPE, syscall.SIGSEGV)
	go func() {
		for range sigs {
		}
	}()

	var c initConfig
	if err := nsinit.ReadMsg(ctl, &c); err != nil {
		return fail(nsinit.CodeSetup, fmt.Errorf("reading the init config: %w", err))
	}
	if len(c.Args) == 0 {
		return fail(nsinit.CodeSetup, errors.New("no program"))
	}
	if err := nsinit.WriteMsg(ctl, initReady{TID: unix.Gettid()}); err != nil {
		return fail(nsinit.CodeSetup, fmt.Errorf("reporting ready: %w", err))
	}
	var g [1]byte
	if n, _ := ctl.Read(g[:]); n != 1 || g[0] != goByte {
		reexec.Exit(2) // placement failed, or the parent went away
	}
	if st, err := os.Stat(c.Dir); err != nil || !st.IsDir() {
		return fail(nsinit.CodeDirNotFound, fmt.Errorf("working directory %s is not a directory in the sandbox", c.Dir))
	}
	prog, err := nsinit.LookPath(c.Args[0], c.Env, c.Dir)
	if err != nil {
		return fail(nsinit.ProgramErrorCode(err), err)
	}
	for _, l := range c.Rlimits {
		// syscall's Setrlimit, so the runtime does not restore its own
		// RLIMIT_NOFILE in the child.
		if err := syscall.Setrlimit(l.Resource, &syscall.Rlimit{Cur: l.Cur, Max: l.Max}); err != nil {
			return fail(nsinit.CodeSetup, fmt.Errorf("setting rlimit %d: %w", l.Resource, err))
		}
	}
	pid, err := syscall.ForkExec(prog, c.Args, &syscall.ProcAttr{Dir: c.Dir, Env: c.Env, Files: []uintptr{0, 1, 2}})
	if err != nil {
		return fail(nsinit.ExecErrorCode(err), fmt.Errorf("starting %s: %w", c.Args[0], err))
	}
	ws := nsinit.Reap(pid)
	if ws.Signaled() {
		return &nsinit.Status{ExitCode: -1, Signal: int(ws.Signal())}
	}
	return &nsinit.Status{ExitCode: ws.ExitStatus()}
}
