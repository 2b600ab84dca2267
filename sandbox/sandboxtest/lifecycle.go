package sandboxtest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/execbox/execbox/sandbox"
)

func (s *suite) testSymlinkArtifacts(t *testing.T) {
	s.run(t, "not_followed", func(t *testing.T) {
		victim := t.TempDir()
		victimFile := filepath.Join(victim, "file")
		secret := "victim-" + token()
		if err := os.WriteFile(victimFile, []byte(secret), 0o644); err != nil {
			t.Fatal(err)
		}
		sb := s.create(t, s.spec(nil))
		wantExit(t, s.exec(t, sb, sh(`set -e
ln -s /etc/passwd leak
ln -s /etc dirlink
ln -s `+shQuote(victimFile)+` vlink
ln -s `+shQuote(victim)+` vdir
mkdir sub
ln -s ../leak sub/rel
echo keep > kept.txt`)), 0)
		a := s.artifacts(t, sb)
		wantArtifacts(t, a.Files, map[string]string{"kept.txt": "keep\n"})
		for _, f := range a.Files {
			if bytes.Contains(f.Data, []byte("root:")) || bytes.Contains(f.Data, []byte(secret)) {
				t.Errorf("artifact %q carries the content of a symlink's target", f.Path)
			}
		}
		sk := skippedPaths(a.Skipped)
		for _, p := range []string{"leak", "dirlink", "vlink", "vdir", "sub/rel"} {
			if r, ok := sk[p]; !ok || r != "symlink" {
				t.Errorf("symlink %q: want it in Skipped with reason \"symlink\", got %q (listed: %v)", p, r, ok)
			}
		}
	})

	s.run(t, "special_files", func(t *testing.T) {
		sb := s.create(t, s.spec(nil))
		wantExit(t, s.exec(t, sb, sh("mkfifo fifo && echo keep > kept.txt")), 0)
		a := s.artifacts(t, sb) // must not block on the FIFO
		wantArtifacts(t, a.Files, map[string]string{"kept.txt": "keep\n"})
		if r := skippedPaths(a.Skipped)["fifo"]; r == "" {
			t.Errorf("the FIFO is not listed in Skipped with a reason: %v", a.Skipped)
		}
	})
}

func (s *suite) testClose(t *testing.T) {
	closeCtx := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.opTimeout)
		t.Cleanup(cancel)
		return ctx
	}

	s.run(t, "idempotent", func(t *testing.T) {
		sb := s.create(t, s.spec(nil)) // the cleanup closes it a third time
		wantExit(t, s.exec(t, sb, &sandbox.Process{Args: []string{"/bin/true"}}), 0)
		for i := range 2 {
			if err := sb.Close(closeCtx()); err != nil {
				t.Errorf("Close #%d: %v", i+1, err)
			}
		}
	})

	s.run(t, "concurrent", func(t *testing.T) {
		sb := s.create(t, s.spec(nil))
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Go(func() { errs[i] = sb.Close(closeCtx()) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("concurrent Close #%d: %v", i, err)
			}
		}
	})

	s.run(t, "during_exec", func(t *testing.T) {
		sb := s.create(t, s.spec(func(sp *sandbox.Spec) { sp.Limits.Wall = 60 * time.Second }))
		tok := token()
		out := newWatch("\x00")
		p := sh(treeScript(tok))
		p.Stdout = out
		done := goExec(s.ctx(t), sb, p)
		stopped := make(chan struct{})
		var o execOutcome
		go func() { o = <-done; close(stopped) }()
		if !out.waitFor(treeUp, stopped, s.cfg.opTimeout) {
			_ = sb.Close(closeCtx())
			<-stopped
			t.Fatalf("the tree never came up: stdout=%s, Exec: %v %s", clip(out.String()), o.err, describe(o.res))
		}
		// After Close the sandbox's API is gone: the beats are watched on
		// the host, through files opened before it.
		src := s.findHostBeats(t, tok)
		at := time.Now()
		if err := sb.Close(closeCtx()); err != nil {
			t.Errorf("Close during Exec: %v", err)
		}
		closed := time.Since(at)
		select {
		case <-stopped:
		case <-time.After(hangGuard):
			t.Fatalf("Exec had not returned %v after Close returned", hangGuard)
		}
		t.Logf("Close returned after %v; Exec: err=%v %s", closed.Round(time.Millisecond), o.err, describe(o.res))
		if closed > hangGuard {
			t.Errorf("Close during Exec took %v; want at most %v", closed, hangGuard)
		}
		if o.err == nil && o.res != nil && o.res.Reason == sandbox.ReasonExited {
			t.Errorf("Exec after Close reports a normal exit: %s", describe(o.res))
		}
		switch {
		case src != nil:
			s.checkBeatsStop(t, src, "after Close")
		case s.hostVisible():
			t.Logf("no work root declared: the tree is checked in the host's /proc only")
		default:
			t.Fatalf("cannot check that Close killed the tree: %v", errNoBeats)
		}
		s.checkProcsGone(t, tok, "after Close")
	})

	s.run(t, "use_after_close", func(t *testing.T) {
		sb := s.create(t, s.spec(nil))
		if err := sb.Close(closeCtx()); err != nil {
			t.Fatalf("Close: %v", err)
		}
		res, err := sb.Exec(s.ctx(t), sh("echo ran"))
		if err == nil && (res == nil || res.Reason != sandbox.ReasonSandboxError) {
			t.Errorf("Exec on a closed sandbox: want an error, got %s", describe(res))
		}
		if res != nil && strings.Contains(res.Stdout, "ran") {
			t.Errorf("Exec on a closed sandbox ran the program")
		}
		if err := sb.WriteFiles(s.ctx(t), map[string][]byte{"x": []byte("x")}); err == nil {
			t.Errorf("WriteFiles on a closed sandbox: want an error, got nil")
		}
	})
}

func (s *suite) testLeaks(t *testing.T) {
	s.run(t, "runs", func(t *testing.T) {
		n := s.cfg.leakRuns
		hostTmp := os.TempDir()
		// A private TMPDIR: whatever a run leaves in it is a leak, with no
		// noise from other processes.
		private := t.TempDir()
		t.Setenv("TMPDIR", private)
		spec := s.spec(nil)
		runOnce := func(i int) {
			res := s.oneShot(t, spec, &sandbox.Process{Args: []string{"/bin/true"}})
			if !res.Succeeded() {
				t.Fatalf("run %d of /bin/true: %s", i, describe(res))
			}
		}
		runOnce(0) // warm-up: lazily made caches and helpers are not leaks

		execboxOnly := func(name string) bool { return strings.Contains(strings.ToLower(name), "execbox") }
		type dirWatch struct {
			dir    string
			filter func(string) bool
			before map[string]bool
			strict bool // any new entry fails (beyond held); else only more than a couple
			held   int  // entries the backend may hold by design (WithLeakHeld)
		}
		dirs := []*dirWatch{{dir: private, strict: true}, {dir: hostTmp, filter: execboxOnly}}
		for _, d := range s.cfg.workRoots {
			dirs = append(dirs, &dirWatch{dir: d, strict: true, held: s.cfg.leakHeld})
		}
		for _, d := range dirs {
			d.before = entries(d.dir, d.filter)
		}
		childrenBefore, procErr := childrenOf(os.Getpid())
		fdsBefore, fdErr := openFDs()
		goroutinesBefore := runtime.NumGoroutine()

		start := time.Now()
		for i := 1; i <= n; i++ {
			runOnce(i)
		}
		elapsed := time.Since(start)
		t.Logf("%d one-shot runs in %v (%v each)", n, elapsed.Round(time.Millisecond), (elapsed / time.Duration(n)).Round(time.Microsecond))

		// Give asynchronous cleanup up to 10 s (a bound, not a wait: the
		// check passes as soon as everything is gone), then judge.
		var problems []string
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			problems = problems[:0]
			for _, d := range dirs {
				var added []string
				for name := range entries(d.dir, d.filter) {
					if !d.before[name] {
						added = append(added, name)
					}
				}
				slices.Sort(added)
				switch {
				case len(added) <= d.held:
				case d.strict || len(added) > 2:
					problems = append(problems, "new entries in "+d.dir+" after the runs: "+strings.Join(head(added, 10), ", "))
				default:
					// The host's temp dir is shared with other test
					// processes; a couple of entries may be theirs.
					t.Logf("new execbox entries in %s (maybe another process's): %v", d.dir, added)
				}
			}
			if procErr == nil {
				now, _ := childrenOf(os.Getpid())
				var left []string
				for pid, st := range now {
					if _, ok := childrenBefore[pid]; !ok {
						left = append(left, "child process left: "+st)
					}
				}
				if len(left) > s.cfg.leakHeld {
					problems = append(problems, left...)
				}
			}
			if fdErr == nil {
				if fds, _ := openFDs(); fds > fdsBefore+2+s.cfg.leakHeld {
					problems = append(problems, "open fds grew from "+strconv.Itoa(fdsBefore)+" to "+strconv.Itoa(fds)+":\n"+fdList())
				}
			}
			if g := runtime.NumGoroutine(); g > goroutinesBefore+2+s.cfg.leakHeld {
				buf := make([]byte, 64<<10)
				buf = buf[:runtime.Stack(buf, true)]
				problems = append(problems, "goroutines grew from "+strconv.Itoa(goroutinesBefore)+" to "+strconv.Itoa(g)+":\n"+string(buf))
			}
			if len(problems) == 0 || time.Now().After(deadline) {
				break
			}
		}
		if procErr != nil || fdErr != nil {
			t.Logf("cannot read /proc (%v, %v): process and fd checks skipped", procErr, fdErr)
		}
		for _, p := range problems {
			t.Error(p)
		}
	})
}

// entries lists the names in dir that pass filter (nil: all).
func entries(dir string, filter func(string) bool) map[string]bool {
	ents, _ := os.ReadDir(dir)
	m := map[string]bool{}
	for _, e := range ents {
		if filter == nil || filter(e.Name()) {
			m[e.Name()] = true
		}
	}
	return m
}

func head(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], "…")
	}
	return s
}
