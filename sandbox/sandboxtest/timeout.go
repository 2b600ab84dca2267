package sandboxtest

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// treeLimits are the wall limits a timed tree run tries in turn: the tree
// must be up (every member beating) before the limit kills it, or the run
// proves nothing; on a host so loaded that it is not, the next, longer
// limit is tried instead of failing.
var treeLimits = []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second}

// processTimeoutWall is the sandbox's wall limit while a Process.Timeout
// from treeLimits ends the run.
const processTimeoutWall = 30 * time.Second

func (s *suite) testTimeout(t *testing.T) {
	s.run(t, "within_limit", func(t *testing.T) {
		spec := s.spec(func(sp *sandbox.Spec) { sp.Limits.Wall = 30 * time.Second })
		res := s.oneShot(t, spec, sh("sleep 0.3; echo ok"))
		wantExit(t, res, 0)
		if res.Stdout != "ok\n" {
			t.Errorf("stdout = %s", clip(res.Stdout))
		}
	})

	// timedTree runs the tree until a wall limit ends it: the sandbox's
	// (Limits.Wall), or with processTimeout the process's own
	// (Process.Timeout) under a longer sandbox limit.
	timedTree := func(t *testing.T, processTimeout bool) {
		for i, limit := range treeLimits {
			spec := s.spec(func(sp *sandbox.Spec) {
				sp.Limits.Wall = limit
				if processTimeout {
					sp.Limits.Wall = processTimeoutWall
				}
			})
			sb := s.create(t, spec)
			tok := token()
			p := sh(treeScript(tok))
			if processTimeout {
				p.Timeout = limit
			}
			start := time.Now()
			res := s.exec(t, sb, p)
			elapsed := time.Since(start)
			t.Logf("Exec returned after %v (limit %v): %s", elapsed.Round(time.Millisecond), limit, describe(res))
			if !treeUp(res.Stdout) && i < len(treeLimits)-1 {
				t.Logf("the tree was not up when the %v limit hit (stdout %s); trying a longer limit", limit, clip(res.Stdout))
				continue
			}
			if res.Reason != sandbox.ReasonTimeout {
				t.Errorf("want reason %q, got %s", sandbox.ReasonTimeout, describe(res))
			}
			if elapsed < limit {
				t.Errorf("Exec ended after %v, before the %v limit", elapsed, limit)
			}
			if processTimeout && elapsed >= processTimeoutWall {
				t.Errorf("Exec ran for %v, the sandbox's %v wall limit: Process.Timeout %v was not applied", elapsed, processTimeoutWall, limit)
			} else if elapsed > limit+hangGuard {
				t.Errorf("Exec took %v for a %v limit; want at most limit + %v", elapsed, limit, hangGuard)
			}
			if !treeUp(res.Stdout) {
				t.Fatalf("the tree was not up when the %v limit hit, or output printed before the kill was lost: stdout=%s", limit, clip(res.Stdout))
			}
			var src beatSource = &apiBeats{s: s, t: t, sb: sb, tok: tok}
			if hb := s.findHostBeats(t, tok); hb != nil {
				src = hb
			}
			s.checkBeatsStop(t, src, "after the timeout")
			s.checkProcsGone(t, tok, "after the timeout")
			return
		}
	}

	s.run(t, "kills_tree", func(t *testing.T) { timedTree(t, false) })
	s.run(t, "process_timeout", func(t *testing.T) { timedTree(t, true) })

	// A context done before Exec: the run is canceled every time, never
	// "exited" because a quick program finished before the cancellation
	// was seen (a supervisor's select picks at random among ready cases).
	s.run(t, "cancel_before_start", func(t *testing.T) {
		// The host's init stays where it is: a backend that took a
		// reparented child's new parent for its own helper once moved
		// PID 1 into the sandbox's cgroup, then froze and killed it.
		initCgroups, _ := os.ReadFile("/proc/1/cgroup")
		sb := s.create(t, s.spec(nil))
		ctx, cancel := context.WithCancel(s.ctx(t))
		cancel()
		for i := range 20 {
			res, err := sb.Exec(ctx, &sandbox.Process{Args: []string{"/bin/true"}})
			if err != nil {
				t.Fatalf("Exec %d with a done context: want a Result with reason %q, got error %v", i, sandbox.ReasonCanceled, err)
			}
			if res.Reason != sandbox.ReasonCanceled {
				t.Fatalf("Exec %d with a done context: want reason %q, got %s", i, sandbox.ReasonCanceled, describe(res))
			}
			if now, _ := os.ReadFile("/proc/1/cgroup"); !bytes.Equal(now, initCgroups) {
				t.Fatalf("Exec %d moved the host's PID 1: its cgroups are\n%s\nwere\n%s", i, now, initCgroups)
			}
		}
	})

	s.run(t, "cancel_kills_tree", func(t *testing.T) {
		sb := s.create(t, s.spec(func(sp *sandbox.Spec) { sp.Limits.Wall = 60 * time.Second }))
		tok := token()
		out := newWatch("\x00")
		p := sh(treeScript(tok))
		p.Stdout = out
		ctx, cancel := context.WithCancel(s.ctx(t))
		defer cancel()
		done := goExec(ctx, sb, p)
		stopped := make(chan struct{})
		var o execOutcome
		go func() { o = <-done; close(stopped) }()
		if !out.waitFor(treeUp, stopped, s.cfg.opTimeout) {
			cancel()
			<-stopped
			t.Fatalf("the tree never came up: stdout=%s, Exec: %v %s", clip(out.String()), o.err, describe(o.res))
		}
		src := s.findHostBeats(t, tok)
		at := time.Now()
		cancel()
		select {
		case <-stopped:
		case <-time.After(hangGuard + s.cfg.opTimeout):
			t.Fatalf("Exec did not return %v after its context was cancelled", hangGuard+s.cfg.opTimeout)
		}
		returned := time.Since(at)
		if o.err != nil {
			t.Fatalf("Exec with a cancelled context: want a Result with reason %q, got error %v", sandbox.ReasonCanceled, o.err)
		}
		t.Logf("Exec returned %v after the cancel: %s", returned.Round(time.Millisecond), describe(o.res))
		if o.res.Reason != sandbox.ReasonCanceled {
			t.Errorf("want reason %q, got %s", sandbox.ReasonCanceled, describe(o.res))
		}
		if returned > hangGuard {
			t.Errorf("Exec returned %v after the cancel; want at most %v", returned, hangGuard)
		}
		if !treeUp(o.res.Stdout) {
			t.Errorf("output printed before the cancel was lost: stdout=%s", clip(o.res.Stdout))
		}
		if src != nil {
			s.checkBeatsStop(t, src, "after the cancel")
		} else {
			s.checkBeatsStop(t, &apiBeats{s: s, t: t, sb: sb, tok: tok}, "after the cancel")
		}
		s.checkProcsGone(t, tok, "after the cancel")
	})
}
