package gvisor

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
)

// Exit codes and signals come out right also when runsc loses the race to
// the sentry's exit and falls back to the sentry's own exit code (which
// folds a signal into 128+n): short programs in several sandboxes at once
// make that happen now and then, and "exit 137" must stay apart from
// SIGKILL.
func TestWaitStatusUnderLoad(t *testing.T) {
	b := newBackend(t)
	cases := []struct {
		script string
		reason sandbox.Reason
		code   int
		signal string
	}{
		{"kill -KILL $$", sandbox.ReasonSignaled, -1, "SIGKILL"},
		{"exit 137", sandbox.ReasonExited, 137, ""},
		{"kill -TERM $$", sandbox.ReasonSignaled, -1, "SIGTERM"},
		{"exit 143", sandbox.ReasonExited, 143, ""},
	}
	var mu sync.Mutex
	fallbacks := 0
	var wg sync.WaitGroup
	for g := range 4 {
		sb := testutil.Create(t, b, sandbox.Spec{})
		s := sb.(*Sandbox)
		wg.Go(func() {
			for i := range 16 {
				c := cases[(i+g)%len(cases)]
				res, err := sb.Exec(context.Background(), &sandbox.Process{Args: []string{"/bin/sh", "-c", c.script}})
				if err != nil {
					t.Error(err)
					return
				}
				fell := s.lastLog.fellBack
				mu.Lock()
				if fell {
					fallbacks++
				}
				mu.Unlock()
				if res.Reason != c.reason || res.ExitCode != c.code || res.Signal != c.signal {
					t.Errorf("%q (runsc fell back: %v): reason %s exit %d signal %q message %q\nrunsc's log ended:\n%s", c.script, fell, res.Reason, res.ExitCode, res.Signal, res.Message, strings.Join(s.lastLog.tail, "\n"))
				}
			}
		})
	}
	wg.Wait()
	t.Logf("runsc fell back to the sentry's exit code in %d of 64 runs", fallbacks)
}

// A program that is not there exits 127, one that is there but cannot be
// executed 126, as from a shell or `docker run`, with the reason in the
// message; runsc's own error text reaches neither the captured nor the
// live stderr. One that is there runs.
func TestProgramNotFound(t *testing.T) {
	b := newBackend(t)
	sb := testutil.Create(t, b, sandbox.Spec{})
	if err := sb.WriteFiles(t.Context(), map[string][]byte{"script.sh": []byte("echo hi\n")}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"/no/such/program"}, 127, `program "/no/such/program" not found in the sandbox (no such file or directory)`},
		{[]string{"no-such-program-anywhere"}, 127, `program "no-such-program-anywhere" not found in the sandbox's PATH (no such file or directory)`},
		{[]string{"/etc/passwd/x"}, 127, "not found in the sandbox (not a directory)"},
		{[]string{"/etc/passwd"}, 126, `program "/etc/passwd" cannot be executed in the sandbox (permission denied)`},
		{[]string{"/usr"}, 126, "cannot be executed"},
		{[]string{"./script.sh"}, 126, "cannot be executed"}, // no x bit
	} {
		var live bytes.Buffer
		res, err := sb.Exec(t.Context(), &sandbox.Process{Args: c.args, Stderr: &live})
		if err != nil {
			t.Errorf("%q: %v", c.args, err)
			continue
		}
		if res.Reason != sandbox.ReasonExited || res.ExitCode != c.code || !strings.Contains(res.Message, c.says) {
			t.Errorf("%q: reason %s exit %d message %q, want exited %d %q", c.args, res.Reason, res.ExitCode, res.Message, c.code, c.says)
		}
		if res.Stderr != "" || live.Len() != 0 {
			t.Errorf("%q: runsc's text reached the program's stderr: captured %q, live %q", c.args, res.Stderr, live.String())
		}
		t.Logf("%q: exit %d: %s", c.args, res.ExitCode, res.Message)
	}
	for _, args := range [][]string{{"/usr/bin/true"}, {"true"}} {
		testutil.WantOK(t, testutil.Exec(t, sb, args...))
	}
}

// The program's own stderr reaches the live reader whole and in order,
// the last line too, also when it does not end with a newline.
func TestLiveStderr(t *testing.T) {
	b := newBackend(t)
	sb := testutil.Create(t, b, sandbox.Spec{})
	for _, script := range []string{"echo one >&2; echo two >&2; exit 3", "printf 'a\\nb' >&2", "echo last >&2; sleep 0.3; echo out"} {
		var live bytes.Buffer
		res, err := sb.Exec(t.Context(), &sandbox.Process{Args: []string{"/bin/sh", "-c", script}, Stderr: &live})
		if err != nil {
			t.Fatal(err)
		}
		if live.String() != res.Stderr || res.Stderr == "" {
			t.Errorf("%q: live stderr %q, captured %q", script, live.String(), res.Stderr)
		}
	}
}

// runsc's "Exiting with status" lines carry the raw wait status; the boot
// process's (the sentry's) wins over the run command's, which may be its
// fallback with a signal folded into 128+n. The sentry's strace says when
// a fork failed with EAGAIN. Lines that only look alike count for nothing.
func TestRunLog(t *testing.T) {
	const run = 100
	for _, c := range []struct {
		log    string
		ok     bool
		exited bool
		code   int
		sig    string
		forks  int
	}{
		{"I1129 19:32:20.959458     100 main.go:266] Exiting with status: 15\n", true, false, -1, "terminated", 0},
		{"I1129 19:32:20.959458   13973 cli.go:317] Exiting with status: 768\n", true, true, 3, "", 0},
		{"I1129 19:32:20.959458     100 main.go:266] Exiting with status: 0\n", true, true, 0, "", 0},
		{"I1129 19:48:33.646751   13973 main.go:266] Exiting with status: 15\n" +
			"W1129 19:48:33.650000     100 sandbox.go:933] Wait on container failed. Will try waiting on the sandbox process instead.\n" +
			"I1129 19:48:33.650474     100 main.go:266] Exiting with status: 36608\n", true, false, -1, "terminated", 0},
		{"I1129 19:48:33.650474     100 main.go:266] Exiting with status: 36608\n" +
			"I1129 19:48:33.646751   13973 main.go:266] Exiting with status: 9\n", true, false, -1, "killed", 0},
		{"W1129 FATAL ERROR: running container: ...\n", false, false, 0, "", 0},
		{"I1129 main.go:266] Exiting with status: 0\n", false, false, 0, "", 0},
		{"", false, false, 0, "", 0},
		// The 2022 release, then today's.
		{"I1201 07:51:10.177870   10293 strace.go:611] [   1:   1] python3 X clone(CLONE_VM|CLONE_THREAD, 0x7fa9b47fff70, 0x7fa9b4800990) = 0 (0x0) errno=11 (try again) (21.72µs)\n" +
			"I1201 07:51:10.419859       1 strace.go:613] [   7:   7] python3 X clone(CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|0x11, 0x0, 0x0, 0x7eb131bad590, 0x0) = -1 errno=11 (try again) (3.154315ms)\n" +
			"I1201 07:51:10.421987       1 strace.go:604] [   1:   1] python3 X clone3(0x7eacfcef8580, 0x58) = -1 errno=11 (try again) (24.446µs)\n" +
			"I1201 07:51:10.421987       1 strace.go:604] [   1:   1] sh X vfork() = -1 errno=11 (try again) (24.446µs)\n", false, false, 0, "", 4},
		// A fork that worked, one that failed otherwise, an entry line, and
		// a program named "errno=11 " (a task's name is its to choose).
		{"I1201 07:51:10.177050   10293 strace.go:602] [   1:   1] python3 X clone3(0x7fced1c6f5a0, 0x58) = 0 (0x0) errno=38 (invalid system call number) (34.957µs)\n" +
			"I1201 07:51:10.177050   10293 strace.go:602] [   1:   1] python3 X clone(0x11) = 7 (0x7) (34.957µs)\n" +
			"I1201 07:51:10.177821   10293 strace.go:573] [   1:   1] python3 E clone(CLONE_VM|CLONE_FS, 0x7fa9b47fff70)\n" +
			"I1201 07:51:10.177050   10293 strace.go:602] [   1:   1] errno=11  X clone(0x11) = 7 (0x7) (34.957µs)\n", false, false, 0, "", 0},
	} {
		l := &runLog{}
		for line := range strings.Lines(c.log) {
			l.parse(strings.TrimSuffix(line, "\n"))
		}
		ws, ok := l.status(run)
		if ok != c.ok || l.forkFailed != c.forks {
			t.Errorf("%q: ok %v, %d failed forks", c.log, ok, l.forkFailed)
			continue
		}
		if !ok {
			continue
		}
		if ws.Exited() != c.exited || (c.exited && ws.ExitStatus() != c.code) || (!c.exited && ws.Signal().String() != c.sig) {
			t.Errorf("%q: status %v", c.log, ws)
		}
	}
}

// runsc's errors, as the 2022 release and today's word them.
func TestStartFailure(t *testing.T) {
	for _, c := range []struct {
		msg  string
		code int
		why  string
	}{
		{"running container: starting container: starting root container: starting sandbox: creating process: failed to load /no/such: no such file or directory",
			127, `program "p" not found in the sandbox (no such file or directory)`},
		{`running container: starting container: starting root container: starting sandbox: creating process: error finding executable "p" in PATH [/usr/local/bin /usr/bin /bin]: no such file or directory`,
			127, `program "p" not found in the sandbox's PATH (no such file or directory)`},
		{"creating process: failed to load /etc/passwd: permission denied", 126, `program "p" cannot be executed in the sandbox (permission denied)`},
		{"creating process: failed to load /bin/x: exec format error", 126, `program "p" cannot be executed in the sandbox (exec format error)`},
		{"running container: creating container: cannot create sandbox: cannot read client sync file: EOF", 0, ""},
		{"", 0, ""},
	} {
		code, why, ok := startFailure("p", c.msg)
		if ok != (c.code != 0) || code != c.code || why != c.why {
			t.Errorf("%q: %d %q %v", c.msg, code, why, ok)
		}
	}
	if got := withoutRunsc("own\nm1\nm2\n", []string{"m1", "m2"}); got != "own\n" {
		t.Errorf("withoutRunsc: %q", got)
	}
	if got := withoutRunsc("own m1\n", []string{"m1"}); got != "own m1\n" {
		t.Errorf("withoutRunsc took part of a line: %q", got)
	}
}

// The live stderr holds only the last line of a write, passes it on after
// stderrHold or the next write, and drops it at the end only if it is
// runsc's.
func TestLiveStderrHold(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	w := writerFunc(func(b []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return buf.Write(b) })
	got := func() string { mu.Lock(); defer mu.Unlock(); return buf.String() }
	l := newLiveStderr(w)
	l.Write([]byte("a\nb\n"))
	if got() != "a\n" {
		t.Fatalf("after a write: %q", got())
	}
	l.Write([]byte("partial"))
	if got() != "a\nb\npartial" {
		t.Fatalf("after a partial line: %q", got())
	}
	l.Write([]byte(" line\n"))
	time.Sleep(3 * stderrHold)
	if got() != "a\nb\npartial line\n" {
		t.Fatalf("after the hold: %q", got())
	}
	l.Write([]byte("runsc says no\n"))
	l.end([]string{"runsc says no"})
	l.Write([]byte("later\n"))
	if got() != "a\nb\npartial line\nlater\n" {
		t.Fatalf("at the end: %q", got())
	}
	l2 := newLiveStderr(w)
	l2.Write([]byte("mine\n"))
	l2.end([]string{"runsc says no"})
	if !strings.HasSuffix(got(), "later\nmine\n") {
		t.Fatalf("the program's last line was dropped: %q", got())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
