package tool

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// These tests need no sandbox: a scripted RunFunc answers as a runtime
// (or a broken one) would.

const listAnswer = `{"ok": true, "tools": [{"name": "echo", "description": "d",
  "parameters": {"type": "object", "properties": {"n": {"type": "integer", "maximum": 3}}}, "source": "builtin"}],
  "problems": []}`

// scripted answers a list with listAnswer and a run with res (or err).
type scripted struct {
	res   *sandbox.Result
	err   error
	block bool // wait for the context instead
	runs  int
	last  *sandbox.Process
	spec  sandbox.Spec
}

func (f *scripted) run(ctx context.Context, spec sandbox.Spec, p *sandbox.Process) (*sandbox.Result, error) {
	if p.Env["EXECBOX_TOOL_ACTION"] == "list" {
		return &sandbox.Result{Reason: sandbox.ReasonExited, Stdout: listAnswer}, nil
	}
	f.runs++
	f.last, f.spec = p, spec
	if f.block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return f.res, f.err
}

func exited(stdout string) *sandbox.Result {
	return &sandbox.Result{Reason: sandbox.ReasonExited, Stdout: stdout, Backend: "fake", Isolation: sandbox.IsolationProcess}
}

func TestRunMapsEnds(t *testing.T) {
	s := newSet(t)
	for _, c := range []struct {
		name string
		res  *sandbox.Result
		err  error
		kind *sandbox.Kind
		code string
	}{
		{"timeout", &sandbox.Result{Reason: sandbox.ReasonTimeout}, nil, sandbox.ErrLimit, CodeTimeout},
		{"cpu", &sandbox.Result{Reason: sandbox.ReasonCPULimit}, nil, sandbox.ErrLimit, CodeTimeout},
		{"memory", &sandbox.Result{Reason: sandbox.ReasonMemoryLimit}, nil, sandbox.ErrLimit, CodeMemoryLimit},
		{"pids", &sandbox.Result{Reason: sandbox.ReasonPidsLimit}, nil, sandbox.ErrLimit, CodePidsLimit},
		{"fsize", &sandbox.Result{Reason: sandbox.ReasonFileSizeLimit}, nil, sandbox.ErrLimit, CodeFileSizeLimit},
		{"canceled", &sandbox.Result{Reason: sandbox.ReasonCanceled}, nil, sandbox.ErrInternal, CodeInterrupted},
		{"output", &sandbox.Result{Reason: sandbox.ReasonOutputLimit}, nil, sandbox.ErrInternal, CodeOutputInvalid},
		{"truncated", &sandbox.Result{Reason: sandbox.ReasonExited, Stdout: `{"ok":`, StdoutTruncated: true}, nil, sandbox.ErrInternal, CodeOutputInvalid},
		{"exit 70", &sandbox.Result{Reason: sandbox.ReasonExited, ExitCode: 70, Stderr: "execbox tool runtime: Traceback…"}, nil, sandbox.ErrInternal, CodeSandboxFailed},
		{"not found", &sandbox.Result{Reason: sandbox.ReasonExited, ExitCode: 127, Message: "python3: not found"}, nil, sandbox.ErrInternal, CodeSandboxFailed},
		{"signaled", &sandbox.Result{Reason: sandbox.ReasonSignaled, Signal: "SIGSEGV", ExitCode: -1}, nil, sandbox.ErrInternal, CodeSandboxFailed},
		{"sandbox error", &sandbox.Result{Reason: sandbox.ReasonSandboxError, Message: "mount failed"}, nil, sandbox.ErrInternal, CodeSandboxFailed},
		{"no result", nil, nil, sandbox.ErrInternal, CodeSandboxFailed},
		{"engine error", nil, sandbox.Errorf(sandbox.ErrUnavailable, "isolation_unsupported", "no such isolation"), sandbox.ErrUnavailable, "isolation_unsupported"},
		{"busy", nil, sandbox.Errorf(sandbox.ErrBusy, "busy", "busy"), sandbox.ErrBusy, "busy"},
		{"empty", exited(""), nil, sandbox.ErrInternal, CodeOutputInvalid},
		{"refused unknown", exited(`{"ok": false, "failure": {"code": "tool_not_found", "message": "no tool named 'echo'"}}`), nil, sandbox.ErrNotFound, CodeNotFound},
		{"refused broken", exited(`{"ok": false, "failure": {"code": "tool_invalid", "message": "m"}}`), nil, sandbox.ErrInvalid, CodeToolInvalid},
		{"refused args", exited(`{"ok": false, "failure": {"code": "args_invalid", "message": "m"}}`), nil, sandbox.ErrInvalid, CodeArgsInvalid},
		{"refused other", exited(`{"ok": false, "failure": {"code": "action_invalid", "message": "m"}}`), nil, sandbox.ErrInternal, CodeSandboxFailed},
	} {
		f := &scripted{res: c.res, err: c.err}
		_, err := s.Run(t.Context(), f.run, Call{Name: "echo"})
		if sandbox.KindOf(err) != c.kind || sandbox.CodeOf(err) != c.code {
			t.Errorf("%s: got %v/%s: %v, want %s/%s", c.name, sandbox.KindOf(err), sandbox.CodeOf(err), err, c.kind.Code(), c.code)
		}
		if err != nil && !strings.Contains(err.Error(), "echo") && c.err == nil {
			t.Errorf("%s: %q does not name the tool", c.name, err)
		}
	}
}

func TestRunSpec(t *testing.T) {
	dir := toolsDir(t, nil)
	s := newSet(t, dir)
	f := &scripted{res: exited(`{"ok": true, "result": {"n": 1}}`)}
	f.res.Stderr = "printed\n"
	f.res.Artifacts = []sandbox.Artifact{{Path: "a"}}
	r, err := s.Run(t.Context(), f.run, Call{Name: "echo", Args: json.RawMessage(` { "n" : 2 } `), Network: sandbox.NetworkHost,
		Limits: sandbox.Limits{Memory: 64 * sandbox.MiB, Output: 1}, Timeout: 3 * time.Second, Files: map[string][]byte{"in": []byte("x")}})
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK || string(r.Result) != `{"n": 1}` || r.Output != "printed\n" || len(r.Artifacts) != 1 || r.Backend != "fake" || r.Isolation != "process" || r.Source != Builtin {
		t.Fatalf("response %+v", r)
	}
	p, spec := f.last, f.spec
	if p.Env["EXECBOX_TOOL_ARGS"] != `{"n":2}` || p.Env["EXECBOX_TOOL_NAME"] != "echo" || p.Env["EXECBOX_TOOL_NETWORK"] != "host" || p.Env["EXECBOX_TOOL_DIRS"] != "/execbox/tools/0" || p.Timeout != 3*time.Second {
		t.Fatalf("process %+v", p)
	}
	if strings.Join(p.Args, " ") != "python3 -I -B -X utf8 /execbox/tool/entry.py" {
		t.Fatalf("args %q", p.Args)
	}
	l := spec.Limits
	if l.Wall != 3*time.Second || l.Output != protocolOutput || l.Memory != 64*sandbox.MiB || spec.Policy.Network != sandbox.NetworkHost || string(spec.Files["in"]) != "x" {
		t.Fatalf("spec %+v", spec)
	}
	m := spec.Policy.Mounts
	if len(m) != 2 || m[0].Target != RuntimeTarget || m[0].Writable || m[1].Target != "/execbox/tools/0" || m[1].Source != dir || m[1].Writable {
		t.Fatalf("mounts %+v", m)
	}
	if err := spec.Validate(); err != nil {
		t.Fatal(err)
	}
	// The schema was checked before: n 4 is over its maximum.
	_, err = s.Run(t.Context(), f.run, Call{Name: "echo", Args: json.RawMessage(`{"n": 4}`)})
	wantErr(t, err, sandbox.ErrInvalid, CodeArgsInvalid)
	if f.runs != 1 {
		t.Fatalf("%d runs", f.runs)
	}
}

// TestBackstop: a RunFunc that never ends the run is given up on after
// the timeout and the backstop.
func TestBackstop(t *testing.T) {
	s := newSet(t)
	if _, err := s.List(t.Context(), (&scripted{}).run); err != nil {
		t.Fatal(err)
	}
	s.backstop = 200 * time.Millisecond
	f := &scripted{block: true}
	start := time.Now()
	_, err := s.Run(t.Context(), f.run, Call{Name: "echo", Timeout: 100 * time.Millisecond})
	wantErr(t, err, sandbox.ErrLimit, CodeTimeout)
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("gave up after %v, before the backstop", d)
	}
}

func TestDecodeRun(t *testing.T) {
	for _, c := range []struct {
		out  string
		code string // "" = accepted
	}{
		{`{"ok": true, "result": null}`, ""},
		{`{"ok": true, "result": [1, "x"]}` + "\n", ""},
		{`{"ok": false, "error": {"code": "tool_error", "type": "ValueError", "message": "m", "traceback": "t"}}`, ""},
		{`{"ok": false, "error": {"code": "custom_code", "message": ""}}`, ""},
		{``, CodeOutputInvalid},
		{`junk`, CodeOutputInvalid},
		{`{"ok": true, "result": 1} {"ok": true, "result": 2}`, CodeOutputInvalid},
		{`{"ok": true, "result": 1}junk`, CodeOutputInvalid},
		{`{"ok": true}`, CodeOutputInvalid},
		{`{"result": 1}`, CodeOutputInvalid},
		{`{"ok": "yes", "result": 1}`, CodeOutputInvalid},
		{`{"ok": true, "result": 1, "extra": 1}`, CodeOutputInvalid},
		{`{"ok": true, "result": 1, "error": {"code": "x", "message": "m"}}`, CodeOutputInvalid},
		{`{"ok": false}`, CodeOutputInvalid},
		{`{"ok": false, "result": 1, "error": {"code": "x", "message": "m"}}`, CodeOutputInvalid},
		{`{"ok": false, "error": {"code": "Bad Code", "message": "m"}}`, CodeOutputInvalid},
		{`{"ok": false, "error": {"code": "x", "message": "m", "more": 1}}`, CodeOutputInvalid},
		{`{"ok": false, "failure": {"code": "", "message": "m"}}`, CodeOutputInvalid},
		{`{"ok": false, "failure": {"code": "args_invalid", "message": "m"}, "error": {"code": "x", "message": "m"}}`, CodeOutputInvalid},
		{`[]`, CodeOutputInvalid},
		{`null`, CodeOutputInvalid},
		{`{"ok": true, "result": "` + strings.Repeat("x", MaxResult) + `"}`, CodeOutputInvalid},
	} {
		w, err := decodeRun([]byte(c.out))
		if got := sandbox.CodeOf(err); got != c.code || (err == nil) != (w != nil) {
			t.Errorf("%.80q: code %q (%v), want %q", c.out, got, err, c.code)
		}
	}
	w, _ := decodeRun([]byte(`{"ok": false, "error": {"code": "x", "type": "` + strings.Repeat("T", 1000) + `", "message": "\udc80` + strings.Repeat("é", maxMessage) + `"}}`))
	if len(w.Error.Type) != maxType || len(w.Error.Message) > maxMessage {
		t.Fatalf("not bounded: type %d, message %d bytes", len(w.Error.Type), len(w.Error.Message))
	}
}

func TestDecodeList(t *testing.T) {
	tool := func(name, params string) string {
		return `{"ok": true, "tools": [{"name": "` + name + `", "description": "d", "parameters": ` + params + `, "source": "builtin"}], "problems": []}`
	}
	for _, c := range []struct {
		out  string
		code string
	}{
		{tool("a-b_c", `{}`), ""},
		{`{"ok": true, "tools": [], "problems": [{"name": "", "source": "builtin", "message": "m"}]}`, ""},
		{`{"ok": true, "problems": []}`, CodeOutputInvalid},
		{tool("a b", `{}`), CodeOutputInvalid},
		{tool("", `{}`), CodeOutputInvalid},
		{tool("a", `[]`), CodeOutputInvalid},
		{tool("a", `true`), CodeOutputInvalid},
		{tool("a", `{"x": "`+strings.Repeat("x", maxParameters)+`"}`), CodeOutputInvalid},
		{`{"ok": true, "tools": [{"name": "a", "description": "", "parameters": {}, "source": "builtin"}]}`, CodeOutputInvalid},
		{`{"ok": true, "tools": [], "problems": [{"name": "a", "source": "builtin", "message": ""}]}`, CodeOutputInvalid},
		{`{"ok": true, "tools": [], "failure": {"code": "x", "message": "m"}}`, CodeOutputInvalid},
		{`{"ok": false, "failure": {"code": "action_invalid", "message": "m"}}`, CodeSandboxFailed},
		{`{"ok": true, "tools": [` + strings.Repeat(`{"name": "a", "description": "d", "parameters": {}, "source": "builtin"},`, maxTools) + `{"name": "a", "description": "d", "parameters": {}, "source": "builtin"}]}`, CodeOutputInvalid},
	} {
		w, err := decodeList([]byte(c.out))
		if got := sandbox.CodeOf(err); got != c.code || (err == nil) != (w != nil) {
			t.Errorf("%.80q: code %q (%v), want %q", c.out, got, err, c.code)
		}
	}
}

// TestDiscoverRefusesStrangeAnswers: sources and names the runtime cannot
// have meant fail the list.
func TestDiscoverRefusesStrangeAnswers(t *testing.T) {
	s := newSet(t)
	for _, out := range []string{
		`{"ok": true, "tools": [{"name": "a", "description": "d", "parameters": {}, "source": "/elsewhere"}], "problems": []}`,
		`{"ok": true, "tools": [], "problems": [{"name": "a", "source": "/execbox/tools/9", "message": "m"}]}`,
		`{"ok": true, "tools": [{"name": "a", "description": "d", "parameters": {}, "source": "builtin"}, {"name": "a", "description": "d", "parameters": {}, "source": "builtin"}], "problems": []}`,
	} {
		run := func(context.Context, sandbox.Spec, *sandbox.Process) (*sandbox.Result, error) {
			return exited(out), nil
		}
		_, err := s.List(t.Context(), run)
		wantErr(t, err, sandbox.ErrInternal, CodeOutputInvalid)
	}
}

func TestResolveSchema(t *testing.T) {
	for schema, ok := range map[string]bool{
		`{}`: true,
		`{"type": "object", "properties": {"a": {"type": ["string", "null"]}}, "$defs": {"x": {"type": "integer"}}}`: true,
		`{"type": ["object"]}`:                                    true,
		`{"type": "string"}`:                                      false,
		`{"type": ["object", "null"]}`:                            false,
		`{"properties": {"a": {"type": "nonsense"}}}`:             false,
		`{"properties": {"a": {"items": {"type": "int"}}}}`:       false,
		`{"anyOf": [{"type": "object"}, {"type": "objekt"}]}`:     false,
		`{"properties": {"a": {"$ref": "http://example.com/s"}}}`: false,
		`{"properties": {"a": {"pattern": "("}}}`:                 false,
		`{"type": 3}`: false,
	} {
		_, err := resolveSchema(json.RawMessage(schema))
		if (err == nil) != ok {
			t.Errorf("%s: %v, want ok %v", schema, err, ok)
		}
	}
}

// FuzzDecode: no answer makes the decoders panic; an accepted run answer
// stays within its bounds.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{listAnswer, `{"ok": true, "result": {"a": [1]}}`, `{"ok": false, "error": {"code": "x", "message": "m"}}`,
		`{"ok": false, "failure": {"code": "tool_not_found", "message": "m"}}`, `null`, `{`, `{"ok": true, "tools": null}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		decodeList(b)
		w, err := decodeRun(b)
		if err != nil {
			var e *sandbox.Error
			if !errors.As(err, &e) || e.Code == "" {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if *w.OK && len(w.Result) > MaxResult || !*w.OK && (w.Error == nil || len(w.Error.Message) > maxMessage) {
			t.Fatalf("out of bounds: %+v", w)
		}
	})
}
