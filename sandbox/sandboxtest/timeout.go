package sandboxtest

import (
	"context"
	"path"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// treeSleepers is how many sleep processes treeScript starts.
const treeSleepers = 5

// treeScript starts sleepers that try every way out of a process-group
// kill: a plain background job, setsid, a double fork through a subshell, a
// double fork through another sh, and one that ignores HUP, INT and TERM.
// Each sleeps for m seconds, so the host can find it by that argv.
func treeScript(m string) string {
	return `M=` + m + `
sleep $M &
setsid sleep $M &
(sleep $M &)
sh -c "sleep $M &"
(trap '' HUP INT TERM; exec sleep $M) &
echo started
wait`
}

// treeWatch polls the host's /proc while a tree runs and remembers every
// sleeper it saw.
type treeWatch struct {
	m    string
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	pids map[int]bool
	err  error
}

func watchTree(m string) *treeWatch {
	w := &treeWatch{m: m, stop: make(chan struct{}), done: make(chan struct{}), pids: map[int]bool{}}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			ps, err := procsWith(m)
			w.mu.Lock()
			w.err = err
			for _, p := range ps {
				if len(p.argv) >= 2 && path.Base(p.argv[0]) == "sleep" && p.argv[len(p.argv)-1] == m {
					w.pids[p.pid] = true
				}
			}
			w.mu.Unlock()
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

// seen is how many distinct sleepers were seen so far.
func (w *treeWatch) seen() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.pids)
}

func (w *treeWatch) finish() (int, error) {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.pids), w.err
}

// hostVisible: the processes of this backend are host processes, so the
// host's /proc sees them. Under a user-space kernel or a VM they are not.
func (s *suite) hostVisible() bool { return s.caps.Isolation < sandbox.IsolationKernel }

// waitStarted blocks until the tree is fully up (all sleepers seen from the
// host, or "started" printed where the host cannot see them), or 10 s.
func (s *suite) waitStarted(w *treeWatch, out *watch) {
	deadline := time.After(10 * time.Second)
	if !s.hostVisible() {
		select {
		case <-out.seen:
			time.Sleep(300 * time.Millisecond)
		case <-deadline:
		}
		return
	}
	for w.seen() < treeSleepers {
		select {
		case <-deadline:
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// checkTreeGone checks that the tree of marker m is dead: from the host
// (polling up to 2 s) and, when sb is still usable, from inside it.
func (s *suite) checkTreeGone(t *testing.T, m string, w *treeWatch, sb sandbox.Sandbox) {
	t.Helper()
	seen, err := w.finish()
	if err != nil {
		t.Logf("cannot read the host's /proc (%v); host-side process checks skipped", err)
	} else if s.hostVisible() && seen < treeSleepers {
		t.Errorf("the host saw only %d of the %d sleepers while the tree ran; the check below would prove nothing", seen, treeSleepers)
	}
	if err == nil {
		var left []hostProc
		for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			left, _ = procsWith(m)
			if len(left) == 0 || time.Now().After(deadline) {
				break
			}
		}
		for _, p := range left {
			t.Errorf("process survived the kill (2 s later): %s", p)
			_ = syscall.Kill(p.pid, syscall.SIGKILL) // ours: the marker is unique to this test
		}
	}
	if sb == nil || !s.caps.Sessions {
		return
	}
	// From inside: no process of the sandbox still has the marker.
	check := sh(`cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\000' ' '; echo; echo checked`)
	for try := 0; ; try++ {
		res := s.exec(t, sb, check)
		if !strings.Contains(res.Stdout, "cmdline") || !strings.Contains(res.Stdout, "checked") {
			t.Errorf("cannot list processes inside the sandbox: %s", describe(res))
			return
		}
		if !strings.Contains(res.Stdout, m) {
			return
		}
		if try == 1 {
			t.Errorf("a sleeper of the killed tree is still alive inside the sandbox:\n%s", clip(res.Stdout))
			return
		}
		time.Sleep(time.Second)
	}
}

func (s *suite) testTimeout(t *testing.T) {
	s.run(t, "within_limit", func(t *testing.T) {
		spec := s.spec(func(sp *sandbox.Spec) { sp.Limits.Wall = 3 * time.Second })
		res := s.oneShot(t, spec, sh("sleep 0.3; echo ok"))
		wantExit(t, res, 0)
		if res.Stdout != "ok\n" {
			t.Errorf("stdout = %s", clip(res.Stdout))
		}
	})

	// timedTree runs the tree in a fresh sandbox and checks a timeout of want.
	timedTree := func(t *testing.T, spec sandbox.Spec, timeout, want time.Duration) {
		sb := s.create(t, spec)
		m := marker()
		w := watchTree(m)
		p := sh(treeScript(m))
		p.Timeout = timeout
		start := time.Now()
		res := s.exec(t, sb, p)
		elapsed := time.Since(start)
		t.Logf("Exec returned after %v (limit %v): %s", elapsed.Round(time.Millisecond), want, describe(res))
		if res.Reason != sandbox.ReasonTimeout {
			t.Errorf("want reason %q, got %s", sandbox.ReasonTimeout, describe(res))
		}
		if elapsed > want+5*time.Second {
			t.Errorf("Exec took %v for a %v limit; want at most limit + 5 s", elapsed, want)
		}
		if elapsed < want-100*time.Millisecond {
			t.Errorf("Exec ended after %v, before the %v limit", elapsed, want)
		}
		if !strings.Contains(res.Stdout, "started") {
			t.Errorf("output printed before the kill was lost: stdout=%s", clip(res.Stdout))
		}
		s.checkTreeGone(t, m, w, sb)
	}

	s.run(t, "kills_tree", func(t *testing.T) {
		timedTree(t, s.spec(func(sp *sandbox.Spec) { sp.Limits.Wall = time.Second }), 0, time.Second)
	})

	s.run(t, "process_timeout", func(t *testing.T) {
		timedTree(t, s.spec(func(sp *sandbox.Spec) { sp.Limits.Wall = 30 * time.Second }), time.Second, time.Second)
	})

	s.run(t, "cancel_kills_tree", func(t *testing.T) {
		sb := s.create(t, s.spec(func(sp *sandbox.Spec) { sp.Limits.Wall = 30 * time.Second }))
		m := marker()
		w := watchTree(m)
		out := newWatch("started\n")
		p := sh(treeScript(m))
		p.Stdout = out
		ctx, cancel := context.WithCancel(s.ctx(t))
		defer cancel()
		canceled := make(chan time.Time, 1)
		go func() {
			s.waitStarted(w, out)
			canceled <- time.Now()
			cancel()
		}()
		res, err := sb.Exec(ctx, p)
		returned := time.Now()
		if err != nil {
			t.Fatalf("Exec with a cancelled context: want a Result with reason %q, got error %v", sandbox.ReasonCanceled, err)
		}
		at := <-canceled
		t.Logf("Exec returned %v after the cancel: %s", returned.Sub(at).Round(time.Millisecond), describe(res))
		if res.Reason != sandbox.ReasonCanceled {
			t.Errorf("want reason %q, got %s", sandbox.ReasonCanceled, describe(res))
		}
		if d := returned.Sub(at); d > 5*time.Second {
			t.Errorf("Exec returned %v after the cancel; want at most 5 s", d)
		}
		if !strings.Contains(res.Stdout, "started") {
			t.Errorf("output printed before the cancel was lost: stdout=%s", clip(res.Stdout))
		}
		s.checkTreeGone(t, m, w, sb)
	})
}
