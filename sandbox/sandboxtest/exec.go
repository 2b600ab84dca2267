package sandboxtest

import (
	"bytes"
	crand "crypto/rand"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/execbox/execbox/sandbox"
)

func (s *suite) testExit(t *testing.T) {
	for _, c := range []struct {
		name, script string
		reason       sandbox.Reason
		code         int
		signal       string
	}{
		{"code_0", "exit 0", sandbox.ReasonExited, 0, ""},
		{"code_3", "exit 3", sandbox.ReasonExited, 3, ""},
		{"code_255", "exit 255", sandbox.ReasonExited, 255, ""},
		{"signal_SIGTERM", "kill -TERM $$; sleep 5; exit 7", sandbox.ReasonSignaled, -1, "SIGTERM"},
		{"signal_SIGKILL", "kill -KILL $$; sleep 5; exit 7", sandbox.ReasonSignaled, -1, "SIGKILL"},
	} {
		s.run(t, c.name, func(t *testing.T) {
			res := s.oneShot(t, s.spec(nil), sh(c.script))
			if res.Reason != c.reason || res.ExitCode != c.code || res.Signal != c.signal {
				t.Fatalf("sh -c %q: want reason %q exit %d signal %q, got %s",
					c.script, c.reason, c.code, c.signal, describe(res))
			}
			if res.Succeeded() != (c.code == 0 && c.reason == sandbox.ReasonExited) {
				t.Errorf("Succeeded() = %v for %s", res.Succeeded(), describe(res))
			}
		})
	}
}

func (s *suite) testStdin(t *testing.T) {
	s.run(t, "passthrough_100KiB", func(t *testing.T) {
		in := make([]byte, 100*sandbox.KiB)
		_, _ = crand.Read(in) // every byte value, NULs included
		p := &sandbox.Process{Args: []string{"cat"}, Stdin: onlyReader{bytes.NewReader(in)}}
		res := s.oneShot(t, s.spec(nil), p)
		wantExit(t, res, 0)
		if res.Stdout != string(in) {
			t.Fatalf("cat echoed %d bytes that differ from the %d bytes of stdin (first difference at %d)",
				len(res.Stdout), len(in), firstDiff(res.Stdout, string(in)))
		}
		if res.StdoutTruncated {
			t.Errorf("StdoutTruncated set for %d bytes under the default cap", len(in))
		}
	})

	s.run(t, "nil_is_eof", func(t *testing.T) {
		spec := s.spec(func(sp *sandbox.Spec) { sp.Limits.Wall = 20 * time.Second })
		start := time.Now()
		res := s.oneShot(t, spec, &sandbox.Process{Args: []string{"cat"}})
		wantExit(t, res, 0)
		if res.Stdout != "" {
			t.Errorf("cat with nil stdin printed %s", clip(res.Stdout))
		}
		// A stdin left open would make cat wait until the 20 s wall limit.
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("cat with nil stdin took %v: stdin did not give EOF at once", d)
		}
	})

	s.run(t, "unread_does_not_block", func(t *testing.T) {
		// 4 MiB that the program never reads: feeding stdin must not keep
		// Exec from returning once the program has exited.
		spec := s.spec(func(sp *sandbox.Spec) { sp.Limits.Wall = 20 * time.Second })
		p := sh("echo ok")
		p.Stdin = onlyReader{bytes.NewReader(make([]byte, 4*sandbox.MiB))}
		start := time.Now()
		res := s.oneShot(t, spec, p)
		wantExit(t, res, 0)
		if res.Stdout != "ok\n" {
			t.Errorf("stdout = %s, want \"ok\\n\"", clip(res.Stdout))
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("run with unread stdin took %v", d)
		}
	})
}

func (s *suite) testOutput(t *testing.T) {
	s.run(t, "stdout_stderr_apart", func(t *testing.T) {
		res := s.oneShot(t, s.spec(nil), sh("echo out; echo err >&2; echo out2; echo err2 >&2"))
		wantExit(t, res, 0)
		if res.Stdout != "out\nout2\n" || res.Stderr != "err\nerr2\n" {
			t.Fatalf("stdout=%s stderr=%s, want \"out\\nout2\\n\" and \"err\\nerr2\\n\"", clip(res.Stdout), clip(res.Stderr))
		}
		if res.StdoutTruncated || res.StderrTruncated {
			t.Errorf("truncated flags set on tiny output")
		}
	})

	s.run(t, "streaming", func(t *testing.T) {
		out := newWatch("first\n")
		errw := newWatch("efirst\n")
		p := sh("echo first; echo efirst >&2; sleep 2; echo second")
		p.Stdout, p.Stderr = out, errw
		res := s.oneShot(t, s.spec(nil), p)
		done := time.Now()
		wantExit(t, res, 0)
		select {
		case <-out.seen:
		default:
			t.Fatalf("Process.Stdout never received \"first\"; got %s", clip(out.String()))
		}
		if gap := done.Sub(out.seenAt()); gap < time.Second {
			t.Errorf("\"first\" reached Process.Stdout only %v before Exec returned; want it as produced (~2 s earlier)", gap)
		}
		if out.String() != "first\nsecond\n" || errw.String() != "efirst\n" {
			t.Errorf("streamed stdout=%s stderr=%s", clip(out.String()), clip(errw.String()))
		}
		if res.Stdout != "first\nsecond\n" || res.Stderr != "efirst\n" {
			t.Errorf("Result with streaming: %s", describe(res))
		}
	})

	const limit = 1000
	capped := func(mod func(*sandbox.Limits)) sandbox.Spec {
		return s.spec(func(sp *sandbox.Spec) {
			sp.Limits.Output = limit
			sp.Limits.Wall = 20 * time.Second
			if mod != nil {
				mod(&sp.Limits)
			}
		})
	}
	// yes(n) prints the first n bytes of "xxxxxxxxx\n" repeated.
	yes := func(n int) string { return "yes xxxxxxxxx | head -c " + strconv.Itoa(n) }
	pattern := func(n int) string { return strings.Repeat("xxxxxxxxx\n", n/10+1)[:n] }

	s.run(t, "cap_below", func(t *testing.T) {
		res := s.oneShot(t, capped(nil), sh(yes(limit-1)))
		wantExit(t, res, 0)
		if res.Stdout != pattern(limit-1) || res.StdoutTruncated {
			t.Fatalf("%d bytes under a %d cap: got %d bytes, truncated=%v", limit-1, limit, len(res.Stdout), res.StdoutTruncated)
		}
	})

	s.run(t, "cap_exact", func(t *testing.T) {
		res := s.oneShot(t, capped(nil), sh(yes(limit)))
		wantExit(t, res, 0)
		if res.Stdout != pattern(limit) || res.StdoutTruncated {
			t.Fatalf("exactly %d bytes under a %d cap: got %d bytes, truncated=%v", limit, limit, len(res.Stdout), res.StdoutTruncated)
		}
	})

	s.run(t, "cap_over_keeps_running", func(t *testing.T) {
		// The program must keep running past the cap: it prints "after" to
		// stderr and exits 0 only once all 100 KB were written.
		res := s.oneShot(t, capped(nil), sh(yes(100_000)+"; echo after >&2"))
		wantExit(t, res, 0)
		if len(res.Stdout) != limit || res.Stdout != pattern(limit) {
			t.Errorf("stdout: got %d bytes, want exactly the first %d", len(res.Stdout), limit)
		}
		if !res.StdoutTruncated {
			t.Errorf("StdoutTruncated not set after 100000 bytes under a %d cap", limit)
		}
		if res.Stderr != "after\n" || res.StderrTruncated {
			t.Errorf("stderr=%s truncated=%v; want \"after\\n\" (the program kept running after the cap)", clip(res.Stderr), res.StderrTruncated)
		}
	})

	s.run(t, "cap_over_by_one", func(t *testing.T) {
		res := s.oneShot(t, capped(nil), sh(yes(limit+1)))
		wantExit(t, res, 0)
		if res.Stdout != pattern(limit) || !res.StdoutTruncated {
			t.Fatalf("%d bytes under a %d cap: got %d bytes, truncated=%v", limit+1, limit, len(res.Stdout), res.StdoutTruncated)
		}
	})

	s.run(t, "cap_stderr", func(t *testing.T) {
		res := s.oneShot(t, capped(nil), sh(yes(100_000)+" >&2; echo after"))
		wantExit(t, res, 0)
		if res.Stderr != pattern(limit) || !res.StderrTruncated {
			t.Errorf("stderr: got %d bytes truncated=%v, want exactly %d and truncated", len(res.Stderr), res.StderrTruncated, limit)
		}
		if res.Stdout != "after\n" || res.StdoutTruncated {
			t.Errorf("stdout=%s truncated=%v, want \"after\\n\"", clip(res.Stdout), res.StdoutTruncated)
		}
	})

	s.run(t, "cap_kill", func(t *testing.T) {
		spec := capped(func(l *sandbox.Limits) { l.OutputLimitKill = true })
		start := time.Now()
		res := s.oneShot(t, spec, sh(yes(100_000)+"; sleep 5; echo done >&2"))
		if res.Reason != sandbox.ReasonOutputLimit {
			t.Fatalf("want reason %q, got %s", sandbox.ReasonOutputLimit, describe(res))
		}
		if strings.Contains(res.Stderr, "done") {
			t.Errorf("the program finished although the output cap should have ended it")
		}
		if !res.StdoutTruncated || len(res.Stdout) > limit {
			t.Errorf("stdout: %d bytes truncated=%v, want at most %d and truncated", len(res.Stdout), res.StdoutTruncated, limit)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("run took %v; the output cap should have ended it before the 5 s sleep", d)
		}
	})

	s.run(t, "cap_kill_at_limit", func(t *testing.T) {
		spec := capped(func(l *sandbox.Limits) { l.OutputLimitKill = true })
		res := s.oneShot(t, spec, sh(yes(limit)+"; echo done >&2"))
		wantExit(t, res, 0)
		if res.Stdout != pattern(limit) || res.StdoutTruncated || res.Stderr != "done\n" {
			t.Fatalf("exactly %d bytes with output_limit_kill: %s truncated=%v", limit, describe(res), res.StdoutTruncated)
		}
	})
}

func (s *suite) testResult(t *testing.T) {
	check := func(t *testing.T, res *sandbox.Result) {
		t.Helper()
		wantExit(t, res, 0)
		if res.Backend != s.b.Name() {
			t.Errorf("Result.Backend = %q, want %q", res.Backend, s.b.Name())
		}
		if res.Isolation != s.caps.Isolation {
			t.Errorf("Result.Isolation = %s, want %s (Capabilities)", res.Isolation, s.caps.Isolation)
		}
		if res.Usage.Wall <= 0 {
			t.Errorf("Result.Usage.Wall = %v, want > 0", res.Usage.Wall)
		}
		if res.Enforcement["wall"] == "" {
			t.Errorf("Result.Enforcement has no entry for \"wall\": %v", res.Enforcement)
		}
	}
	s.run(t, "fields", func(t *testing.T) {
		check(t, s.oneShot(t, s.spec(nil), &sandbox.Process{Args: []string{"/bin/true"}}))
		sb := s.create(t, s.spec(nil))
		check(t, s.exec(t, sb, &sandbox.Process{Args: []string{"/bin/true"}}))
	})
}

// onlyReader hides any WriterTo/ReadFrom fast paths of the wrapped reader.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

// watch is a concurrency-safe buffer that closes seen once it contains want.
type watch struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
	at   time.Time // when want was first seen
}

func newWatch(want string) *watch { return &watch{want: want, seen: make(chan struct{})} }

func (w *watch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if w.at.IsZero() && strings.Contains(w.buf.String(), w.want) {
		w.at = time.Now()
		close(w.seen)
	}
	return len(p), nil
}

func (w *watch) seenAt() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.at
}

func (w *watch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func firstDiff(a, b string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
