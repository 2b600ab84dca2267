package gvisor

import (
	"context"
	"errors"
	"os"
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
				log, _ := os.ReadFile(s.paths.runLog())
				fell := strings.Contains(string(log), "Will try waiting on the sandbox process")
				mu.Lock()
				if fell {
					fallbacks++
				}
				mu.Unlock()
				if res.Reason != c.reason || res.ExitCode != c.code || res.Signal != c.signal {
					t.Errorf("%q (runsc fell back: %v): reason %s exit %d signal %q", c.script, fell, res.Reason, res.ExitCode, res.Signal)
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
