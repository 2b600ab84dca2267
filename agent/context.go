package agent

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// NewContext starts an interpreter context of language (see Languages)
// under id, which the caller chooses and later names in RunCode.
func (a *Agent) NewContext(ctx context.Context, id, language string) error {
	if _, ok := kernels[language]; !ok {
		return sandbox.Errorf(sandbox.ErrInvalid, "language_invalid", "no contexts for language %q (want one of %s)", language, strings.Join(Languages(), ", "))
	}
	got := make(chan frame, 1)
	a.mu.Lock()
	if a.dead != nil {
		a.mu.Unlock()
		return a.dead
	}
	a.calls[id] = func(f frame) {
		select {
		case got <- f:
		default:
		}
	}
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		delete(a.calls, id)
		a.mu.Unlock()
	}()
	if err := a.send(ctx, map[string]any{"op": "ctx", "id": id, "language": language}); err != nil {
		return err
	}
	select {
	case f := <-got:
		if f.Error != nil {
			if strings.Contains(f.Error.Message, "No such file") || strings.Contains(f.Error.Message, "not found") {
				return sandbox.Errorf(sandbox.ErrUnavailable, "language_unavailable", "the sandbox cannot run %s contexts: %s", language, f.Error.Message)
			}
			return agentError(f)
		}
		return nil
	case <-ctx.Done():
		a.DropContext(id)
		return ctx.Err()
	}
}

// DropContext ends context id (its kernel and anything it started).
func (a *Agent) DropContext(id string) {
	a.send(context.Background(), map[string]any{"op": "drop", "ctx": id})
}

// CodeResult is how one call in a context ended.
type CodeResult struct {
	// OK is false when the code raised (Error says what), timed out, or
	// the context was lost.
	OK bool `json:"ok"`
	// Value is the last expression's value as JSON, when it has one that
	// JSON can carry; Repr is its printed form, and Type its type's name.
	Value json.RawMessage `json:"value,omitempty"`
	Repr  string          `json:"repr,omitempty"`
	Type  string          `json:"type,omitempty"`
	// Stdout and Stderr are what the call printed, within the output limit.
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	StdoutTruncated bool   `json:"stdout_truncated,omitempty"`
	StderrTruncated bool   `json:"stderr_truncated,omitempty"`
	Error           *struct {
		Type      string `json:"type"`
		Message   string `json:"message"`
		Traceback string `json:"traceback,omitempty"`
	} `json:"error,omitempty"`
	// Interrupted: the timeout interrupted the call, and the context lives
	// on. Lost: the context did not survive (it was killed, or its
	// interpreter exited); it must be reset.
	Interrupted bool          `json:"interrupted,omitempty"`
	Lost        bool          `json:"lost,omitempty"`
	Duration    time.Duration `json:"-"`
	// CPU is the CPU time the call used: the kernel's, its children's and
	// that of the orphans it left (which end with it).
	CPU   time.Duration `json:"-"`
	CPUNS int64         `json:"cpu_ns,omitempty"`
}

// RunCode runs code in context id, within timeout; what it prints is
// kept up to output bytes per stream and copied live to stdout and stderr
// (either may be nil).
func (a *Agent) RunCode(ctx context.Context, id, code string, timeout time.Duration, output int64, stdout, stderr io.Writer) (*CodeResult, error) {
	out := sandbox.NewCapture(output, stdout, nil)
	errs := sandbox.NewCapture(output, stderr, nil)
	got := make(chan frame, 1)
	rid, unregister, err := a.register(func(f frame) {
		switch {
		case f.Out == "stdout":
			out.Write(f.Data)
		case f.Out == "stderr":
			errs.Write(f.Data)
		case f.Result != nil || f.Error != nil:
			select {
			case got <- f:
			default:
			}
		}
	})
	if err != nil {
		return nil, err
	}
	defer unregister()
	start := time.Now()
	secs := timeout.Seconds()
	if err := a.send(ctx, map[string]any{"op": "code", "id": rid, "ctx": id, "code": code, "timeout": secs}); err != nil {
		return nil, err
	}
	// The agent interrupts the call at its timeout; this is the backstop
	// for an agent that does not answer.
	t := time.NewTimer(timeout + ctxGrace)
	defer t.Stop()
	var f frame
	select {
	case f = <-got:
	case <-ctx.Done():
		// The caller left: the call is interrupted as at its timeout, and
		// the context keeps its state.
		a.send(context.WithoutCancel(ctx), map[string]any{"op": "interrupt", "ctx": id})
		return nil, ctx.Err()
	case <-t.C:
		a.DropContext(id)
		return nil, sandbox.Errorf(sandbox.ErrInternal, CodeAgentLost, "the session's agent did not answer a call within %v of its timeout", ctxGrace)
	}
	if f.Error != nil {
		return nil, agentError(f)
	}
	res := &CodeResult{}
	if err := json.Unmarshal(f.Result, res); err != nil {
		return nil, sandbox.Errorf(sandbox.ErrInternal, "agent_protocol", "decoding a context's answer: %v", err)
	}
	res.Stdout, res.Stderr = out.String(), errs.String()
	res.StdoutTruncated, res.StderrTruncated = out.Truncated(), errs.Truncated()
	res.Duration = time.Since(start)
	res.CPU = time.Duration(res.CPUNS)
	return res, nil
}
