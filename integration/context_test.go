package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/internal/daemon/auth"
)

// TestSessionContextsOnBackends: on every isolating backend here, through
// the API: a Python context keeps a variable, an import and a function
// across calls and returns the last expression's value; an infinite loop
// is interrupted at its timeout and the context lives on; execs run beside
// it in the same files; a terminal runs an interactive python3 whose
// prompt is read; an idle session with a context and a terminal is reaped
// and its processes are gone from the host; another token sees none of it.
func TestSessionContextsOnBackends(t *testing.T) {
	requireNative(t)
	for _, b := range sessionBackends("microvm", "kubernetes") {
		t.Run(b, func(t *testing.T) {
			// ops, an admin, is asked whether b is ready (and sees why not).
			env := append(onBackend(t, b), "EXECBOX_POOLS_SIZE=0",
				"EXECBOX_AUTH_TOKENS=alice:"+auth.HashSecret("alice-secret")+",bob:"+auth.HashSecret("bob-secret")+",ops:"+auth.HashSecret("ops-secret")+":admin")
			s := startServer(t, env)
			s.requireReady(b, "ops-secret")
			c, other := s.client("alice-secret"), s.client("bob-secret")
			ctx := context.Background()
			sess, err := c.CreateSession(ctx, &v1.SessionRequest{})
			if err != nil {
				t.Fatal(err)
			}
			cx, err := c.CreateContext(ctx, sess.ID, "python")
			if err != nil {
				t.Fatal(err)
			}
			run := func(code string, timeout time.Duration) *v1.CodeResult {
				t.Helper()
				res, err := c.RunCode(ctx, sess.ID, cx.ID, &v1.CodeRequest{Code: code, Timeout: v1.Seconds(timeout)})
				if err != nil {
					t.Fatalf("%q: %v", code, err)
				}
				return res
			}
			run("import json\nn = 40\ndef add(a, b):\n    return a + b", 10*time.Second)
			run("open('from_ctx.txt', 'w').write(json.dumps({'n': n}))", 10*time.Second)
			if res := run("print('hello')\n{'sum': add(n, 2), 'mod': json.__name__}", 10*time.Second); !res.OK || res.Stdout != "hello\n" || string(res.Value) != `{"sum":42,"mod":"json"}` {
				t.Fatalf("the third call: %+v (value %s)", res, res.Value)
			}
			if res := run("while True:\n    n += 0", 2*time.Second); res.OK || !res.Interrupted || res.Error == nil || res.Error.Type != "TimeoutError" {
				t.Fatalf("an infinite loop: %+v", res)
			}
			if res := run("add(n, 1)", 10*time.Second); string(res.Value) != "41" {
				t.Fatalf("after the interrupt: %+v", res)
			}
			// An exec beside the context sees its file.
			if res, err := c.Exec(ctx, sess.ID, &v1.SessionExec{Command: []string{"cat", "from_ctx.txt"}}); err != nil || res.Stdout != `{"n": 40}` {
				t.Fatalf("an exec reading the context's file: %+v, %v", res, err)
			}

			// A terminal with an interactive python3.
			term, err := c.OpenTerminal(ctx, sess.ID, &v1.TerminalRequest{Command: []string{"python3", "-q"}, Rows: 24, Cols: 80})
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var screen bytes.Buffer
			done := make(chan *v1.TerminalExit, 1)
			go func() {
				x, err := c.TerminalOutput(ctx, sess.ID, term.ID, writerFunc(func(p []byte) {
					mu.Lock()
					defer mu.Unlock()
					screen.Write(p)
				}))
				if err != nil {
					t.Errorf("reading the terminal: %v", err)
				}
				done <- x
			}()
			waitFor := func(want string) {
				t.Helper()
				deadline := time.Now().Add(30 * time.Second)
				for {
					mu.Lock()
					got := screen.String()
					mu.Unlock()
					if strings.Contains(got, want) {
						return
					}
					if time.Now().After(deadline) {
						t.Fatalf("the terminal did not show %q; it shows %q", want, got)
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
			waitFor(">>> ")
			if err := c.TerminalInput(ctx, sess.ID, term.ID, []byte("print(6 * 7)\nexit(3)\n")); err != nil {
				t.Fatal(err)
			}
			waitFor("42")
			select {
			case x := <-done:
				if x == nil || x.ExitCode != 3 {
					t.Fatalf("the terminal's exit: %+v", x)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the terminal's program did not end")
			}

			// Another token's caller sees no session, context or terminal.
			var p *v1.Problem
			if _, err := other.RunCode(ctx, sess.ID, cx.ID, &v1.CodeRequest{Code: "n"}); !errors.As(err, &p) || p.Status != 404 {
				t.Fatalf("another token's call in the context: %v", err)
			}
			if _, err := other.Terminal(ctx, sess.ID, term.ID); !errors.As(err, &p) || p.Status != 404 {
				t.Fatalf("another token's look at the terminal: %v", err)
			}
			if err := c.CloseSession(ctx, sess.ID); err != nil {
				t.Fatal(err)
			}

			// An idle session with a context (which started a program) and
			// a terminal is reaped, and nothing of it lives on.
			marker := fmt.Sprint(time.Now().UnixNano()%90000000 + 10000000)
			// Idle for 5 s: long enough that it is not reaped while the test
			// sets it up under load.
			idle, err := c.CreateSession(ctx, &v1.SessionRequest{IdleTimeout: v1.Seconds(5 * time.Second)})
			if err != nil {
				t.Fatal(err)
			}
			cx, err = c.CreateContext(ctx, idle.ID, "python")
			if err != nil {
				t.Fatal(err)
			}
			if res, err := c.RunCode(ctx, idle.ID, cx.ID, &v1.CodeRequest{Code: "import subprocess\np = subprocess.Popen(['sleep', '" + marker + "'])\np.pid"}); err != nil || !res.OK {
				t.Fatalf("starting a program from the context: %+v, %v", res, err)
			}
			if _, err := c.OpenTerminal(ctx, idle.ID, &v1.TerminalRequest{Command: []string{"sh"}}); err != nil {
				t.Fatal(err)
			}
			// Popen returns at the fork: the exec of sleep may come a moment later.
			for seen := time.Now().Add(2 * time.Second); hostVisible(b) && len(alive("sleep "+marker)) == 0; {
				if time.Now().After(seen) {
					_, err := c.Session(ctx, idle.ID)
					t.Fatalf("the context's program is not seen on the host; the check is blind (the session: %v)", err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			deadline := time.Now().Add(60 * time.Second)
			for {
				_, err := c.Session(ctx, idle.ID)
				if errors.As(err, &p) && p.Code == "session_closed" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the idle session was not reaped: %v", err)
				}
				time.Sleep(200 * time.Millisecond)
			}
			if hostVisible(b) {
				noneLeft(t, "the reaped session's context", func() []string { return alive("sleep " + marker) })
			}
			noneLeft(t, "the reaped session", func() []string {
				left := append(sandboxLeftovers(s.work, true), cgroupsOf(t, s.cmd.Process.Pid)...)
				if b == "kubernetes" {
					left = append(left, podsOf(t, env)...)
				}
				return left
			})
		})
	}
}
