package sandboxtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/execbox/execbox/agent"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
)

// testAgent is the session part that needs a process lasting beside the
// execs: a session's agent runs in a sandbox — interpreter contexts that
// keep their state, a terminal, and execs through the agent beside them.
func (s *suite) testAgent(t *testing.T) {
	s.run(t, "contexts", s.agentContexts)
	s.run(t, "terminal", s.agentTerminal)
	s.run(t, "exec", s.agentExec)
}

// startAgent starts an agent in a new sandbox.
func (s *suite) startAgent(t *testing.T) (sandbox.Sandbox, *agent.Agent) {
	t.Helper()
	sb := s.create(t, s.spec(func(sp *sandbox.Spec) { sp.Limits.Wall = 20 * time.Second }))
	a, err := agent.Start(t.Context(), sb, 2*time.Minute)
	if err != nil {
		t.Fatalf("starting the agent: %v", err)
	}
	t.Cleanup(a.Close)
	return sb, a
}

func runCode(t *testing.T, a *agent.Agent, id, code string, timeout time.Duration) *agent.CodeResult {
	t.Helper()
	res, err := a.RunCode(t.Context(), id, code, timeout, 1<<20, nil, nil)
	if err != nil {
		t.Fatalf("running %q: %v", code, err)
	}
	return res
}

// agentContexts: a Python context keeps a variable, an import and a
// function across calls and returns the last expression's value; an
// infinite loop is interrupted at its timeout and the context lives on;
// an error comes back typed with its traceback; a JavaScript context keeps
// its state too.
func (s *suite) agentContexts(t *testing.T) {
	_, a := s.startAgent(t)
	if err := a.NewContext(t.Context(), "py", "python"); err != nil {
		t.Fatal(err)
	}
	setup := "import math\nx = 20\ndef f(y):\n    return x + y"
	if res := runCode(t, a, "py", setup, 10*time.Second); !res.OK {
		t.Fatalf("%q: %+v", setup, res)
	}
	res := runCode(t, a, "py", "print('hi')\n{'v': f(math.floor(1.9)) + 21, 'l': [1, 2]}", 10*time.Second)
	if !res.OK || res.Stdout != "hi\n" || !jsonEq(res.Value, `{"v": 42, "l": [1, 2]}`) {
		t.Fatalf("python call: %+v (value %s)", res, res.Value)
	}
	res = runCode(t, a, "py", "object()", 10*time.Second)
	if !res.OK || res.Value != nil || !strings.HasPrefix(res.Repr, "<object object") {
		t.Fatalf("a value JSON cannot carry: %+v", res)
	}
	start := time.Now()
	res = runCode(t, a, "py", "x = 99\nwhile True:\n    pass", time.Second)
	if res.OK || !res.Interrupted || res.Lost || res.Error == nil || res.Error.Type != "TimeoutError" {
		t.Fatalf("an infinite loop: %+v", res)
	}
	if d := time.Since(start); d > 8*time.Second {
		t.Fatalf("the loop was interrupted after %v", d)
	}
	res = runCode(t, a, "py", "x", 10*time.Second)
	if !res.OK || string(res.Value) != "99" {
		t.Fatalf("after the interrupt the context has x = %s (%+v)", res.Value, res)
	}
	res = runCode(t, a, "py", "def g():\n    raise ValueError('bad')\ng()", 10*time.Second)
	if res.OK || res.Error == nil || res.Error.Type != "ValueError" || res.Error.Message != "bad" || !strings.Contains(res.Error.Traceback, "line 2, in g") {
		t.Fatalf("an error: %+v", res.Error)
	}
	// An error message of 10 MB is cut (the agent's lines are bounded);
	// the context lives on.
	res = runCode(t, a, "py", "raise ValueError('x' * 10**7)", 10*time.Second)
	if res.OK || res.Error == nil || len(res.Error.Message) != 64*1024 {
		t.Fatalf("a 10 MB error message: ok %v, lost %v, error %.200v", res.OK, res.Lost, res.Error)
	}
	if res = runCode(t, a, "py", "x", 10*time.Second); string(res.Value) != "99" {
		t.Fatalf("after a 10 MB error message: %+v", res)
	}
	if _, err := a.RunCode(t.Context(), "nope", "1", time.Second, 1024, nil, nil); sandbox.CodeOf(err) != "context_not_found" {
		t.Fatalf("a call in no context: %v", err)
	}
	// A context that does not survive says so.
	res = runCode(t, a, "py", "import os\nos._exit(3)", 10*time.Second)
	if res.OK || !res.Lost {
		t.Fatalf("an interpreter that exits: %+v", res)
	}
	if _, err := a.RunCode(t.Context(), "py", "1", time.Second, 1024, nil, nil); sandbox.CodeOf(err) != "context_not_found" {
		t.Fatalf("a call in a lost context: %v", err)
	}

	err := a.NewContext(t.Context(), "js", "javascript")
	if s.cfg.noNode != "" {
		if sandbox.CodeOf(err) != "language_unavailable" {
			t.Fatalf("a JavaScript context where the backend declares no node (%s): want language_unavailable, got %v", s.cfg.noNode, err)
		}
		return
	}
	if sandbox.CodeOf(err) == "language_unavailable" {
		testutil.SkipOrFail(t, "node", "no node in the sandbox for a JavaScript context (declare it with WithoutNode if that is by design): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	runCode(t, a, "js", "var n = 40; function add(a, b) { return a + b }", 10*time.Second)
	res = runCode(t, a, "js", "console.log('js'); ({sum: add(n, 2)})", 10*time.Second)
	if !res.OK || res.Stdout != "js\n" || !jsonEq(res.Value, `{"sum": 42}`) {
		t.Fatalf("javascript call: %+v (value %s)", res, res.Value)
	}
	res = runCode(t, a, "js", "while (true) {}", time.Second)
	if res.OK || !res.Interrupted {
		t.Fatalf("a javascript loop: %+v", res)
	}
	if res = runCode(t, a, "js", "n", 10*time.Second); string(res.Value) != "40" {
		t.Fatalf("after the interrupt n = %s", res.Value)
	}
}

// sleepMarker is a sleep duration unique to this test process and n, so
// that where pids are shared (local) the processes running it are its own.
func sleepMarker(n int) string {
	return fmt.Sprintf("%d.%03d", 60+n*1000+int(time.Now().UnixNano()%1000), os.Getpid()%1000)
}

// countSleeps is a shell command that prints how many processes run
// `sleep marker`, from /proc.
func countSleeps(marker string) string {
	return "for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f 2>/dev/null; echo; done | grep -c '^sleep " + marker + " ' || true"
}

// noSleeps fails with why when a process runs `sleep marker`: the agent
// ends what an exec or a call left before it answers, so nothing is
// waited for.
func noSleeps(t *testing.T, a *agent.Agent, marker string, l sandbox.Limits, why string) {
	t.Helper()
	res, err := a.Exec(t.Context(), &sandbox.Process{Args: []string{"sh", "-c", countSleeps(marker)}}, l)
	if err != nil || strings.TrimSpace(res.Stdout) != "0" {
		t.Fatalf("%s: %+v, %v", why, res, err)
	}
}

func jsonEq(got json.RawMessage, want string) bool {
	var g, w any
	if json.Unmarshal(got, &g) != nil || json.Unmarshal([]byte(want), &w) != nil {
		return false
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	return bytes.Equal(gb, wb)
}

// agentTerminal: an interactive python3 on a terminal shows its prompt,
// evaluates what is typed and exits.
func (s *suite) agentTerminal(t *testing.T) {
	_, a := s.startAgent(t)
	term, err := a.OpenTerminal(t.Context(), agent.TerminalRequest{Args: []string{"python3", "-q"}, Rows: 30, Cols: 100, Buffer: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	within := func(want string, d time.Duration) bool {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), d)
		defer cancel()
		for !strings.Contains(out.String(), want) {
			data, _, exit, err := term.Read(ctx)
			if err == context.DeadlineExceeded {
				return false
			}
			if err != nil || exit != nil {
				t.Fatalf("waiting for %q: %v (exit %+v); the terminal showed %q", want, err, exit, out.String())
			}
			out.Write(data)
		}
		return true
	}
	expect := func(want string) {
		t.Helper()
		if !within(want, 20*time.Second) {
			t.Fatalf("waiting for %q; the terminal showed %q", want, out.String())
		}
	}
	expect(">>> ")
	if err := term.Write(t.Context(), []byte("import os, shutil; print(os.isatty(0), shutil.get_terminal_size().columns, 6*7)\n")); err != nil {
		t.Fatal(err)
	}
	// The next prompt first: readline reads the terminal's size and
	// writes it back as it starts a line, and a resize that lands between
	// the two is undone (1 in ~200 on a bare python3, as strace shows).
	expect("True 100 42\r\n>>> ")
	// Resize returns once the size is set: the program reads it at once.
	if err := term.Resize(t.Context(), 40, 120); err != nil {
		t.Fatal(err)
	}
	term.Write(t.Context(), []byte("print('cols', shutil.get_terminal_size().columns, 'rows', shutil.get_terminal_size().lines)\n"))
	expect("cols 120 rows 40")
	term.Write(t.Context(), []byte("exit(5)\n"))
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for {
		_, _, exit, err := term.Read(ctx)
		if err != nil {
			t.Fatalf("waiting for the exit: %v", err)
		}
		if exit != nil {
			if exit.ExitCode != 5 {
				t.Fatalf("exit %+v", exit)
			}
			return
		}
	}
}

// agentExec: execs through the agent share the work dir with the
// sandbox, run beside a busy context, stream stdin, time out and are
// killed with their tree.
func (s *suite) agentExec(t *testing.T) {
	sb, a := s.startAgent(t)
	if err := sb.WriteFiles(t.Context(), map[string][]byte{"in.txt": []byte("from the host\n")}); err != nil {
		t.Fatal(err)
	}
	l := sandbox.Limits{Wall: 10 * time.Second, Output: 1 << 20}
	if err := a.NewContext(t.Context(), "py", "python"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { // a context call that takes a while, beside the execs
		res, err := a.RunCode(t.Context(), "py", "import time\ntime.sleep(1.5)\nopen('ctx.txt', 'w').write('ctx')\n'done'", 10*time.Second, 1024, nil, nil)
		if err != nil || !res.OK || string(res.Value) != `"done"` {
			t.Errorf("context call: %+v, %v", res, err)
		}
	})
	res, err := a.Exec(t.Context(), &sandbox.Process{Args: []string{"sh", "-c", "cat in.txt; cat; echo err >&2; exit 3"}, Stdin: strings.NewReader("piped\n")}, l)
	if err != nil {
		t.Fatal(err)
	}
	if res.Reason != sandbox.ReasonExited || res.ExitCode != 3 || res.Stdout != "from the host\npiped\n" || res.Stderr != "err\n" {
		t.Fatalf("exec: %+v", res)
	}
	wg.Wait()
	// The sandbox's file operations leave the agent running.
	if f, ok := sb.(sandbox.Files); ok {
		if _, err := f.PutFile(t.Context(), "d/put.txt", strings.NewReader("put"), 1<<20); err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if _, err := f.GetFile(t.Context(), "d/put.txt", &got, 1<<20); err != nil || got.String() != "put" {
			t.Fatalf("GetFile: %q, %v", got.String(), err)
		}
		if _, _, err := f.List(t.Context(), "d", 100); err != nil {
			t.Fatal(err)
		}
		if err := f.Mkdir(t.Context(), "d/e"); err != nil {
			t.Fatal(err)
		}
		if err := f.Remove(t.Context(), "d/e"); err != nil {
			t.Fatal(err)
		}
		if res, err := a.RunCode(t.Context(), "py", "open('d/put.txt').read()", 10*time.Second, 1024, nil, nil); err != nil || string(res.Value) != `"put"` {
			t.Fatalf("the context after file operations: %+v, %v", res, err)
		}
	}
	if err := sb.WriteFiles(t.Context(), map[string][]byte{strings.Repeat("long/", 420) + "f": []byte("long")}); err != nil {
		t.Fatal(err)
	}
	if res, err := a.RunCode(t.Context(), "py", "1", 10*time.Second, 1024, nil, nil); err != nil || !res.OK {
		t.Fatalf("the context after writing a long path: %+v, %v", res, err)
	}
	// A program that never reads its stdin does not stall the agent: a
	// context answers while the program sits on 2 MiB of unread input,
	// waiting for a file only that answer makes (were the context held up
	// by the program, the program would end at its wall limit instead).
	started := newWatch("started\n")
	slow := make(chan error, 1)
	go func() {
		// select: its input has begun to arrive, none of it read.
		res, err := a.Exec(t.Context(), &sandbox.Process{Args: []string{"python3", "-c", "import os, select, time\n" +
			"select.select([0], [], [])\nprint('started', flush=True)\n" +
			"while not os.path.exists('released'):\n    time.sleep(0.02)"},
			Stdin: bytes.NewReader(make([]byte, 2<<20)), Stdout: started}, l)
		if err == nil && (res.Reason != sandbox.ReasonExited || res.ExitCode != 0) {
			err = fmt.Errorf("ended %s, exit %d (%s)", res.Reason, res.ExitCode, res.Stderr)
		}
		slow <- err
	}()
	select {
	case <-started.seen:
	case err := <-slow:
		t.Fatalf("the program with unread input ended before it started waiting: %v", err)
	}
	if res, err := a.RunCode(t.Context(), "py", "open('released', 'w').close()\n1 + 1", 10*time.Second, 1024, nil, nil); err != nil || string(res.Value) != "2" {
		t.Fatalf("a context call beside a program with unread input: %+v, %v", res, err)
	}
	if err := <-slow; err != nil {
		t.Fatalf("the program with unread input, released by a context call: %v (a timeout: the call waited for the program)", err)
	}
	res, err = a.Exec(t.Context(), &sandbox.Process{Args: []string{"cat", "ctx.txt"}}, l)
	if err != nil || res.Stdout != "ctx" {
		t.Fatalf("the context's file, from an exec: %+v, %v", res, err)
	}
	start := time.Now()
	marker := sleepMarker(0)
	res, err = a.Exec(t.Context(), &sandbox.Process{Args: []string{"sh", "-c", "sleep " + marker + " & sleep " + marker}, Timeout: time.Second}, l)
	if err != nil || res.Reason != sandbox.ReasonTimeout || time.Since(start) > 8*time.Second {
		t.Fatalf("a timeout: %+v, %v after %v", res, err, time.Since(start))
	}
	if res, err := a.Exec(t.Context(), &sandbox.Process{Args: []string{"sh", "-c", "sleep " + marker + " & sleep 0.5; " + countSleeps(marker) + "; kill $!"}}, l); err != nil || strings.TrimSpace(res.Stdout) != "1" {
		t.Fatalf("the count of live processes sees %q (%v); the check is blind", res.Stdout, err)
	}
	noSleeps(t, a, marker, l, "the timed-out tree lives on")
	// A program that leaves its process group and session (setsid, and a
	// double fork) still ends with the exec that started it, which ends
	// by itself; so does one a context's call leaves behind.
	escaped := sleepMarker(1)
	res, err = a.Exec(t.Context(), &sandbox.Process{Args: []string{"sh", "-c", "setsid sleep " + escaped + " & (setsid sleep " + escaped + " &); sleep 0.3; " + countSleeps(escaped)}}, l)
	if err != nil || res.Reason != sandbox.ReasonExited || strings.TrimSpace(res.Stdout) != "2" {
		t.Fatalf("an exec that leaves two programs in sessions of their own: %+v, %v (the count is blind unless it says 2)", res, err)
	}
	noSleeps(t, a, escaped, l, "the programs an exec left in sessions of their own live on")
	left := sleepMarker(2)
	code := "import os, subprocess, time\nos.system('(setsid sleep " + left + " &)')\ntime.sleep(0.3)\n" +
		"subprocess.run(['sh', '-c', " + fmt.Sprintf("%q", countSleeps(left)) + "], capture_output=True, text=True).stdout.strip()"
	if res, err := a.RunCode(t.Context(), "py", code, 10*time.Second, 1024, nil, nil); err != nil || string(res.Value) != `"1"` {
		t.Fatalf("a context call that leaves a program in a session of its own: %+v, %v (the count is blind unless it says 1)", res, err)
	}
	noSleeps(t, a, left, l, "the program a context's call left in a session of its own lives on")
	if _, err := a.Exec(t.Context(), &sandbox.Process{Args: []string{"true"}, Dir: "no/such/dir"}, l); !errors.Is(err, sandbox.ErrInvalid) {
		t.Fatalf("a missing working directory: %v", err)
	}
	res, err = a.Exec(t.Context(), &sandbox.Process{Args: []string{"no-such-program"}}, l)
	if err != nil || res.ExitCode != sandbox.ExitNotFound || res.Message == "" {
		t.Fatalf("a missing program: %+v, %v", res, err)
	}
	// More output than the sandbox's output limit (and than the agent's
	// own Result keeps): the exec's is capped, the agent's protocol is not.
	for range 2 {
		res, err = a.Exec(t.Context(), &sandbox.Process{Args: []string{"sh", "-c", "head -c 3000000 /dev/zero | tr '\\0' a"}}, l)
		if err != nil {
			t.Fatalf("3 MB of output: %v", err)
		}
		if !res.StdoutTruncated || int64(len(res.Stdout)) != l.Output {
			t.Fatalf("3 MB of output: %d bytes kept, truncated %v", len(res.Stdout), res.StdoutTruncated)
		}
	}
	if res, err = a.Exec(t.Context(), &sandbox.Process{Args: []string{"echo", "still"}}, l); err != nil || res.Stdout != "still\n" {
		t.Fatalf("after 6 MB through the agent: %+v, %v", res, err)
	}
}
