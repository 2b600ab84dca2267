package function

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// hostRunner stands in for the sandbox, not for the interpreter: it runs
// the process as a plain host subprocess (real python3 / node) in a fresh
// temp dir, with the allowlisted environment, its own process group, the
// wall limit enforced by killing that group, and capped stdout/stderr.
type hostRunner struct {
	t testing.TB

	mu      sync.Mutex
	running int
	peak    int
}

func (h *hostRunner) Run(ctx context.Context, _ sandbox.Selection, spec sandbox.Spec, p *sandbox.Process) (*sandbox.Result, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.running++
	h.peak = max(h.peak, h.running)
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.running--
		h.mu.Unlock()
	}()

	dir, err := os.MkdirTemp("", "execbox-fn-test-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)

	limits := spec.Limits.WithDefaults(sandbox.Defaults)
	wall := limits.Wall
	if p.Timeout > 0 && p.Timeout < wall {
		wall = p.Timeout
	}
	fixed := map[string]string{"HOME": dir, "TMPDIR": dir}
	cmd := exec.Command(p.Args[0], p.Args[1:]...)
	cmd.Env = sandbox.BuildEnv(os.Environ(), spec.Policy, fixed, spec.Env, p.Env)
	cmd.Dir = dir
	cmd.Stdin = p.Stdin
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout := sandbox.NewCapture(limits.Output, p.Stdout, nil)
	stderr := sandbox.NewCapture(limits.Output, p.Stderr, nil)
	// Our own pipes, so Wait returns when the process exits; leftovers of
	// the tree are then killed, as a sandbox would, and the pipes close.
	var copies sync.WaitGroup
	for _, c := range []*sandbox.Capture{stdout, stderr} {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		defer w.Close()
		if c == stdout {
			cmd.Stdout = w
		} else {
			cmd.Stderr = w
		}
		copies.Add(1)
		go func() {
			defer copies.Done()
			defer r.Close()
			_, _ = io.Copy(c, r)
		}()
	}

	start := time.Now()
	err = cmd.Start()
	cmd.Stdout.(*os.File).Close()
	cmd.Stderr.(*os.File).Close()
	if err != nil {
		copies.Wait()
		return nil, sandbox.Errorf(sandbox.ErrInternal, "start_failed", "starting %s: %w", p.Args[0], err)
	}
	pgid := cmd.Process.Pid
	var (
		reasonMu sync.Mutex
		reason   sandbox.Reason
	)
	kill := func(r sandbox.Reason) {
		reasonMu.Lock()
		if reason == "" {
			reason = r
		}
		reasonMu.Unlock()
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	timer := time.AfterFunc(wall, func() { kill(sandbox.ReasonTimeout) })
	stop := context.AfterFunc(ctx, func() { kill(sandbox.ReasonCanceled) })
	werr := cmd.Wait()
	timer.Stop()
	stop()
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	copies.Wait()

	res := &sandbox.Result{
		Backend:         "host-test",
		Isolation:       sandbox.IsolationNone,
		Stdout:          string(stdout.Bytes()),
		Stderr:          string(stderr.Bytes()),
		StdoutTruncated: stdout.Truncated(),
		StderrTruncated: stderr.Truncated(),
		Usage:           sandbox.Usage{Wall: time.Since(start)},
	}
	reasonMu.Lock()
	res.Reason = reason
	reasonMu.Unlock()
	var ee *exec.ExitError
	switch {
	case werr == nil:
		res.ExitCode = 0
	case errors.As(werr, &ee):
		res.ExitCode = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.Signal = ws.Signal().String()
		}
	default:
		return nil, sandbox.Errorf(sandbox.ErrInternal, "wait_failed", "waiting for %s: %w", p.Args[0], werr)
	}
	if res.Reason == "" {
		res.Reason = sandbox.ReasonExited
		if res.Signal != "" {
			res.Reason = sandbox.ReasonSignaled
		}
	}
	return res, nil
}

func (h *hostRunner) peakRunning() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.peak
}
