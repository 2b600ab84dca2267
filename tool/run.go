package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"time"
	"unicode/utf8"

	"github.com/execbox/execbox/sandbox"
)

// backstop is how long past its timeout a run may take before Set stops
// waiting for a RunFunc that does not end it (a slow sandbox start counts).
const backstop = 10 * time.Second

// Run runs one tool call in a fresh sandbox: Check, then Checked.Run.
// Before anything runs it checks the call: arguments over Options.MaxArgs
// are ErrLimit "tool_args_too_large"; arguments that are not a JSON object
// or do not match the tool's schema are ErrInvalid "tool_args_invalid"; an
// unknown tool is ErrNotFound "tool_not_found", a broken one (a Problem)
// ErrInvalid "tool_invalid". The tools are known from the cached discovery
// (see List), which runs first when the dirs changed. A tool that fails on
// its own (an exception, a ToolError, a result that is not JSON) is a
// Response with OK false and Error; a run that times out, hits a limit or
// fails around the tool is an error with the Code… of the reason.
func (s *Set) Run(ctx context.Context, run RunFunc, c Call) (*Response, error) {
	ok, err := s.Check(ctx, run, c)
	if err != nil {
		return nil, err
	}
	return ok.Run(ctx, run)
}

// Checked is a call that passed Run's checks, ready to run: a caller
// that must decide something between the checks and the run (a guard)
// holds one.
type Checked struct {
	s       *Set
	call    Call
	args    []byte // compact JSON
	timeout time.Duration
	entry   *entry
}

// Check makes Run's checks of c without running the tool (run starts the
// discovery when the dirs changed), so that a caller can refuse a bad call
// before it asks anyone about it.
func (s *Set) Check(ctx context.Context, run RunFunc, c Call) (*Checked, error) {
	args, v, err := s.checkArgs(c.Args)
	if err != nil {
		return nil, err
	}
	if _, ok := c.Files[ArgsFile]; ok {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, CodeFilesInvalid, "the work-dir file %s is reserved for the tool's arguments", ArgsFile)
	}
	timeout := c.Timeout
	if timeout == 0 {
		timeout = s.opts.Timeout
	}
	if timeout < 0 || timeout > MaxTimeout {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, CodeOptionsInvalid, "tool call timeout %v is out of range (0 to %v)", timeout, MaxTimeout)
	}
	cat, err := s.catalog(ctx, run)
	if err != nil {
		return nil, err
	}
	e, ok := cat.tools[c.Name]
	if !ok {
		if p, broken := cat.problems[c.Name]; broken {
			return nil, sandbox.Errorf(sandbox.ErrInvalid, CodeToolInvalid, "tool %s cannot be used: %s", c.Name, p.Message)
		}
		return nil, sandbox.Errorf(sandbox.ErrNotFound, CodeNotFound, "no tool named %q", clip(c.Name, 128))
	}
	if err := e.schema.Validate(v); err != nil {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, CodeArgsInvalid, "arguments of tool %s do not match its schema: %v", c.Name, err)
	}
	return &Checked{s: s, call: c, args: args, timeout: timeout, entry: e}, nil
}

// Run runs the checked call in a fresh sandbox through run (see Set.Run).
func (k *Checked) Run(ctx context.Context, run RunFunc) (*Response, error) {
	s, c := k.s, k.call
	env := map[string]string{"EXECBOX_TOOL_ACTION": "run", "EXECBOX_TOOL_NAME": c.Name}
	files := maps.Clone(c.Files)
	if len(k.args) > s.opts.ArgsMax {
		if files == nil {
			files = map[string][]byte{}
		}
		files[ArgsFile] = k.args
		env["EXECBOX_TOOL_ARGS_FILE"] = ArgsFile
	} else {
		env["EXECBOX_TOOL_ARGS"] = string(k.args)
	}
	spec, p := s.template(c.Limits, c.Network, k.timeout, env)
	spec.Files = files
	start := time.Now()
	out, res, err := s.invoke(ctx, run, spec, p, "running tool "+c.Name)
	if err != nil {
		return nil, err
	}
	w, err := decodeRun(out)
	if err != nil {
		return nil, fmt.Errorf("running tool %s: %w", c.Name, err)
	}
	r := &Response{
		OK:        *w.OK,
		Result:    w.Result,
		Artifacts: res.Artifacts,
		Source:    k.entry.spec.Source,
		Backend:   res.Backend,
		Isolation: res.Isolation.String(),
		Duration:  time.Since(start),
		Usage:     res.Usage,
	}
	if w.Error != nil {
		r.Error = &Error{Code: w.Error.Code, Type: w.Error.Type, Message: w.Error.Message, Traceback: w.Error.Traceback}
	}
	r.Output, r.OutputTruncated = capText(res.Stderr, MaxOutput)
	r.OutputTruncated = r.OutputTruncated || res.StderrTruncated
	return r, nil
}

// checkArgs bounds, parses and compacts a call's arguments: a JSON object
// in valid UTF-8 ({} when empty).
func (s *Set) checkArgs(raw json.RawMessage) ([]byte, map[string]any, error) {
	if len(raw) > s.opts.MaxArgs {
		return nil, nil, sandbox.Errorf(sandbox.ErrLimit, CodeArgsTooLarge, "tool arguments exceed %d bytes", s.opts.MaxArgs)
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		raw = []byte("{}")
	}
	if !utf8.Valid(raw) {
		return nil, nil, sandbox.Errorf(sandbox.ErrInvalid, CodeArgsInvalid, "tool arguments are not valid UTF-8")
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, nil, sandbox.Errorf(sandbox.ErrInvalid, CodeArgsInvalid, "tool arguments are not JSON: %v", err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, nil, sandbox.Errorf(sandbox.ErrInvalid, CodeArgsInvalid, "tool arguments must be a JSON object")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, nil, sandbox.Errorf(sandbox.ErrInvalid, CodeArgsInvalid, "tool arguments are not JSON: %v", err)
	}
	return buf.Bytes(), obj, nil
}

// invoke runs the runtime through run and returns its protocol output,
// turning every way the run can end other than a clean exit into an error
// with the reason's code. what names the action for messages.
func (s *Set) invoke(ctx context.Context, run RunFunc, spec sandbox.Spec, p *sandbox.Process, what string) ([]byte, *sandbox.Result, error) {
	rctx, cancel := context.WithTimeout(ctx, p.Timeout+s.backstop)
	defer cancel()
	res, err := run(rctx, spec, p)
	interrupted := ctx.Err() != nil
	overdue := !interrupted && rctx.Err() != nil
	switch {
	case err != nil && interrupted:
		return nil, nil, sandbox.Errorf(sandbox.ErrInternal, CodeInterrupted, "%s: interrupted: %w", what, err)
	case err != nil && overdue:
		return nil, nil, sandbox.Errorf(sandbox.ErrLimit, CodeTimeout, "%s: timed out after %v", what, p.Timeout)
	case err != nil:
		return nil, nil, fmt.Errorf("%s: %w", what, err)
	case res == nil:
		return nil, nil, sandbox.Errorf(sandbox.ErrInternal, CodeSandboxFailed, "%s: the sandbox returned no result", what)
	}
	limit := func(code, format string, args ...any) error {
		return sandbox.Errorf(sandbox.ErrLimit, code, "%s: %s", what, fmt.Sprintf(format, args...))
	}
	switch res.Reason {
	case sandbox.ReasonTimeout, sandbox.ReasonCPULimit:
		return nil, nil, limit(CodeTimeout, "timed out after %v; the process tree was killed", p.Timeout)
	case sandbox.ReasonCanceled:
		if overdue {
			return nil, nil, limit(CodeTimeout, "timed out after %v; the process tree was killed", p.Timeout)
		}
		return nil, nil, sandbox.Errorf(sandbox.ErrInternal, CodeInterrupted, "%s: interrupted", what)
	case sandbox.ReasonMemoryLimit:
		return nil, nil, limit(CodeMemoryLimit, "the memory limit was hit; the process tree was killed")
	case sandbox.ReasonPidsLimit:
		return nil, nil, limit(CodePidsLimit, "the process limit was hit: %s", res.Ending())
	case sandbox.ReasonFileSizeLimit:
		return nil, nil, limit(CodeFileSizeLimit, "a write passed the file-size limit")
	case sandbox.ReasonOutputLimit:
		return nil, nil, overBound(what)
	case sandbox.ReasonExited:
		if res.ExitCode != 0 {
			return nil, nil, sandbox.Errorf(sandbox.ErrInternal, CodeSandboxFailed, "%s: the tool runtime failed: %s", what, res.Ending())
		}
		if res.StdoutTruncated {
			return nil, nil, overBound(what)
		}
		return []byte(res.Stdout), res, nil
	}
	return nil, nil, sandbox.Errorf(sandbox.ErrInternal, CodeSandboxFailed, "%s: the sandbox failed: %s", what, res.Ending())
}

func overBound(what string) error {
	return sandbox.Errorf(sandbox.ErrInternal, CodeOutputInvalid, "%s: the tool runtime's answer passed its %d-byte bound", what, protocolOutput)
}
