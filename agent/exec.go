package agent

import (
	"context"
	"fmt"
	"maps"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/execbox/execbox/sandbox"
)

// Exec runs p through the agent, beside its contexts and terminals, under
// limits l (the session's: wall and output per exec). It answers as a
// sandbox's Exec does: a Result for a program that ran, failed, timed out
// or was killed, an error only when it could not be run. The tree of the
// program (its process group) is killed when it ends, as after a run;
// usage is the main process's CPU time, not the tree's.
func (a *Agent) Exec(ctx context.Context, p *sandbox.Process, l sandbox.Limits) (*sandbox.Result, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	stdout, stderr, overflow := sandbox.NewOutputs(l.Output, l.OutputLimitKill, p.Stdout, p.Stderr)
	ended := make(chan frame, 1)
	id, unregister, err := a.register(func(f frame) {
		switch {
		case f.Out == "stdout":
			stdout.Write(f.Data)
		case f.Out == "stderr":
			stderr.Write(f.Data)
		case f.Exit != nil || f.Error != nil:
			select {
			case ended <- f:
			default:
			}
		}
	})
	if err != nil {
		return nil, err
	}
	defer unregister()
	// The wall limit runs from here: waiting on the agent is part of it.
	start := time.Now()
	timer := time.NewTimer(p.WallLimit(l))
	defer timer.Stop()
	wallCtx, stopWall := context.WithDeadline(ctx, start.Add(p.WallLimit(l)))
	defer stopWall()
	req := map[string]any{"op": "exec", "id": id, "args": p.Args, "env": maps.Clone(p.Env), "dir": p.Dir, "stdin": p.Stdin != nil}
	if err := a.send(wallCtx, req); err != nil {
		return nil, err
	}
	if p.Stdin != nil {
		go a.feed(wallCtx, id, p.Stdin)
	}
	var reason sandbox.Reason
	var f frame
	select {
	case f = <-ended:
	case <-timer.C:
		reason = sandbox.ReasonTimeout
	case <-ctx.Done():
		reason = sandbox.ReasonCanceled
	case <-overflow:
		reason = sandbox.ReasonOutputLimit
	}
	if reason != "" {
		if err := a.send(wallCtx, map[string]any{"op": "signal", "id": id, "sig": "SIGKILL"}); err != nil {
			return nil, err
		}
		t := time.NewTimer(killGrace)
		defer t.Stop()
		select {
		case f = <-ended:
		case <-t.C:
			// A live agent ends a killed program at once: this one is
			// stopped or stuck.
			a.wedged(killGrace)
			return nil, a.Err()
		}
	}
	if f.Error != nil {
		return nil, agentError(f)
	}
	res := &sandbox.Result{
		Reason: sandbox.ReasonExited, ExitCode: f.Exit.Code, Signal: f.Exit.Signal,
		Stdout: stdout.String(), Stderr: stderr.String(),
		StdoutTruncated: stdout.Truncated(), StderrTruncated: stderr.Truncated(),
		Usage: sandbox.Usage{Wall: time.Since(start), CPU: time.Duration(f.Exit.CPU)},
	}
	switch {
	case reason != "":
		res.Reason = reason
		if res.Signal == "" {
			res.Signal = "SIGKILL"
		}
		res.ExitCode = -1
	case f.Exit.Error != "":
		res.Message = fmt.Sprintf("%s could not be started: %s", p.Args[0], f.Exit.Error)
	case f.Exit.Signal != "":
		res.ExitCode = -1
		res.Reason = sandbox.ReasonOf(signalNumber(f.Exit.Signal))
	}
	if l.OutputLimitKill && (res.StdoutTruncated || res.StderrTruncated) && (res.Reason == sandbox.ReasonExited || res.Reason == sandbox.ReasonSignaled) {
		res.Reason = sandbox.ReasonOutputLimit // as the backends do: not a race with the kill
	}
	return res, nil
}

func signalNumber(name string) syscall.Signal {
	return unix.SignalNum(name)
}
