package proc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/execbox/execbox/sandbox"
)

// DefaultGrace is how long output is still collected after a kill.
const DefaultGrace = 3 * time.Second

// Options bound and wire one supervised run.
type Options struct {
	Wall            time.Duration // wall-clock limit; must be > 0
	Output          int64         // bytes kept per stream
	OutputLimitKill bool          // end the run when a stream passes Output
	Stdin           io.Reader     // nil: the program reads EOF
	Stdout, Stderr  io.Writer     // optional live copies of the output
	TeeAll          bool          // the live copies get all of it, not only what Output keeps
	// Kill ends the whole process tree. It is called on timeout, cancel or
	// output limit, and after the main process exits; it must be idempotent.
	// Nil means killing the main process only.
	Kill  func() error
	Grace time.Duration // output collection after a kill; 0 means DefaultGrace
}

// Outcome is how a supervised run ended.
type Outcome struct {
	Reason         sandbox.Reason // exited, signaled, timeout, canceled or output_limit
	ExitCode       int            // -1 when a signal ended the main process
	Signal         string         // e.g. "SIGKILL"
	Stdout, Stderr *sandbox.Capture
	Wall           time.Duration
	State          *os.ProcessState
	KillErr        error // the first error Kill returned, if any
}

// Run starts cmd and supervises it to the end. cmd's Stdin, Stdout and
// Stderr must be nil; everything else (SysProcAttr, ExtraFiles, Env) is the
// caller's. The error is non-nil only when the process could not be started.
func Run(ctx context.Context, cmd *exec.Cmd, o Options) (*Outcome, error) {
	if cmd.Stdin != nil || cmd.Stdout != nil || cmd.Stderr != nil {
		return nil, errors.New("proc: cmd streams must be nil")
	}
	if o.Wall <= 0 {
		return nil, errors.New("proc: no wall-clock limit")
	}
	if o.Grace == 0 {
		o.Grace = DefaultGrace
	}
	out := &Outcome{}
	var overflow <-chan struct{}
	out.Stdout, out.Stderr, overflow = sandbox.NewOutputs(o.Output, o.OutputLimitKill, o.Stdout, o.Stderr)
	if o.TeeAll {
		out.Stdout.TeeAll()
		out.Stderr.TeeAll()
	}

	var parentEnds, childEnds []*os.File
	closeAll := func(fs []*os.File) {
		for _, f := range fs {
			f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err != nil {
			closeAll(parentEnds)
			closeAll(childEnds)
		}
		return r, w, err
	}
	outR, outW, err := pipe()
	if err != nil {
		return nil, fmt.Errorf("creating stdout pipe: %w", err)
	}
	parentEnds, childEnds = append(parentEnds, outR), append(childEnds, outW)
	errR, errW, err := pipe()
	if err != nil {
		return nil, fmt.Errorf("creating stderr pipe: %w", err)
	}
	parentEnds, childEnds = append(parentEnds, errR), append(childEnds, errW)
	cmd.Stdout, cmd.Stderr = outW, errW
	// Stdin is always a pipe of its own, empty and closed when there is no
	// input: a nil one would be the host's /dev/null, which a runtime such
	// as runsc chowns to the sandbox's user, and a program could then
	// chmod through /proc/self/fd/0.
	inR, inW, err := pipe()
	if err != nil {
		return nil, fmt.Errorf("creating stdin pipe: %w", err)
	}
	childEnds = append(childEnds, inR)
	cmd.Stdin = inR
	if o.Stdin == nil {
		inW.Close() // the program reads EOF
		inW = nil
	} else {
		parentEnds = append(parentEnds, inW)
	}

	start := time.Now()
	if err := cmd.Start(); err != nil {
		closeAll(parentEnds)
		closeAll(childEnds)
		return nil, fmt.Errorf("starting process: %w", err)
	}
	closeAll(childEnds)

	var readers sync.WaitGroup
	readers.Go(func() { io.Copy(out.Stdout, outR) })
	readers.Go(func() { io.Copy(out.Stderr, errR) })
	if inW != nil {
		// Not waited for: a program that never reads its stdin gets EPIPE on
		// our side once it is gone, which ends the copy.
		go func() {
			io.Copy(inW, o.Stdin)
			inW.Close()
		}()
	}

	var killOnce sync.Once
	kill := func() {
		killOnce.Do(func() {
			if o.Kill != nil {
				out.KillErr = o.Kill()
			} else {
				out.KillErr = cmd.Process.Kill()
			}
		})
	}
	waited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(waited)
	}()

	timer := time.NewTimer(o.Wall)
	defer timer.Stop()
	if ctx.Err() != nil {
		// Done before the program could run: canceled, never what a
		// quick program got done first (select picks at random among
		// ready cases; under load /bin/true had exited by now).
		out.Reason = sandbox.ReasonCanceled
	} else {
		select {
		case <-waited:
		case <-timer.C:
			out.Reason = sandbox.ReasonTimeout
		case <-ctx.Done():
			out.Reason = sandbox.ReasonCanceled
		case <-overflow:
			out.Reason = sandbox.ReasonOutputLimit
		}
	}
	kill()
	select {
	case <-waited:
	case <-time.After(o.Grace):
		// Kill did not end the main process; do it directly (and its
		// process group, when it has one of its own), then wait: a
		// SIGKILLed child always ends.
		if cmd.SysProcAttr != nil && cmd.SysProcAttr.Setpgid {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
		cmd.Process.Kill()
		<-waited
	}
	out.Wall = time.Since(start)

	drained := make(chan struct{})
	go func() {
		readers.Wait()
		close(drained)
	}()
	select {
	case <-drained:
	case <-time.After(o.Grace):
		// Something outside the tree holds the pipes; stop reading.
		outR.Close()
		errR.Close()
		<-drained
	}
	outR.Close()
	errR.Close()
	if inW != nil {
		inW.Close()
	}

	out.State = cmd.ProcessState
	ws, _ := out.State.Sys().(syscall.WaitStatus)
	out.ExitCode = ws.ExitStatus()
	if ws.Signaled() {
		out.ExitCode = -1
		out.Signal = unix.SignalName(ws.Signal())
	}
	if out.Reason == "" && o.OutputLimitKill && (out.Stdout.Truncated() || out.Stderr.Truncated()) {
		// It passed the cap and ended by itself before the kill landed
		// (its last write, then exit): the reason must not depend on
		// which was faster.
		out.Reason = sandbox.ReasonOutputLimit
	}
	if out.Reason == "" {
		out.Reason = sandbox.ReasonExited
		if ws.Signaled() {
			out.Reason = sandbox.ReasonSignaled
		}
	}
	return out, nil
}

// Result is the sandbox.Result of this outcome for sandbox id of backend
// with isolation iso: how it ended, the captured streams and the wall time.
// The caller adds the rest (Enforcement, finer reasons, usage, Message).
func (o *Outcome) Result(id, backend string, iso sandbox.Isolation) *sandbox.Result {
	return &sandbox.Result{
		ID: id, Backend: backend, Isolation: iso,
		Reason: o.Reason, ExitCode: o.ExitCode, Signal: o.Signal,
		Stdout: o.Stdout.String(), Stderr: o.Stderr.String(),
		StdoutTruncated: o.Stdout.Truncated(), StderrTruncated: o.Stderr.Truncated(),
		Usage: sandbox.Usage{Wall: o.Wall},
	}
}

// Usage is the wall time plus the CPU time and peak memory the kernel
// accounted to the main process and the children it waited for.
func (o *Outcome) Usage() sandbox.Usage {
	u := sandbox.Usage{Wall: o.Wall}
	if ru, ok := o.State.SysUsage().(*syscall.Rusage); ok && ru != nil {
		u.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		u.PeakMemory = ru.Maxrss * 1024
	}
	return u
}

// Killed reports whether the supervisor ended the run (timeout, cancel or
// output limit) rather than the program ending by itself.
func (o *Outcome) Killed() bool {
	return o.Reason == sandbox.ReasonTimeout || o.Reason == sandbox.ReasonCanceled || o.Reason == sandbox.ReasonOutputLimit
}

// PrivateStdio gives cmd a stream of its own for each of stdin, stdout
// and stderr it has none for: stdin reads EOF, output is dropped. os/exec
// would hand the child the host's /dev/null instead, and a runtime (runsc)
// chowns the stdio files it is handed to its sandbox's user. Every child a
// backend starts gets private streams, this way or from Run.
func PrivateStdio(cmd *exec.Cmd) {
	if cmd.Stdin == nil {
		cmd.Stdin = strings.NewReader("")
	}
	if cmd.Stdout == nil {
		cmd.Stdout = io.Discard
	}
	if cmd.Stderr == nil {
		cmd.Stderr = io.Discard
	}
}
