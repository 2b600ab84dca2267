package sandboxtest

import (
	"bytes"
	crand "crypto/rand"
	"io"
	"strconv"
	"strings"
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

	// A program that cannot be started ends like a shell and `docker run`
	// say: a Result with reason exited, 127 when there is no such program,
	// 126 when it is there but cannot be executed, the cause in Message.
	for _, c := range []struct {
		name string
		args []string
		code int
	}{
		{"not_found_127", []string{"execbox-suite-no-such-program"}, sandbox.ExitNotFound},
		{"not_found_path_127", []string{"/usr/bin/execbox-suite-no-such-program"}, sandbox.ExitNotFound},
		{"not_executable_126", []string{"./script.sh"}, sandbox.ExitNotExecutable},
		{"directory_126", []string{"./dir"}, sandbox.ExitNotExecutable},
	} {
		s.run(t, c.name, func(t *testing.T) {
			sb := s.create(t, s.spec(nil))
			// script.sh is a shell script without an execute bit.
			files := map[string][]byte{"script.sh": []byte("#!/bin/sh\necho ran\n"), "dir/f": []byte("f")}
			if err := sb.WriteFiles(s.ctx(t), files); err != nil {
				t.Fatalf("WriteFiles: %v", err)
			}
			res, err := sb.Exec(s.ctx(t), &sandbox.Process{Args: c.args})
			if err != nil || res == nil || res.Reason != sandbox.ReasonExited || res.ExitCode != c.code || res.Signal != "" {
				t.Fatalf("Exec %q: want a Result with reason %q and exit code %d (the rule of package sandbox), got err=%v %s",
					c.args, sandbox.ReasonExited, c.code, err, describe(res))
			}
			if res.Message == "" {
				t.Errorf("Exec %q: exit %d without a Message saying why", c.args, c.code)
			}
			if res.Stdout != "" || res.Succeeded() {
				t.Errorf("Exec %q: the program ran: %s", c.args, describe(res))
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
		// A stdin left open would keep cat waiting until the wall limit.
		res := s.oneShot(t, s.spec(nil), &sandbox.Process{Args: []string{"cat"}})
		wantExit(t, res, 0)
		if res.Stdout != "" {
			t.Errorf("cat with nil stdin printed %s", clip(res.Stdout))
		}
	})

	s.run(t, "unread_does_not_block", func(t *testing.T) {
		// 4 MiB that the program never reads, then a stdin that stays open
		// until the test ends: feeding stdin must not keep Exec from
		// returning once the program has exited.
		sb := s.create(t, s.spec(nil))
		p := sh("echo ok")
		p.Stdin = io.MultiReader(bytes.NewReader(make([]byte, 4*sandbox.MiB)), newGate(t))
		res := s.execBounded(t, sb, p, "stdin the program never read kept it from returning after the program exited")
		wantExit(t, res, 0)
		if res.Stdout != "ok\n" {
			t.Errorf("stdout = %s, want \"ok\\n\"", clip(res.Stdout))
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
		// The program prints, then waits on its stdin for the host, which
		// opens it only once both lines have reached Process.Stdout and
		// Process.Stderr: output that is held back until the program ends
		// never gets there, and the program waits until its wall limit.
		out := newWatch("first\n")
		errw := newWatch("efirst\n")
		g := newGate(t)
		go func() {
			<-out.seen
			<-errw.seen
			g.open("go\n")
		}()
		p := sh(`echo first; echo efirst >&2; read -r line; echo "second $line"`)
		p.Stdout, p.Stderr, p.Stdin = out, errw, g
		res := s.oneShot(t, s.spec(func(sp *sandbox.Spec) { sp.Limits.Wall = 30 * time.Second }), p)
		if res.Reason != sandbox.ReasonExited {
			t.Fatalf("the program waited for its first lines to reach Process.Stdout and Process.Stderr, which they did not while it ran "+
				"(streamed stdout %s, stderr %s): %s", clip(out.String()), clip(errw.String()), describe(res))
		}
		wantExit(t, res, 0)
		if out.String() != "first\nsecond go\n" || errw.String() != "efirst\n" {
			t.Errorf("streamed stdout=%s stderr=%s", clip(out.String()), clip(errw.String()))
		}
		if res.Stdout != "first\nsecond go\n" || res.Stderr != "efirst\n" {
			t.Errorf("Result with streaming: %s", describe(res))
		}
	})

	s.run(t, "burst_100k_lines", func(t *testing.T) {
		// 100 000 short lines (588 895 bytes, within the default 1 MiB cap)
		// under the default wall limit: every line arrives, in order.
		res := s.oneShot(t, s.spec(nil), &sandbox.Process{Args: []string{"seq", "1", "100000"}})
		wantExit(t, res, 0)
		if res.StdoutTruncated {
			t.Errorf("StdoutTruncated set for %d bytes under the default cap", len(res.Stdout))
		}
		lines := strings.Split(strings.TrimSuffix(res.Stdout, "\n"), "\n")
		for i, l := range lines {
			if l != strconv.Itoa(i+1) {
				t.Fatalf("line %d of %d is %q, want %d: a line was lost or reordered (%d bytes of stdout)", i+1, len(lines), l, i+1, len(res.Stdout))
			}
		}
		if len(lines) != 100000 || !strings.HasSuffix(res.Stdout, "\n") {
			t.Fatalf("got %d lines (%d bytes), want 100000", len(lines), len(res.Stdout))
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
		// The program would go on for as long as its wall limit allows and
		// then say "done"; the output cap must end it first.
		spec := capped(func(l *sandbox.Limits) { l.OutputLimitKill = true; l.Wall = 30 * time.Second })
		res := s.oneShot(t, spec, sh(yes(100_000)+"; sleep 25; echo done >&2"))
		if res.Reason != sandbox.ReasonOutputLimit {
			t.Fatalf("want reason %q, got %s", sandbox.ReasonOutputLimit, describe(res))
		}
		if strings.Contains(res.Stderr, "done") {
			t.Errorf("the program finished although the output cap should have ended it")
		}
		if !res.StdoutTruncated || len(res.Stdout) > limit {
			t.Errorf("stdout: %d bytes truncated=%v, want at most %d and truncated", len(res.Stdout), res.StdoutTruncated, limit)
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

func firstDiff(a, b string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
