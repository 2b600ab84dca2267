package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"slices"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/execbox/execbox/internal/host/proc"
	"github.com/execbox/execbox/internal/host/reexec"
	"github.com/execbox/execbox/sandbox"
)

// reaperConfig is what the reaper and the exec stage need besides the
// program's argv; it travels as argv[1] (it holds no secret).
type reaperConfig struct {
	Path    string         `json:"path"`    // the program, resolved
	Rlimits map[int]uint64 `json:"rlimits"` // resource → limit (soft = hard, except CPU)
}

// status is written by the reaper on fd 3: how the program ended.
type status struct {
	Exit   int `json:"exit"`
	Signal int `json:"signal"`
}

// reaperMain runs as the entry point "local-reaper": argv = config, program
// argv. It forks the exec stage, which sets the rlimits and execs the
// program: the limits bind the program only, never the Go reaper (whose
// runtime, race-instrumented in tests, needs more than a program may get).
func reaperMain() {
	unix.CloseOnExec(3)
	fail := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "execbox local reaper: "+format+"\n", args...)
		reexec.Exit(125)
	}
	if len(os.Args) < 3 {
		fail("usage: config program [args...]")
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fail("becoming subreaper: %v", err)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT, unix.SIGHUP)

	argv := append([]string{reexec.Arg0("local-exec")}, os.Args[1:]...)
	// The program dies with the reaper even if the reaper is SIGKILLed
	// before it could kill the tree.
	pid, err := syscall.ForkExec("/proc/self/exe", argv, &syscall.ProcAttr{
		Env: os.Environ(), Files: []uintptr{0, 1, 2},
		Sys: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		fail("starting the exec stage: %v", err)
	}

	type event struct {
		pid int
		ws  unix.WaitStatus
		err error
	}
	events := make(chan event)
	go func() {
		for {
			var ws unix.WaitStatus
			p, err := unix.Wait4(-1, &ws, 0, nil)
			if err == unix.EINTR {
				continue
			}
			events <- event{p, ws, err}
			if err != nil {
				return
			}
		}
	}()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	st := status{Exit: 125}
	draining := false
	for {
		select {
		case ev := <-events:
			if ev.err != nil { // ECHILD: no child left, so no descendant either
				writeStatus(st)
				reexec.Exit(0)
			}
			if ev.pid == pid {
				st = status{Exit: ev.ws.ExitStatus()}
				if ev.ws.Signaled() {
					st = status{Exit: -1, Signal: int(ev.ws.Signal())}
				}
				draining = true
			}
			if draining {
				killDescendants()
			}
		case <-sigs:
			draining = true
			killDescendants()
		case <-tick.C:
			if draining {
				killDescendants()
			}
		}
	}
}

// execMain runs as the entry point "local-exec": argv = config, program
// argv. It sets the program's rlimits and replaces itself with the program.
func execMain() {
	fail := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "execbox local: "+format+"\n", args...)
		reexec.Exit(127)
	}
	var cfg reaperConfig
	if len(os.Args) < 3 || json.Unmarshal([]byte(os.Args[1]), &cfg) != nil {
		fail("bad exec stage arguments")
	}
	// After the limits, no Go code may need memory: under a memory
	// rlimit below what the runtime (race-instrumented, in tests) already
	// maps, any new mapping kills it ("fatal error: runtime: out of
	// memory", exit 2). So everything execve needs is built first, and
	// the limits and execve are raw system calls with nothing between.
	path, err1 := syscall.BytePtrFromString(cfg.Path)
	argv, err2 := syscall.SlicePtrFromStrings(os.Args[2:])
	envv, err3 := syscall.SlicePtrFromStrings(os.Environ())
	if err := errors.Join(err1, err2, err3); err != nil {
		fail("preparing %s: %v", cfg.Path, err)
	}
	type limit struct {
		res int
		rl  unix.Rlimit
	}
	var limits []limit
	for res, lim := range cfg.Rlimits {
		rl := unix.Rlimit{Cur: lim, Max: lim}
		if res == unix.RLIMIT_CPU {
			rl.Max = lim + 1 // SIGXCPU at the soft limit, SIGKILL a second later
		}
		limits = append(limits, limit{res, rl})
	}
	prefix := []byte("execbox local: executing " + cfg.Path + ": ")
	runtime.LockOSThread()
	debug.SetGCPercent(-1)
	for i := range limits {
		l := &limits[i]
		if _, _, e := unix.RawSyscall6(unix.SYS_PRLIMIT64, 0, uintptr(l.res), uintptr(unsafe.Pointer(&l.rl)), 0, 0, 0); e != 0 {
			rawFail(prefix, e, 127)
		}
	}
	_, _, e := unix.RawSyscall(unix.SYS_EXECVE, uintptr(unsafe.Pointer(path)), uintptr(unsafe.Pointer(&argv[0])), uintptr(unsafe.Pointer(&envv[0])))
	// As a shell does: 127 when there is no such file (or no interpreter
	// for a script), 126 when execve refused a file that is there.
	if e == unix.ENOENT {
		rawFail(prefix, e, sandbox.ExitNotFound)
	}
	rawFail(prefix, e, sandbox.ExitNotExecutable)
}

// rawFail writes prefix and errno's text to stderr and exits with code,
// allocating nothing (the limits may forbid it).
func rawFail(prefix []byte, e unix.Errno, code int) {
	msg := e.Error() // a constant of the errno table
	unix.RawSyscall(unix.SYS_WRITE, 2, uintptr(unsafe.Pointer(&prefix[0])), uintptr(len(prefix)))
	unix.RawSyscall(unix.SYS_WRITE, 2, uintptr(unsafe.Pointer(unsafe.StringData(msg))), uintptr(len(msg)))
	nl := byte('\n')
	unix.RawSyscall(unix.SYS_WRITE, 2, uintptr(unsafe.Pointer(&nl)), 1)
	reexec.Exit(code)
}

func writeStatus(st status) {
	f := os.NewFile(3, "status")
	if f == nil {
		return
	}
	b, _ := json.Marshal(st)
	f.Write(b)
	f.Close()
}

// killDescendants SIGKILLs every process whose parent chain leads to us,
// parents before their children: a shell killed after its child could
// still run its next command ("sleep 25; echo done" would print done).
// Orphans are reparented to us (we are the subreaper), so repeated passes
// catch processes forked during a pass.
func killDescendants() {
	self := os.Getpid()
	parent := proc.Parents()
	type victim struct{ pid, depth int }
	var victims []victim
	for pid := range parent {
		for p, depth := parent[pid], 1; p > 1 && depth < 1<<16; p, depth = parent[p], depth+1 {
			if p == self {
				victims = append(victims, victim{pid, depth})
				break
			}
		}
	}
	slices.SortFunc(victims, func(a, b victim) int { return a.depth - b.depth })
	for _, v := range victims {
		unix.Kill(v.pid, unix.SIGKILL)
	}
}
