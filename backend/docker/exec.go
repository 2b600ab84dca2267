package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/events"
	"github.com/moby/moby/client"
	"golang.org/x/sys/unix"

	"github.com/execbox/execbox/sandbox"
)

// grace is how long the end of a killed run is waited for.
const grace = 3 * time.Second

// opTimeout bounds the short control-plane calls around a run.
const opTimeout = 30 * time.Second

// execEnd is how one run ended.
type execEnd struct {
	reason  sandbox.Reason // set when execbox ended it: timeout, canceled, output_limit
	wall    time.Duration
	tr      trailer // the wrapper's trailer, when have
	have    bool
	code    int // without a trailer: the exit code the engine reports (128+N for a signal)
	killErr error
}

// execSpec is one program to run in a container under the wrapper.
type execSpec struct {
	env            []string // NAME=value, all the program gets
	dir            string   // absolute, inside the container
	args           []string // the program and its arguments
	stdin          []byte   // through the keeper: all of stdin, known up front
	stream         io.Reader
	streamed       bool // stdin is stream, through an exec (its length is not known)
	stdout, stderr io.Writer
	wall           time.Duration
	overflow       <-chan struct{} // closed when an output cap with kill is passed
}

// words are the keeper's command line for e: the env assignments, the
// wrapper and the program, each a quoted shell word.
func (e execSpec) words() string {
	var b strings.Builder
	for _, kv := range e.env {
		b.WriteString(shellQuote(kv))
		b.WriteByte(' ')
	}
	b.WriteString(`/bin/sh -c "$w" execbox `)
	b.WriteString(shellQuote(e.dir))
	for _, a := range e.args {
		b.WriteByte(' ')
		b.WriteString(shellQuote(a))
	}
	return b.String()
}

// run runs e in c to its end, through the keeper (or, for a stdin that is
// a stream, through an exec). The error is non-nil only when the program
// could not be run at all.
func (b *Backend) run(ctx context.Context, c *ctr, e execSpec) (*execEnd, error) {
	if e.streamed || len(e.words()) > maxLine {
		if !e.streamed && len(e.stdin) > 0 {
			e.stream = bytes.NewReader(e.stdin)
		}
		return b.runExec(ctx, c, e)
	}
	return b.runKeeper(ctx, c, e)
}

// maxLine bounds the keeper's command line: the shell reads a line from a
// pipe a byte at a time (so that it never reads past it), about a
// microsecond a byte; a program with more arguments and environment than
// that runs through an exec.
const maxLine = 16 * 1024

// runKeeper hands e to c's keeper: one line (and stdin) down the attach
// connection, the output back up it until the wrapper's trailers. On
// timeout, cancel or overflow the keeper kills the tree.
func (b *Backend) runKeeper(ctx context.Context, c *ctr, e execSpec) (*execEnd, error) {
	tok := token()
	r := newKeeperRun(tok, e.stdout, e.stderr)
	c.ch.attach(r)
	defer c.ch.detach(r)
	done := b.timed("run")
	defer done()
	start := time.Now()
	line := "r " + tok + " " + strconv.Itoa(len(e.stdin)) + " " + e.words() + "\n"
	if err := c.ch.send(line, e.stdin); err != nil {
		return nil, b.channelFailed(c, err)
	}
	end := &execEnd{}
	timer := time.NewTimer(e.wall)
	defer timer.Stop()
	if ctx.Err() != nil {
		// Done before the program could run: canceled, never raced
		// against its own end (as internal/host/proc does).
		end.reason = sandbox.ReasonCanceled
	}
	for end.reason == "" {
		select {
		case <-r.changed:
			if tr, ok := r.ended(); ok {
				end.tr, end.have, end.wall = tr, true, time.Since(start)
				return end, nil
			}
			continue
		case <-timer.C:
			end.reason = sandbox.ReasonTimeout
		case <-ctx.Done():
			end.reason = sandbox.ReasonCanceled
		case <-e.overflow:
			end.reason = sandbox.ReasonOutputLimit
		case <-c.ch.done:
			return nil, b.channelFailed(c, errChannelClosed)
		}
	}
	end.wall = time.Since(start)
	end.killErr = b.killRun(c, tok, r)
	return end, nil
}

// killRun has the keeper kill every process but itself and waits for it to
// say so on both streams (so that nothing of run r arrives later); when
// the keeper does not answer, the container is killed.
func (b *Backend) killRun(c *ctr, tok string, r *keeperRun) error {
	defer b.timed("kill")()
	if err := c.ch.send("k "+tok+"\n", nil); err != nil {
		return b.killContainer(c, err)
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	for !r.killed() {
		select {
		case <-r.changed:
		case <-c.ch.done:
			return b.killContainer(c, errChannelClosed)
		case <-t.C:
			return b.killContainer(c, errors.New("the keeper did not confirm the kill"))
		}
	}
	return nil
}

// killTree kills every process of c but the keeper (the tree of a run
// through an exec), and absorbs the keeper's confirmation.
func (b *Backend) killTree(c *ctr) error {
	tok := token()
	r := newKeeperRun(tok, io.Discard, io.Discard)
	c.ch.attach(r)
	defer c.ch.detach(r)
	return b.killRun(c, tok, r)
}

// killContainer kills c itself (it cannot be used again) when its keeper
// could not kill the tree.
func (b *Backend) killContainer(c *ctr, why error) error {
	c.kill("killed, because its keeper could not kill the process tree")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := b.cli.ContainerKill(ctx, c.id, client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		return errors.Join(fmt.Errorf("killing the tree: %v", why), b.wrap(err, "killing container "+c.name))
	}
	return fmt.Errorf("the tree could not be killed inside the container (%v); the container was killed", why)
}

// channelFailed is the error for a run whose container's keeper is gone.
func (b *Backend) channelFailed(c *ctr, err error) error {
	if why := c.deadReason(); why != "" {
		return sandbox.Errorf(sandbox.ErrInternal, "container_gone", "running in container %s: it was %s", c.name, why)
	}
	c.kill("stopped: its keeper's connection ended")
	return sandbox.Errorf(sandbox.ErrInternal, "container_gone", "running in container %s: its keeper's connection ended (%v); the container stopped or the engine at %s went away", c.name, err, b.host)
}

// runExec runs e through an exec, for a stdin that must stream: the token
// line, then e.stream, go to the wrapper's stdin. The exit code comes from
// the wrapper's trailer, else from the engine.
func (b *Backend) runExec(ctx context.Context, c *ctr, e execSpec) (*execEnd, error) {
	// What an earlier run may have left goes first, as before a run
	// through the keeper.
	if err := b.killTree(c); err != nil {
		return nil, b.channelFailed(c, err)
	}
	octx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	cmd := append([]string{"/usr/bin/env", "-i", "--"}, e.env...)
	cmd = append(cmd, "/bin/sh", "-c", wrapper, "execbox", e.dir)
	cmd = append(cmd, e.args...)
	done := b.timed("exec-create")
	ex, err := b.cli.ExecCreate(octx, c.id, client.ExecCreateOptions{
		Cmd: cmd, User: sandboxUser, WorkingDir: workDir,
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
	tok := token()
	go func() {
		// Not waited for: closing the connection below ends a copy that
		// the program never reads.
		io.WriteString(hj.Conn, tok+"\n")
		if e.stream != nil {
			io.Copy(hj.Conn, e.stream)
		}
		hj.CloseWrite()
	}()
	r := newKeeperRun(tok, e.stdout, e.stderr)
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		stdcopy.StdCopy(r.stdout, r.stderr, hj.Reader)
	}()
	end := &execEnd{code: -1}
	timer := time.NewTimer(e.wall)
	defer timer.Stop()
	if ctx.Err() != nil {
		end.reason = sandbox.ReasonCanceled // as in runKeeper
	} else {
		select {
		case <-copied:
		case <-timer.C:
			end.reason = sandbox.ReasonTimeout
		case <-ctx.Done():
			end.reason = sandbox.ReasonCanceled
		case <-e.overflow:
			end.reason = sandbox.ReasonOutputLimit
		}
	}
	if end.reason != "" {
		end.killErr = b.killTree(c)
		select {
		case <-copied:
		case <-time.After(grace):
		}
	}
	end.wall = time.Since(start)
	hj.Close()
	<-copied
	r.stdout.flush()
	r.stderr.flush()
	if tr, ok := r.ended(); ok {
		end.tr, end.have = tr, true
		return end, nil
	}
	if end.reason != "" {
		return end, nil
	}
	// No trailer: the wrapper itself was killed, and what it started may
	// live on.
	end.killErr = b.killTree(c)
	// The engine has the exit code; it may trail the stream by a moment.
	ictx, icancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
	defer icancel()
	for i := 0; i < 80; i++ {
		in, err := b.cli.ExecInspect(ictx, ex.ID, client.ExecInspectOptions{})
		if err != nil {
			return nil, b.execFailed(c, err, "inspecting the exec in")
		}
		if !in.Running {
			end.code = in.ExitCode
			return end, nil
		}
		time.Sleep(25 * time.Millisecond)
	}
	return end, nil
}

// execFailed is the error for an exec that could not be created or
// started: the engine is down, or the container is gone.
func (b *Backend) execFailed(c *ctr, err error, doing string) error {
	if why := c.deadReason(); why != "" {
		return sandbox.Errorf(sandbox.ErrInternal, "container_gone", "%s container %s: it was %s", doing, c.name, why)
	}
	return b.wrap(err, doing+" container "+c.name)
}

// maxHelperInline is the most stdin a helper gets through the keeper.
const maxHelperInline = 64 * sandbox.KiB

// quickRun runs a short helper command (as the sandbox user, under the
// wrapper, through the keeper or, with a long stdin, an exec) and returns
// its exit status and its capped output; a status of -1 means it did not
// end by itself.
func (b *Backend) quickRun(ctx context.Context, c *ctr, args []string, stdin []byte) (int, string, error) {
	out := sandbox.NewCapture(4*sandbox.KiB, nil, nil)
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	e := execSpec{
		env: []string{"PATH=" + sandboxPATH}, dir: workDir, args: args, stdin: stdin,
		stdout: out, stderr: out, wall: opTimeout,
	}
	if len(stdin) > maxHelperInline {
		// A long file (WriteFiles' long paths) streams through an exec
		// rather than taking room in /tmp.
		e.stdin, e.stream, e.streamed = nil, bytes.NewReader(stdin), true
	}
	end, err := b.run(ctx, c, e)
	switch {
	case err != nil:
		return -1, string(out.Bytes()), err
	case !end.have:
		return -1, string(out.Bytes()), fmt.Errorf("helper %q in container %s did not end: %s %v", args, c.name, end.reason, end.killErr)
	case end.tr.err != "":
		return -1, string(out.Bytes()), fmt.Errorf("helper %q in container %s: %s", args, c.name, end.tr.err)
	}
	return end.tr.status, string(out.Bytes()), nil
}

// oomKilled reports whether the engine saw an out-of-memory kill in c
// since a run started, from the container's "oom" events. It is only asked
// when the wrapper could not read the container's cgroup (a runtime that
// hides it) and the program died of SIGKILL.
func (b *Backend) oomKilled(ctx context.Context, c *ctr, since time.Time) bool {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	f := make(client.Filters).Add("type", "container").Add("container", c.id).Add("event", "oom")
	ev := b.cli.Events(ctx, client.EventsListOptions{
		Since:   strconv.FormatInt(since.Add(-time.Second).Unix(), 10),
		Until:   strconv.FormatInt(time.Now().Add(time.Second).Unix(), 10),
		Filters: f,
	})
	for {
		select {
		case m := <-ev.Messages:
			if m.Action == events.ActionOOM {
				return true
			}
		case <-ev.Err:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// resultOf turns a run's end into a Result: the program's exit status or
// signal (told apart by the wrapper), and the limit that ended it, if any.
func (s *Sandbox) resultOf(ctx context.Context, end *execEnd, started time.Time, stdout, stderr *sandbox.Capture) *sandbox.Result {
	l := s.spec.Limits
	res := &sandbox.Result{
		ID: s.id, Backend: Name, Isolation: s.b.iso,
		Reason: end.reason, ExitCode: -1,
		Stdout: string(stdout.Bytes()), Stderr: string(stderr.Bytes()),
		StdoutTruncated: stdout.Truncated(), StderrTruncated: stderr.Truncated(),
		Usage:       sandbox.Usage{Wall: end.wall},
		Enforcement: enforcement,
	}
	if end.killErr != nil {
		res.Message = end.killErr.Error()
	}
	tr := end.tr
	if tr.counted {
		res.Usage.CPU = time.Duration(tr.cpuNS)
		res.Usage.PeakMemory = tr.peak
	}
	if res.Reason != "" {
		// execbox ended it: the keeper's SIGKILL, whatever the program
		// managed to report first.
		res.Signal = "SIGKILL"
		return res
	}
	status, signaled := tr.status, tr.signaled
	if end.have && status < 0 {
		res.Reason = sandbox.ReasonSandboxError
		res.Message = "the program's exit status was lost: the shell that waited for it was killed (by the program?)"
		return res
	}
	if !end.have {
		// An exec whose wrapper was killed: only the engine's 128+N.
		status = end.code
		signaled = status > 128 && status < 128+65
	}
	var sig syscall.Signal
	if signaled && status > 128 {
		sig = syscall.Signal(status - 128)
		res.Signal = unix.SignalName(sig)
	} else {
		res.ExitCode = status
	}
	res.Reason = sandbox.ReasonOf(sig)
	if res.Succeeded() {
		if tr.pidsMax > 0 {
			res.Message = fmt.Sprintf("the limit of %d processes was reached (%d fork(s) or clone(s) refused); the program went on and exited 0", l.Pids, tr.pidsMax)
		}
		return res
	}
	oom := tr.oom > 0
	if !tr.counted && sig == syscall.SIGKILL {
		oom = s.b.oomKilled(context.WithoutCancel(ctx), s.c, started)
	}
	switch {
	case oom:
		res.Reason = sandbox.ReasonMemoryLimit
		res.Message = fmt.Sprintf("the memory limit of %d bytes (swap included) was reached; the kernel's OOM killer ended %d process(es)", l.Memory, max(tr.oom, 1))
	case tr.pidsMax > 0 && (res.Reason == sandbox.ReasonExited || res.Reason == sandbox.ReasonSignaled):
		res.Reason = sandbox.ReasonPidsLimit
		res.Message = fmt.Sprintf("the limit of %d processes was reached (%d fork(s) or clone(s) refused)", l.Pids, tr.pidsMax)
	}
	return res
}

// notStarted is the Result or error for a program the wrapper did not
// start: a missing directory is the caller's error; a program that is not
// there (127) or not executable (126) is a result, as a shell and docker
// run report it.
func (s *Sandbox) notStarted(end *execEnd, p *sandbox.Process, stdout, stderr *sandbox.Capture) (*sandbox.Result, error) {
	res := &sandbox.Result{
		ID: s.id, Backend: Name, Isolation: s.b.iso, Reason: sandbox.ReasonExited,
		Stdout: string(stdout.Bytes()), Stderr: string(stderr.Bytes()),
		Usage: sandbox.Usage{Wall: end.wall}, Enforcement: enforcement,
	}
	switch end.tr.err {
	case "dir":
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "dir_not_found", "process dir %q does not exist in the work dir", p.Dir)
	case "notfound":
		res.ExitCode = 127
		res.Message = fmt.Sprintf("program %q not found in the sandbox (PATH %s, image %s)", p.Args[0], sandboxPATH, s.spec.Image)
	case "noexec":
		res.ExitCode = 126
		res.Message = fmt.Sprintf("program %q is not an executable file", p.Args[0])
	case "stdin":
		return nil, sandbox.Errorf(sandbox.ErrLimit, "stdin_no_room", "the process's stdin does not fit in the sandbox's /tmp (limits.tmp_size %d, partly used)", s.spec.Limits.TmpSize)
	default:
		return nil, sandbox.Errorf(sandbox.ErrInternal, "wrapper_failed", "the wrapper could not start %q: %s", p.Args[0], end.tr.err)
	}
	return res, nil
}
