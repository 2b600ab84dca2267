package function

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// Every row of seed 004's failure table, with its code, message and kind.

func TestInvalidCode(t *testing.T) {
	e, _ := newExecutor(t, Options{})
	for name, code := range map[string]string{
		"empty":     "",
		"blank":     " \n\t ",
		"over":      strings.Repeat("#", MaxCode+1),
		"nul":       "def main():\n    return '\x00'",
		"not-utf-8": "def main():\n    return '\xff'",
	} {
		t.Run(name, func(t *testing.T) {
			r := e.Execute(context.Background(), &Request{Code: code})
			wantCode(t, r, CodeInvalidCode)
			if name != "nul" && name != "not-utf-8" && r.Error != "code must not be empty or exceed 64 KiB" {
				t.Errorf("error = %q", r.Error)
			}
			if !errors.Is(r.Err(), sandbox.ErrInvalid) || sandbox.CodeOf(r.Err()) != CodeInvalidCode {
				t.Errorf("Err() = %v", r.Err())
			}
		})
	}
	// Exactly 64 KiB of code runs.
	for _, lang := range languages {
		t.Run(string(lang)+"/exactly-64KiB", func(t *testing.T) {
			code := pick(lang, "def main():\n    return 1\n#", "function main() { return 1 }\n//")
			code += strings.Repeat("x", MaxCode-len(code))
			if len(code) != MaxCode {
				t.Fatal(len(code))
			}
			wantOK(t, execute(t, e, lang, code, ""), `1`)
		})
	}
}

func TestInputTooLarge(t *testing.T) {
	e, _ := newExecutor(t, Options{})
	for _, lang := range languages {
		t.Run(string(lang), func(t *testing.T) {
			requireInterpreter(t, lang)
			code := pick(lang, "def main(p):\n    return len(p)", "function main(p) { return p.length }")
			req := func(n int) *Request {
				return &Request{Code: code, Language: lang, Params: json.RawMessage(`{"p":"` + strings.Repeat("x", n) + `"}`)}
			}
			in, err := req(0).Input()
			if err != nil {
				t.Fatal(err)
			}
			n := MaxInput - len(in) // the string that makes the input exactly 128 KiB
			if in, _ := req(n).Input(); len(in) != MaxInput {
				t.Fatalf("input is %d bytes, want %d", len(in), MaxInput)
			}
			wantOK(t, e.Execute(context.Background(), req(n)), fmt.Sprint(n))
			r := e.Execute(context.Background(), req(n+1))
			wantCode(t, r, CodeInputTooLarge)
			if !strings.HasPrefix(r.Error, "function input exceeds 128 KiB") || !errors.Is(r.Err(), sandbox.ErrLimit) {
				t.Errorf("error %q, Err %v", r.Error, r.Err())
			}
		})
	}
}

// gateRunner holds every run until released, to fill the executor's slots.
type gateRunner struct {
	inner   Engine
	started chan struct{}
	release chan struct{}
}

func (g *gateRunner) Run(ctx context.Context, sel sandbox.Selection, spec sandbox.Spec, p *sandbox.Process) (*sandbox.Result, error) {
	g.started <- struct{}{}
	select {
	case <-g.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.inner.Run(ctx, sel, spec, p)
}

func TestBusy(t *testing.T) {
	requireInterpreter(t, Python)
	req := &Request{Code: "def main():\n    return 1"}
	for _, tc := range []struct {
		name  string
		queue time.Duration
	}{{"at-once", 0}, {"after-queue-timeout", 150 * time.Millisecond}} {
		t.Run(tc.name, func(t *testing.T) {
			g := &gateRunner{inner: newHostRunner(t), started: make(chan struct{}, 1), release: make(chan struct{})}
			e, err := New(g, Options{Concurrency: 1, QueueTimeout: tc.queue})
			if err != nil {
				t.Fatal(err)
			}
			first := make(chan *Response)
			go func() { first <- e.Execute(context.Background(), req) }()
			<-g.started
			start := time.Now()
			r := e.Execute(context.Background(), req)
			waited := time.Since(start)
			wantCode(t, r, CodeBusy)
			if r.Error != "function executor is busy; try again later" || !errors.Is(r.Err(), sandbox.ErrBusy) {
				t.Errorf("error %q, Err %v", r.Error, r.Err())
			}
			if waited < tc.queue || waited > tc.queue+time.Second {
				t.Errorf("busy after %v, want after %v", waited, tc.queue)
			}
			close(g.release)
			wantOK(t, <-first, `1`)
			// The slot is free again.
			g.started = make(chan struct{}, 1)
			wantOK(t, e.Execute(context.Background(), req), `1`)
		})
	}
	t.Run("waits-for-a-slot", func(t *testing.T) {
		g := &gateRunner{inner: newHostRunner(t), started: make(chan struct{}, 2), release: make(chan struct{})}
		e, err := New(g, Options{Concurrency: 1, QueueTimeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		first := make(chan *Response)
		go func() { first <- e.Execute(context.Background(), req) }()
		<-g.started
		second := make(chan *Response)
		go func() { second <- e.Execute(context.Background(), req) }()
		select {
		case r := <-second:
			t.Fatalf("second call ran beside the first: %+v", r)
		case <-time.After(200 * time.Millisecond):
		}
		close(g.release)
		wantOK(t, <-first, `1`)
		wantOK(t, <-second, `1`)
	})
	t.Run("interrupted-while-queued", func(t *testing.T) {
		g := &gateRunner{inner: newHostRunner(t), started: make(chan struct{}, 1), release: make(chan struct{})}
		e, err := New(g, Options{Concurrency: 1, QueueTimeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		first := make(chan *Response)
		go func() { first <- e.Execute(context.Background(), req) }()
		<-g.started
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		wantCode(t, e.Execute(ctx, req), CodeInterrupted)
		close(g.release)
		wantOK(t, <-first, `1`)
	})
}

// At most Concurrency runs at once, counted in the runner itself.
func TestConcurrencyLimit(t *testing.T) {
	t.Parallel()
	requireInterpreter(t, Python)
	e, h := newExecutor(t, Options{Concurrency: 2, QueueTimeout: 30 * time.Second})
	var wg sync.WaitGroup
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wantOK(t, e.Execute(context.Background(), &Request{Code: "import time\ndef main():\n    time.sleep(0.2)\n    return 1"}), `1`)
		}()
	}
	wg.Wait()
	if p := h.peakRunning(); p != 2 {
		t.Errorf("peak concurrent runs = %d, want 2", p)
	}
}

func TestTimeout(t *testing.T) {
	e, _ := newExecutor(t, Options{})
	for _, lang := range languages {
		t.Run(string(lang), func(t *testing.T) {
			t.Parallel()
			requireInterpreter(t, lang)
			code := pick(lang, "def main():\n    while True:\n        pass", "function main() { for (;;) {} }")
			start := time.Now()
			r := e.Execute(context.Background(), &Request{Code: code, Language: lang, Timeout: Duration(time.Second)})
			took := time.Since(start)
			wantCode(t, r, CodeTimeout)
			if r.Error != "execution timed out; the process tree was killed" {
				t.Errorf("error = %q", r.Error)
			}
			if took < time.Second || took > 5*time.Second {
				t.Errorf("took %v for a 1 s timeout", took)
			}
		})
	}
}

// A Runner that ignores the time limit still cannot hang Execute.
func TestTimeoutBackstop(t *testing.T) {
	t.Parallel()
	hang := EngineFunc(func(ctx context.Context, _ sandbox.Selection, _ sandbox.Spec, _ *sandbox.Process) (*sandbox.Result, error) {
		<-ctx.Done()
		return &sandbox.Result{Reason: sandbox.ReasonCanceled}, nil
	})
	e, err := New(hang, Options{})
	if err != nil {
		t.Fatal(err)
	}
	e.backstop = 100 * time.Millisecond
	start := time.Now()
	r := e.Execute(context.Background(), &Request{Code: "def main(): pass", Timeout: Duration(time.Second)})
	wantCode(t, r, CodeTimeout)
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("took %v", took)
	}
}

func TestSandboxFailed(t *testing.T) {
	e, _ := newExecutor(t, Options{})
	for _, lang := range languages {
		t.Run(string(lang)+"/exit-3", func(t *testing.T) {
			t.Parallel()
			code := pick(lang, "import os\ndef main():\n    os._exit(3)", "function main() { console.log('bye'); process.exit(3) }")
			r := execute(t, e, lang, code, "")
			wantCode(t, r, CodeSandboxFailed)
			if !strings.HasPrefix(r.Error, "sandbox failed to start or run the function: exit status 3") {
				t.Errorf("error = %q", r.Error)
			}
			if lang == JavaScript && !strings.Contains(r.Error, "bye") {
				t.Errorf("error %q lacks the function's last output", r.Error)
			}
		})
	}
	t.Run("no-interpreter", func(t *testing.T) {
		e, _ := newExecutor(t, Options{Python: "/nonexistent/python3"})
		r := e.Execute(context.Background(), &Request{Code: "def main(): pass"})
		wantCode(t, r, CodeSandboxFailed)
		if !strings.Contains(r.Error, "/nonexistent/python3") || !errors.Is(r.Err(), sandbox.ErrInternal) {
			t.Errorf("error %q, Err %v", r.Error, r.Err())
		}
	})
	t.Run("signaled", func(t *testing.T) {
		e, _ := newExecutor(t, Options{})
		r := execute(t, e, Python, "import os, signal\ndef main():\n    os.kill(os.getpid(), signal.SIGKILL)", "")
		wantCode(t, r, CodeSandboxFailed)
		if !strings.Contains(r.Error, "signaled (SIGKILL)") {
			t.Errorf("error = %q", r.Error)
		}
	})
}

func TestIsolationUnavailable(t *testing.T) {
	r := EngineFunc(func(context.Context, sandbox.Selection, sandbox.Spec, *sandbox.Process) (*sandbox.Result, error) {
		return nil, fmt.Errorf("selecting a backend: %w",
			sandbox.Errorf(sandbox.ErrUnavailable, "backend_unavailable", "gvisor: runsc does not start"))
	})
	e, err := New(r, Options{})
	if err != nil {
		t.Fatal(err)
	}
	resp := e.Execute(context.Background(), &Request{Code: "def main(): pass", MinIsolation: "kernel"})
	wantCode(t, resp, CodeIsolationUnavailable)
	if !strings.Contains(resp.Error, "runsc does not start") || !strings.HasSuffix(resp.Error, "the code was not run") {
		t.Errorf("error = %q", resp.Error)
	}
	if !errors.Is(resp.Err(), sandbox.ErrUnavailable) {
		t.Errorf("Err %v", resp.Err())
	}
}

// fakeResult is a Runner whose sandbox misbehaves in a given way: the
// fault injection the real runners never do on their own.
func fakeResult(res sandbox.Result) Engine {
	return EngineFunc(func(context.Context, sandbox.Selection, sandbox.Spec, *sandbox.Process) (*sandbox.Result, error) {
		r := res
		if r.Reason == "" {
			r.Reason = sandbox.ReasonExited
		}
		return &r, nil
	})
}

func TestOutputAndResponseInvalid(t *testing.T) {
	cases := []struct {
		name string
		res  sandbox.Result
		code string
	}{
		{"empty", sandbox.Result{}, CodeOutputInvalid},
		{"not-json", sandbox.Result{Stdout: "Traceback: oops"}, CodeOutputInvalid},
		{"two-documents", sandbox.Result{Stdout: `{"ok":true,"data":1}{"ok":false}`}, CodeOutputInvalid},
		{"nan", sandbox.Result{Stdout: `{"ok":true,"data":NaN}`}, CodeOutputInvalid},
		{"over-limit", sandbox.Result{Stdout: `{"ok":true,"data":1}`, StdoutTruncated: true}, CodeOutputInvalid},
		{"output-limit", sandbox.Result{Reason: sandbox.ReasonOutputLimit}, CodeOutputInvalid},
		{"not-an-object", sandbox.Result{Stdout: `[1]`}, CodeResponseInvalid},
		{"no-ok", sandbox.Result{Stdout: `{"data":1}`}, CodeResponseInvalid},
		{"ok-not-bool", sandbox.Result{Stdout: `{"ok":"yes","data":1}`}, CodeResponseInvalid},
		{"no-data", sandbox.Result{Stdout: `{"ok":true}`}, CodeResponseInvalid},
		{"unknown-field", sandbox.Result{Stdout: `{"ok":true,"data":1,"extra":2}`}, CodeResponseInvalid},
		{"no-error", sandbox.Result{Stdout: `{"ok":false,"code":"user_error"}`}, CodeResponseInvalid},
		{"foreign-code", sandbox.Result{Stdout: `{"ok":false,"code":"busy","error":"x"}`}, CodeResponseInvalid},
		{"result-over", sandbox.Result{Stdout: `{"ok":true,"data":"` + strings.Repeat("x", MaxResult) + `"}`}, CodeResultTooLarge},
		{"memory", sandbox.Result{Reason: sandbox.ReasonMemoryLimit}, CodeMemoryLimit},
		{"sandbox-error", sandbox.Result{Reason: sandbox.ReasonSandboxError, Message: "mount failed"}, CodeSandboxFailed},
		{"cpu", sandbox.Result{Reason: sandbox.ReasonCPULimit}, CodeTimeout},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, err := New(fakeResult(tc.res), Options{})
			if err != nil {
				t.Fatal(err)
			}
			r := e.Execute(context.Background(), &Request{Code: "def main(): pass"})
			wantCode(t, r, tc.code)
			if tc.code == CodeOutputInvalid && !strings.HasPrefix(r.Error, "function output is invalid or over its limit") {
				t.Errorf("error = %q", r.Error)
			}
			if tc.code == CodeResponseInvalid && !strings.HasPrefix(r.Error, "function response is not a valid response") {
				t.Errorf("error = %q", r.Error)
			}
		})
	}
	// The real runner, when the function leaves without answering.
	for _, lang := range languages {
		t.Run(string(lang)+"/exit-0", func(t *testing.T) {
			e, _ := newExecutor(t, Options{})
			code := pick(lang, "import os\ndef main():\n    os._exit(0)", "function main() { process.exit(0) }")
			wantCode(t, execute(t, e, lang, code, ""), CodeOutputInvalid)
		})
	}
}

func TestInterrupted(t *testing.T) {
	e, _ := newExecutor(t, Options{})
	for _, lang := range languages {
		t.Run(string(lang), func(t *testing.T) {
			t.Parallel()
			requireInterpreter(t, lang)
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(300*time.Millisecond, cancel)
			code := pick(lang, "import time\ndef main():\n    time.sleep(10)", "function main() { return new Promise(r => setTimeout(r, 10000)) }")
			start := time.Now()
			r := e.Execute(ctx, &Request{Code: code, Language: lang})
			wantCode(t, r, CodeInterrupted)
			if r.Error != "execution was interrupted" || time.Since(start) > 5*time.Second {
				t.Errorf("error %q after %v", r.Error, time.Since(start))
			}
		})
	}
}

func TestInvalidRequest(t *testing.T) {
	e, err := New(fakeResult(sandbox.Result{Stdout: `{"ok":true,"data":1}`}), Options{})
	if err != nil {
		t.Fatal(err)
	}
	ok := Request{Code: "def main(): pass"}
	cases := map[string]func(r *Request){
		"mode":          func(r *Request) { r.Mode = "run" },
		"language":      func(r *Request) { r.Language = "ruby" },
		"timeout-low":   func(r *Request) { r.Timeout = Duration(999 * time.Millisecond) },
		"timeout-high":  func(r *Request) { r.Timeout = Duration(61 * time.Second) },
		"timeout-neg":   func(r *Request) { r.Timeout = Duration(-time.Second) },
		"params-array":  func(r *Request) { r.Params = json.RawMessage(`[1]`) },
		"params-bad":    func(r *Request) { r.Params = json.RawMessage(`{"a":}`) },
		"entry-space":   func(r *Request) { r.Entrypoint = "a b" },
		"entry-call":    func(r *Request) { r.Entrypoint = "main()" },
		"entry-digit":   func(r *Request) { r.Entrypoint = "1main" },
		"entry-dollar":  func(r *Request) { r.Entrypoint = "$main" }, // Python has no $
		"entry-long":    func(r *Request) { r.Entrypoint = strings.Repeat("a", MaxEntrypoint+1) },
		"min-isolation": func(r *Request) { r.MinIsolation = "strong" },
		"backend-space": func(r *Request) { r.Backend = "na tive" },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			r := ok
			mutate(&r)
			resp := e.Execute(context.Background(), &r)
			wantCode(t, resp, CodeInvalidRequest)
			if !errors.Is(resp.Err(), sandbox.ErrInvalid) {
				t.Errorf("Err %v", resp.Err())
			}
		})
	}
	// Each bound is accepted on its inner side.
	for name, mutate := range map[string]func(r *Request){
		"timeout-1s":    func(r *Request) { r.Timeout = Duration(time.Second) },
		"timeout-60s":   func(r *Request) { r.Timeout = Duration(60 * time.Second) },
		"params-null":   func(r *Request) { r.Params = json.RawMessage(`null`) },
		"entry-unicode": func(r *Request) { r.Entrypoint = "函数_1" },
		"entry-js":      func(r *Request) { r.Entrypoint, r.Language = "$main", JavaScript },
		"entry-255":     func(r *Request) { r.Entrypoint = strings.Repeat("a", MaxEntrypoint) },
		"min-isolation": func(r *Request) { r.MinIsolation = "process" },
		"lint":          func(r *Request) { r.Mode = ModeLint },
	} {
		t.Run("accepts/"+name, func(t *testing.T) {
			r := ok
			mutate(&r)
			if err := r.Validate(); err != nil {
				t.Fatal(err)
			}
		})
	}
	wantCode(t, e.Execute(context.Background(), nil), CodeInvalidRequest)
	if _, err := New(nil, Options{}); err == nil {
		t.Error("New accepted a nil runner")
	}
	for _, o := range []Options{{Concurrency: -1}, {QueueTimeout: -1}, {DefaultTimeout: 500 * time.Millisecond}, {DefaultTimeout: 2 * time.Minute}} {
		if _, err := New(fakeResult(sandbox.Result{}), o); err == nil {
			t.Errorf("New accepted %+v", o)
		}
	}
}

// Runner errors of other kinds map to codes once.
func TestRunnerErrors(t *testing.T) {
	for kind, code := range map[*sandbox.Kind]string{
		sandbox.ErrInvalid:  CodeInvalidRequest,
		sandbox.ErrNotFound: CodeInvalidRequest,
		sandbox.ErrBusy:     CodeBusy,
		sandbox.ErrDenied:   CodeDenied,
		sandbox.ErrLimit:    CodeSandboxFailed,
		sandbox.ErrInternal: CodeSandboxFailed,
	} {
		e, _ := New(EngineFunc(func(context.Context, sandbox.Selection, sandbox.Spec, *sandbox.Process) (*sandbox.Result, error) {
			return nil, sandbox.Errorf(kind, "x", "engine said no")
		}), Options{})
		r := e.Execute(context.Background(), &Request{Code: "def main(): pass"})
		wantCode(t, r, code)
		if !strings.Contains(r.Error, "engine said no") {
			t.Errorf("%s: error %q", code, r.Error)
		}
	}
	e, _ := New(EngineFunc(func(context.Context, sandbox.Selection, sandbox.Spec, *sandbox.Process) (*sandbox.Result, error) {
		return nil, nil
	}), Options{})
	wantCode(t, e.Execute(context.Background(), &Request{Code: "def main(): pass"}), CodeSandboxFailed)
}

// A panicking Runner is an internal_error response, and frees its slot.
func TestRunnerPanic(t *testing.T) {
	calls := 0
	e, err := New(EngineFunc(func(context.Context, sandbox.Selection, sandbox.Spec, *sandbox.Process) (*sandbox.Result, error) {
		calls++
		if calls == 1 {
			panic("boom")
		}
		return &sandbox.Result{Reason: sandbox.ReasonExited, Stdout: `{"ok":true,"data":2}`}, nil
	}), Options{Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	r := e.Execute(context.Background(), &Request{Code: "def main(): pass"})
	wantCode(t, r, CodeInternal)
	wantOK(t, e.Execute(context.Background(), &Request{Code: "def main(): pass"}), `2`)
}

// What reaches the Engine: the runner on argv, the request on stdin, the
// timeout as the wall limit, no files, and the call's selection.
func TestEngineSeam(t *testing.T) {
	var (
		spec  sandbox.Spec
		proc  *sandbox.Process
		stdin []byte
		got   sandbox.Selection
	)
	e, err := New(EngineFunc(func(ctx context.Context, sel sandbox.Selection, s sandbox.Spec, p *sandbox.Process) (*sandbox.Result, error) {
		spec, proc, got = s, p, sel
		stdin, _ = io.ReadAll(p.Stdin)
		return &sandbox.Result{Reason: sandbox.ReasonExited, Stdout: `{"ok":true,"data":null}`, Backend: "gvisor", Isolation: sandbox.IsolationKernel}, nil
	}), Options{Limits: sandbox.Limits{Memory: 128 * sandbox.MiB}})
	if err != nil {
		t.Fatal(err)
	}
	req := &Request{Code: "def main(): pass", Timeout: Duration(3 * time.Second), Backend: "gvisor", Tier: "strong", MinIsolation: "kernel"}
	r := e.Execute(context.Background(), req)
	wantOK(t, r, `null`)
	if r.Backend != "gvisor" || r.Isolation != "kernel" {
		t.Errorf("backend/isolation = %s/%s", r.Backend, r.Isolation)
	}
	if want := (sandbox.Selection{Backend: "gvisor", Tier: "strong", MinIsolation: "kernel"}); got != want {
		t.Errorf("selection = %+v, want %+v", got, want)
	}
	if spec.Limits.Wall != 3*time.Second || proc.Timeout != 3*time.Second || spec.Limits.Memory != 128*sandbox.MiB || len(spec.Files) != 0 {
		t.Errorf("spec = %+v, timeout %v", spec, proc.Timeout)
	}
	if err := spec.Validate(); err != nil {
		t.Error(err)
	}
	if err := proc.Validate(); err != nil {
		t.Error(err)
	}
	if want := []string{"python3", "-I", "-B", "-c", pythonBootstrap}; strings.Join(proc.Args, "\x00") != strings.Join(want, "\x00") {
		t.Errorf("args = %q", proc.Args)
	}
	if string(stdin) != `{"code":"def main(): pass","params":{},"entrypoint":"","mode":"execute"}` {
		t.Errorf("stdin = %s", stdin)
	}
	req.Language = JavaScript
	wantOK(t, e.Execute(context.Background(), req), `null`)
	if len(proc.Args) != 3 || proc.Args[0] != "node" || proc.Args[1] != "-e" || proc.Args[2] != javascriptBootstrap {
		t.Errorf("args = %q", proc.Args)
	}
}

// The error message keeps 4 KiB, the traceback 16 KiB.
func TestErrorBounds(t *testing.T) {
	e, _ := newExecutor(t, Options{})
	for _, lang := range languages {
		for _, n := range []int{4096, 4097} {
			t.Run(fmt.Sprintf("%s/%d", lang, n), func(t *testing.T) {
				t.Parallel()
				code := pick(lang, fmt.Sprintf("def main():\n    raise ValueError('x' * %d)", n),
					fmt.Sprintf("function main() { throw new Error('x'.repeat(%d)) }", n))
				r := execute(t, e, lang, code, "")
				wantCode(t, r, CodeUserError)
				if len(r.Error) != 4096 {
					t.Errorf("error is %d bytes, want 4096", len(r.Error))
				}
			})
		}
	}
	t.Run("python/traceback", func(t *testing.T) {
		t.Parallel()
		// Mutual recursion: frames alternate, so Python cannot fold them.
		r := execute(t, e, Python, "def a():\n    return b()\ndef b():\n    return a()\ndef main():\n    return a()", "")
		wantCode(t, r, CodeUserError)
		if r.Type != "RecursionError" || len(r.Traceback) > 16384 || len(r.Traceback) < 16000 || !strings.HasSuffix(r.Traceback, "maximum recursion depth exceeded\n") {
			t.Errorf("type %s, traceback of %d bytes ending %q", r.Type, len(r.Traceback), r.Traceback[max(0, len(r.Traceback)-80):])
		}
	})
}

func TestDiagnosticsBound(t *testing.T) {
	diags := func(n int) string {
		d := make([]Diagnostic, n)
		for i := range d {
			d[i] = Diagnostic{Line: 1, Column: 0, EndLine: 1, EndColumn: 1, Message: "m", Type: "error"}
		}
		b, _ := json.Marshal(map[string]any{"ok": true, "diagnostics": d})
		return string(b)
	}
	if r := decodeOutput([]byte(diags(maxDiagnostics)), ModeLint); !r.OK || len(r.Diagnostics) != maxDiagnostics {
		t.Errorf("%d diagnostics: %+v", maxDiagnostics, r.Error)
	}
	wantCode(t, decodeOutput([]byte(diags(maxDiagnostics+1)), ModeLint), CodeResponseInvalid)
	wantCode(t, decodeOutput([]byte(`{"ok":true,"diagnostics":[{"line":0,"column":0,"endLine":1,"endColumn":1,"message":"m","type":"error"}]}`), ModeLint), CodeResponseInvalid)
	wantCode(t, decodeOutput([]byte(`{"ok":true}`), ModeLint), CodeResponseInvalid)
}
