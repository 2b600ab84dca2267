package gvisor

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

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

// A program that is not there is the caller's mistake (ErrInvalid,
// "program_not_found"), not a sandbox error; one that is there runs.
func TestProgramNotFound(t *testing.T) {
	b := newBackend(t)
	sb := testutil.Create(t, b, sandbox.Spec{})
	for _, args := range [][]string{{"/no/such/program"}, {"no-such-program-anywhere"}} {
		res, err := sb.Exec(t.Context(), &sandbox.Process{Args: args})
		if !errors.Is(err, sandbox.ErrInvalid) || sandbox.CodeOf(err) != "program_not_found" {
			t.Errorf("%q: err %v result %+v, want ErrInvalid program_not_found", args, err, res)
			continue
		}
		t.Logf("%q: %v", args, err)
	}
	for _, args := range [][]string{{"/usr/bin/true"}, {"true"}} {
		testutil.WantOK(t, testutil.Exec(t, sb, args...))
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
