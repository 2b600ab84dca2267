package function

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// Engine runs one sandboxed process to its end: choosing the backend for
// sel, applying the configured policy and limits, Create → Exec → Close.
// The one that matters is engine.Engine.Call (through EngineFunc), whose
// warm pools may hold a runner started ahead from Template. A process that
// fails, times out or is killed is a Result with a Reason; an error means
// it could not be run (ErrUnavailable: the isolation asked for is not
// there).
type Engine interface {
	Run(ctx context.Context, sel sandbox.Selection, spec sandbox.Spec, p *sandbox.Process) (*sandbox.Result, error)
}

// EngineFunc adapts a function to Engine.
type EngineFunc func(ctx context.Context, sel sandbox.Selection, spec sandbox.Spec, p *sandbox.Process) (*sandbox.Result, error)

func (f EngineFunc) Run(ctx context.Context, sel sandbox.Selection, spec sandbox.Spec, p *sandbox.Process) (*sandbox.Result, error) {
	return f(ctx, sel, spec, p)
}

// Options configure an Executor. The zero value is usable.
type Options struct {
	// Concurrency is the most executions (and lints) running at once;
	// 0 means runtime.NumCPU().
	Concurrency int
	// QueueTimeout is how long a call waits for a free slot before it is
	// answered busy; 0 answers busy at once.
	QueueTimeout time.Duration
	// DefaultTimeout applies to requests that set none; 0 means 15 s.
	// It must be within 1–60 s.
	DefaultTimeout time.Duration
	// Limits are the sandbox limits of every run; zero fields are left to
	// the engine's defaults. Wall and Output are set per run.
	Limits sandbox.Limits
	// Python and Node name the interpreters inside the sandbox, looked up
	// in its PATH; empty means "python3" and "node".
	Python string
	Node   string
}

// protocolOutput bounds the runner's stdout (the protocol channel): a
// 256 KiB result, 8 KiB of output escaped and an error with its traceback
// fit with room to spare.
const protocolOutput = 1 * sandbox.MiB

// backstop is how long past the timeout Execute waits for an Engine that
// does not end the run itself (a slow sandbox start counts against it).
const backstop = 10 * time.Second

// Executor runs function calls and lints through an Engine, at most
// Options.Concurrency at once. It is safe for concurrent use.
type Executor struct {
	engine   Engine
	opts     Options
	slots    chan struct{}
	backstop time.Duration
}

// New returns an Executor that runs every call through en.
func New(en Engine, o Options) (*Executor, error) {
	if en == nil {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, CodeInvalidRequest, "function executor: no engine")
	}
	if o.Concurrency < 0 || o.QueueTimeout < 0 {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, CodeInvalidRequest, "function executor: concurrency and queue timeout must not be negative")
	}
	if o.Concurrency == 0 {
		o.Concurrency = runtime.NumCPU()
	}
	if o.DefaultTimeout == 0 {
		o.DefaultTimeout = DefaultTimeout
	}
	if o.DefaultTimeout < MinTimeout || o.DefaultTimeout > MaxTimeout {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, CodeInvalidRequest, "function executor: default timeout %v is out of range (1s to 60s)", o.DefaultTimeout)
	}
	return &Executor{engine: en, opts: o, slots: make(chan struct{}, o.Concurrency), backstop: backstop}, nil
}

// Execute runs one request and always answers: every failure, including a
// bad request, a busy executor or a panicking Engine, is a Response with
// OK false and a Code. ctx cancels the call (code interrupted).
func (e *Executor) Execute(ctx context.Context, req *Request) (resp *Response) {
	defer func() {
		if p := recover(); p != nil {
			resp = fail(CodeInternal, fmt.Sprintf("internal error: %v", p))
		}
	}()
	if req == nil {
		return fail(CodeInvalidRequest, "no request")
	}
	if err := req.Validate(); err != nil {
		return ErrorResponse(err)
	}
	in, err := req.Input()
	if err != nil {
		return ErrorResponse(err)
	}
	if err := e.acquire(ctx); err != nil {
		return ErrorResponse(err)
	}
	defer func() { <-e.slots }()
	start := time.Now()
	resp = e.run(ctx, req, in)
	resp.DurationMS = time.Since(start).Milliseconds()
	return resp
}

// Lint parses req.Code without running it (whatever req.Mode says) and
// returns its diagnostics: empty for valid code. The error is the failure
// response as a *sandbox.Error (see Response.Err).
func (e *Executor) Lint(ctx context.Context, req *Request) ([]Diagnostic, error) {
	if req == nil {
		return nil, fail(CodeInvalidRequest, "no request").Err()
	}
	r := *req
	r.Mode = ModeLint
	resp := e.Execute(ctx, &r)
	if err := resp.Err(); err != nil {
		return nil, err
	}
	return resp.Diagnostics, nil
}

// acquire takes a slot: at once, or within QueueTimeout, or busy.
func (e *Executor) acquire(ctx context.Context) error {
	select {
	case e.slots <- struct{}{}:
		return nil
	default:
	}
	busy := sandbox.Errorf(sandbox.ErrBusy, CodeBusy, "function executor is busy; try again later")
	if e.opts.QueueTimeout <= 0 {
		return busy
	}
	t := time.NewTimer(e.opts.QueueTimeout)
	defer t.Stop()
	select {
	case e.slots <- struct{}{}:
		return nil
	case <-t.C:
		return busy
	case <-ctx.Done():
		return sandbox.Errorf(sandbox.ErrInternal, CodeInterrupted, "execution was interrupted")
	}
}

func (e *Executor) run(ctx context.Context, req *Request, in []byte) *Response {
	timeout := time.Duration(req.Timeout)
	if timeout == 0 {
		timeout = e.opts.DefaultTimeout
	}
	mode := req.Mode
	if mode == "" {
		mode = ModeExecute
	}
	spec, args := e.Template(req.Language)
	spec.Limits.Wall = timeout
	p := &sandbox.Process{Args: args, Stdin: bytes.NewReader(in), Timeout: timeout}
	sel := sandbox.Selection{Backend: req.Backend, Tier: req.Tier, MinIsolation: req.MinIsolation}
	rctx, cancel := context.WithTimeout(ctx, timeout+e.backstop)
	defer cancel()

	res, err := e.engine.Run(rctx, sel, spec, p)
	interrupted := ctx.Err() != nil
	overdue := !interrupted && rctx.Err() != nil
	if err != nil {
		switch {
		case interrupted:
			return fail(CodeInterrupted, "execution was interrupted")
		case overdue:
			return fail(CodeTimeout, "execution timed out; the process tree was killed")
		}
		return engineFailure(err)
	}
	if res == nil {
		return fail(CodeSandboxFailed, "sandbox failed to start or run the function: the engine returned no result")
	}
	resp := fromResult(res, mode, overdue)
	resp.Backend, resp.Isolation, resp.CPU = res.Backend, res.Isolation.String(), res.Usage.CPU
	return resp
}

// Template is the sandbox spec and the command of every call in lang by
// an Executor made with o: the same for all of them but for the spec's
// wall limit, which each call sets to its timeout (left zero here). The
// runner reads the whole call from its stdin, so a warm pool
// (engine.PoolTemplate) may start it before the call is known; no call
// takes longer than MaxTimeout.
func Template(lang Language, o Options) (sandbox.Spec, []string) {
	limits := o.Limits
	limits.Wall = 0
	limits.Output = protocolOutput
	limits.OutputLimitKill = false
	return sandbox.Spec{Limits: limits}, command(lang, cmp.Or(o.Python, "python3"), cmp.Or(o.Node, "node"))
}

// Template is Template(lang) under e's options.
func (e *Executor) Template(lang Language) (sandbox.Spec, []string) { return Template(lang, e.opts) }

func engineFailure(err error) *Response {
	switch code := codeOf(err); code {
	case CodeIsolationUnavailable:
		return fail(code, fmt.Sprintf("isolation unavailable: %v; the code was not run", err))
	case CodeSandboxFailed:
		return fail(code, fmt.Sprintf("sandbox failed to start or run the function: %v", err))
	default:
		return fail(code, err.Error())
	}
}

func fromResult(res *sandbox.Result, mode Mode, overdue bool) *Response {
	switch res.Reason {
	case sandbox.ReasonTimeout, sandbox.ReasonCPULimit:
		return fail(CodeTimeout, "execution timed out; the process tree was killed")
	case sandbox.ReasonCanceled:
		if overdue {
			return fail(CodeTimeout, "execution timed out; the process tree was killed")
		}
		return fail(CodeInterrupted, "execution was interrupted")
	case sandbox.ReasonMemoryLimit:
		return fail(CodeMemoryLimit, "function exceeded its memory limit; the process tree was killed")
	case sandbox.ReasonOutputLimit:
		return fail(CodeOutputInvalid, "function output is invalid or over its limit")
	case sandbox.ReasonExited:
		if res.ExitCode != 0 {
			return fail(CodeSandboxFailed, "sandbox failed to start or run the function: "+res.Ending())
		}
		if res.StdoutTruncated {
			return fail(CodeOutputInvalid, fmt.Sprintf("function output is invalid or over its limit: it exceeds %d bytes", protocolOutput))
		}
		return decodeOutput([]byte(res.Stdout), mode)
	default:
		return fail(CodeSandboxFailed, "sandbox failed to start or run the function: "+res.Ending())
	}
}

// Interface guards.
var _ Engine = EngineFunc(nil)
