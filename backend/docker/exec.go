package docker

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/events"
	"github.com/moby/moby/client"
	"golang.org/x/sys/unix"

	"github.com/execbox/execbox/sandbox"
)

// wrapper is the shell every program runs under, as
//
//	env -i VARS... /bin/sh -c wrapper execbox TOKEN DIR PROGRAM ARGS...
//
// env -i drops the image's own ENV (only allowlisted variables reach the
// program). Before the program it kills what an earlier run left behind and
// checks the directory and the program; after the program it kills the
// program's whole tree — everything in the container but the keeper (PID
// 1) and itself, which is what kill -1 means inside a PID namespace — and
// exits with the program's status (128+N for a signal, as Docker reports
// it). Its own complaints start with "execbox-TOKEN:", a token the program
// is not told.
const wrapper = `t=$1 d=$2; shift 2
kill -9 -1 2>/dev/null
cd -- "$d" 2>/dev/null || { printf '%s\n' "execbox-$t: no such directory" >&2; exit 127; }
unset OLDPWD PWD
command -v -- "$1" >/dev/null 2>&1 || { printf '%s\n' "execbox-$t: not found" >&2; exit 127; }
"$@"
s=$?
kill -9 -1 2>/dev/null
exit $s`

// killAll kills every process of the container but the keeper.
var killAll = []string{"/bin/sh", "-c", "kill -9 -1 2>/dev/null; kill -9 -1 2>/dev/null; exit 0"}

// grace is how long output is still collected after a kill.
const grace = 3 * time.Second

// opTimeout bounds the short control-plane calls around an exec.
const opTimeout = 30 * time.Second

func token() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// execEnd is how one exec ended.
type execEnd struct {
	reason   sandbox.Reason // set when execbox ended it: timeout, canceled, output_limit
	exitCode int            // as Docker reports it: 128+N for a signal
	wall     time.Duration
	execID   string
	killErr  error // the tree could not be killed inside; the container was killed
}

// execSpec is one exec to run in a container.
type execSpec struct {
	cmd            []string
	stdin          io.Reader
	stdout, stderr io.Writer
	wall           time.Duration
	overflow       <-chan struct{} // closed when an output cap with kill is passed
}

// runExec runs e in c to its end: it attaches stdin, stdout and stderr,
// enforces the wall-clock limit, and on timeout, cancel or overflow kills
// the whole tree inside the container (or the container, if that fails).
// The error is non-nil only when the exec could not be started.
func (b *Backend) runExec(ctx context.Context, c *ctr, e execSpec) (*execEnd, error) {
	octx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	done := b.timed("exec-create")
	ex, err := b.cli.ExecCreate(octx, c.id, client.ExecCreateOptions{
		Cmd: e.cmd, User: sandboxUser, WorkingDir: workDir,
		AttachStdin: true, AttachStdout: true, AttachStderr: true,
	})
	done()
	if err != nil {
		return nil, b.execFailed(c, err, "creating an exec in")
	}
	done = b.timed("exec-start")
	hj, err := b.cli.ExecAttach(octx, ex.ID, client.ExecAttachOptions{})
	done()
	if err != nil {
		return nil, b.execFailed(c, err, "starting an exec in")
	}
	start := time.Now()
	streamDone := b.timed("exec-stream")
	end := &execEnd{execID: ex.ID}
	if e.stdin == nil {
		hj.CloseWrite()
	} else {
		// Not waited for: closing the connection below ends a copy that
		// the program never reads.
		go func() {
			io.Copy(hj.Conn, e.stdin)
			hj.CloseWrite()
		}()
	}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		stdcopy.StdCopy(e.stdout, e.stderr, hj.Reader)
	}()
	timer := time.NewTimer(e.wall)
	defer timer.Stop()
	select {
	case <-copied:
	case <-timer.C:
		end.reason = sandbox.ReasonTimeout
	case <-ctx.Done():
		end.reason = sandbox.ReasonCanceled
	case <-e.overflow:
		end.reason = sandbox.ReasonOutputLimit
	}
	if end.reason != "" {
		end.killErr = b.killTree(context.WithoutCancel(ctx), c)
		select {
		case <-copied:
		case <-time.After(grace):
		}
	}
	end.wall = time.Since(start)
	hj.Close()
	<-copied
	streamDone()
	defer b.timed("exec-inspect")()

	// The stream ends when the exec's process exits (the engine closes it at
	// most 2 s later even if an orphan still holds it); the exit code may
	// trail the stream by a moment.
	ictx, icancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
	defer icancel()
	for i := 0; ; i++ {
		in, err := b.cli.ExecInspect(ictx, ex.ID, client.ExecInspectOptions{})
		if err != nil {
			if end.reason != "" {
				end.exitCode = 128 + int(syscall.SIGKILL)
				return end, nil
			}
			return nil, b.execFailed(c, err, "inspecting the exec in")
		}
		if !in.Running {
			end.exitCode = in.ExitCode
			return end, nil
		}
		switch {
		case i == 40 && end.reason == "":
			// Still running a second after its stream ended: the
			// engine lost track of it; kill the tree like a timeout.
			end.killErr = b.killTree(ictx, c)
		case i > 80:
			end.exitCode = 128 + int(syscall.SIGKILL)
			if end.killErr == nil {
				end.killErr = errors.New("the exec never reported its end")
			}
			return end, nil
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// execFailed is the error for an exec that could not be created or
// started: the engine is down, or the container is gone.
func (b *Backend) execFailed(c *ctr, err error, doing string) error {
	if why := c.deadReason(); why != "" {
		return sandbox.Errorf(sandbox.ErrInternal, "container_gone", "%s container %s: it was %s", doing, c.name, why)
	}
	return b.wrap(err, doing+" container "+c.name)
}

// killTree kills every process in c but the keeper, with an exec of
// kill -9 -1. When that cannot run (the pids limit is exhausted, the
// container is broken) it kills the container itself, which then cannot be
// used again.
func (b *Backend) killTree(ctx context.Context, c *ctr) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	code, out, err := b.quickExec(ctx, c, killAll, nil)
	if err == nil && code == 0 {
		return nil
	}
	c.kill("killed, because the process tree could not be killed inside it")
	if _, kerr := b.cli.ContainerKill(ctx, c.id, client.ContainerKillOptions{Signal: "KILL"}); kerr != nil {
		return errors.Join(fmt.Errorf("killing the tree (exit %d, %q): %v", code, out, err), b.wrap(kerr, "killing container "+c.name))
	}
	return fmt.Errorf("the tree could not be killed inside the container (exit %d, %q, %v); the container was killed", code, out, err)
}

// quickExec runs a short helper command in c and returns its exit code and
// its (capped) output.
func (b *Backend) quickExec(ctx context.Context, c *ctr, cmd []string, stdin io.Reader) (int, string, error) {
	out := sandbox.NewCapture(4*sandbox.KiB, nil, nil)
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	ex, err := b.cli.ExecCreate(ctx, c.id, client.ExecCreateOptions{
		Cmd: cmd, User: sandboxUser, WorkingDir: workDir,
		AttachStdin: stdin != nil, AttachStdout: true, AttachStderr: true,
	})
	if err != nil {
		return -1, "", b.execFailed(c, err, "creating a helper exec in")
	}
	hj, err := b.cli.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		return -1, "", b.execFailed(c, err, "starting a helper exec in")
	}
	if stdin != nil {
		go func() {
			io.Copy(hj.Conn, stdin)
			hj.CloseWrite()
		}()
	}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		stdcopy.StdCopy(out, out, hj.Reader)
	}()
	select {
	case <-copied:
	case <-ctx.Done():
	}
	hj.Close()
	<-copied
	for i := 0; i < 200; i++ {
		in, err := b.cli.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{})
		if err != nil {
			return -1, string(out.Bytes()), b.wrap(err, "inspecting a helper exec in container "+c.name)
		}
		if !in.Running {
			return in.ExitCode, string(out.Bytes()), nil
		}
		time.Sleep(25 * time.Millisecond)
	}
	return -1, string(out.Bytes()), fmt.Errorf("helper %q in container %s did not end", cmd, c.name)
}

// oomKilled reports whether the engine saw an out-of-memory kill in c
// between the start and the end of exec execID: the events "exec_start",
// "oom", "exec_die" of the container, replayed from the engine's event log
// since the container started.
func (b *Backend) oomKilled(ctx context.Context, c *ctr, execID string) bool {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	in, err := b.cli.ContainerInspect(ctx, c.id, client.ContainerInspectOptions{})
	if err != nil || in.Container.State == nil {
		return false
	}
	since := in.Container.State.StartedAt
	f := make(client.Filters).Add("type", "container").Add("container", c.id).Add("event", "exec_start", "oom", "exec_die")
	ev := b.cli.Events(ctx, client.EventsListOptions{Since: since, Filters: f})
	oom := false
	for {
		select {
		case m := <-ev.Messages:
			ours := m.Actor.Attributes["execID"] == execID
			switch {
			case m.Action == events.ActionOOM:
				oom = true
			case ours && strings.HasPrefix(string(m.Action), "exec_start"):
				oom = false
			case ours && m.Action == events.ActionExecDie:
				return oom
			case m.Action == events.ActionExecDie:
				oom = false // another exec's end: what came before was not ours
			}
		case <-ev.Err:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// signalOf maps Docker's 128+N exit codes to a signal.
func signalOf(code int) (syscall.Signal, bool) {
	if code > 128 && code < 128+65 {
		return syscall.Signal(code - 128), true
	}
	return 0, false
}

// resultOf turns an exec's end into a Result.
func (s *Sandbox) resultOf(ctx context.Context, end *execEnd, stdout, stderr *sandbox.Capture) *sandbox.Result {
	res := &sandbox.Result{
		ID: s.id, Backend: Name, Isolation: s.b.iso,
		Reason: end.reason, ExitCode: end.exitCode,
		Stdout: string(stdout.Bytes()), Stderr: string(stderr.Bytes()),
		StdoutTruncated: stdout.Truncated(), StderrTruncated: stderr.Truncated(),
		Usage:       sandbox.Usage{Wall: end.wall},
		Enforcement: enforcement,
	}
	sig, signaled := signalOf(end.exitCode)
	if signaled {
		res.ExitCode, res.Signal = -1, unix.SignalName(sig)
	}
	if end.killErr != nil {
		res.Message = end.killErr.Error()
	}
	if res.Reason != "" {
		return res
	}
	res.Reason = sandbox.ReasonExited
	if !signaled {
		return res
	}
	res.Reason = sandbox.ReasonOf(sig)
	if sig == syscall.SIGKILL && s.b.oomKilled(context.WithoutCancel(ctx), s.c, end.execID) {
		res.Reason = sandbox.ReasonMemoryLimit
		res.Message = fmt.Sprintf("killed by the memory limit (%d bytes, swap included)", s.spec.Limits.Memory)
	}
	return res
}

// notFound reports whether the wrapper refused to run the program, and why.
func notFound(end *execEnd, tok string, stdout, stderr *sandbox.Capture) (string, bool) {
	if end.reason != "" || end.exitCode != 127 || stdout.Total() != 0 {
		return "", false
	}
	msg, ok := bytes.CutPrefix(stderr.Bytes(), []byte("execbox-"+tok+": "))
	if !ok {
		return "", false
	}
	return strings.TrimSpace(string(msg)), true
}
