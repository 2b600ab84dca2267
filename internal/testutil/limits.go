package testutil

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// The checks below are the limit tests of the backends that run the
// program on the host kernel under execbox's cgroups (native, bwrap); each
// is a whole test body.

// CopesWithPids is a Python program (a format with the exit code) that
// forks until a fork is refused, ends its children and exits with the
// code.
const CopesWithPids = `
import os, sys, time
kids = []
try:
    while True:
        pid = os.fork()
        if pid == 0:
            time.sleep(30)
            os._exit(0)
        kids.append(pid)
except OSError:
    pass
for k in kids:
    os.kill(k, 9)
    os.waitpid(k, 0)
sys.exit(%d)
`

// CheckCopesWithPids: a program that meets the pids limit and copes keeps
// its own exit code, and the limit is named — the reason when it failed,
// a message when it succeeded. run runs Python code under that limit.
func CheckCopesWithPids(t *testing.T, pids int, run func(code string) *sandbox.Result) {
	t.Helper()
	named := fmt.Sprintf("limit of %d processes", pids)
	for _, code := range []int{3, 0} {
		res := run(fmt.Sprintf(CopesWithPids, code))
		want := sandbox.ReasonPidsLimit
		if code == 0 {
			want = sandbox.ReasonExited
		}
		if res.Reason != want || res.ExitCode != code || !strings.Contains(res.Message, named) {
			t.Errorf("forks until refused, then exits %d: reason %s, exit %d, message %q; want %s, %d and the limit named",
				code, res.Reason, res.ExitCode, res.Message, want, code)
		}
	}
}

// pidsLimit: a fork bomb that dies of the pids limit is reported with
// reason pids_limit (it stops there: the wall limit would say timeout);
// 20 processes at once are fine.
func pidsLimit(t *testing.T, b sandbox.Backend) {
	spec := sandbox.Spec{Limits: sandbox.Limits{Pids: 32, Wall: 20 * time.Second}}
	res := Py(t, b, spec, `
import os, time
while True:
    os.fork()
`)
	if res.Reason != sandbox.ReasonPidsLimit {
		t.Fatalf("fork bomb: reason %s (exit %d, %s), want pids_limit; stderr %q", res.Reason, res.ExitCode, res.Message, Tail(res.Stderr))
	}
	if !strings.Contains(res.Enforcement["pids"], "pids") {
		t.Errorf("enforcement for pids = %q", res.Enforcement["pids"])
	}
	CheckCopesWithPids(t, spec.Limits.Pids, func(code string) *sandbox.Result { return Py(t, b, spec, code) })
	res = Py(t, b, spec, `
import os, time
kids = []
for _ in range(20):
    pid = os.fork()
    if pid == 0:
        time.sleep(0.5)
        os._exit(0)
    kids.append(pid)
for k in kids:
    os.waitpid(k, 0)
print("ok")`)
	WantOK(t, res)
}

// memoryLimit: a memory bomb is killed with reason memory_limit while the
// host (this test process) is unaffected; 32 MiB under a 64 MiB limit is
// fine.
func memoryLimit(t *testing.T, b sandbox.Backend) {
	spec := sandbox.Spec{Limits: sandbox.Limits{Memory: 64 * sandbox.MiB}}
	res := Py(t, b, spec, `
chunks = []
while True:
    chunks.append(bytearray(8 << 20))
`)
	if res.Reason != sandbox.ReasonMemoryLimit {
		t.Fatalf("memory bomb: reason %s (exit %d signal %s, %s), want memory_limit", res.Reason, res.ExitCode, res.Signal, res.Message)
	}
	if res.Usage.PeakMemory < 32*sandbox.MiB || res.Usage.PeakMemory > 80*sandbox.MiB {
		t.Errorf("peak memory %d, want near the 64 MiB limit", res.Usage.PeakMemory)
	}
	// The host: this process can still allocate and run.
	buf := make([]byte, 128<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	runtime.KeepAlive(buf)
	res = Py(t, b, spec, `b = bytearray(32 << 20); print(len(b))`)
	WantOK(t, res)
}

// limitsBothSides: every size and count limit, on both sides of the
// bound, and exit codes above 128 apart from signals.
func limitsBothSides(t *testing.T, b sandbox.Backend) {
	const mib = sandbox.MiB
	cases := []struct {
		name   string
		limits sandbox.Limits
		script string
		reason sandbox.Reason
		exit   int
		stdout string
	}{
		{"tmp_under", sandbox.Limits{TmpSize: 8 * mib}, "head -c 7M /dev/zero > /tmp/f && echo ok", sandbox.ReasonExited, 0, "ok\n"},
		{"tmp_over", sandbox.Limits{TmpSize: 8 * mib}, "head -c 9M /dev/zero > /tmp/f || echo full", sandbox.ReasonExited, 0, "full\n"},
		{"work_under", sandbox.Limits{WorkSize: 8 * mib}, "head -c 7M /dev/zero > /work/f && echo ok", sandbox.ReasonExited, 0, "ok\n"},
		{"work_over", sandbox.Limits{WorkSize: 8 * mib}, "head -c 9M /dev/zero > /work/f || echo full", sandbox.ReasonExited, 0, "full\n"},
		{"file_size_under", sandbox.Limits{FileSize: 1 * mib}, "head -c 1M /dev/zero > /tmp/f && echo ok", sandbox.ReasonExited, 0, "ok\n"},
		{"file_size_over", sandbox.Limits{FileSize: 1 * mib}, "exec head -c 2M /dev/zero > /tmp/f", sandbox.ReasonFileSizeLimit, -1, ""},
		{"nofile_under", sandbox.Limits{NoFile: 64}, "python3 -c 'fs=[open(\"/dev/null\") for _ in range(55)]; print(\"ok\")'", sandbox.ReasonExited, 0, "ok\n"},
		{"nofile_over", sandbox.Limits{NoFile: 64}, "python3 -c 'fs=[open(\"/dev/null\") for _ in range(70)]' 2>/dev/null || echo refused; ulimit -Hn", sandbox.ReasonExited, 0, "refused\n64\n"},
		{"cpu_time_over", sandbox.Limits{CPUTime: time.Second, Wall: 10 * time.Second}, "exec python3 -c 'while True: pass'", sandbox.ReasonCPULimit, -1, ""},
		{"cpu_time_under", sandbox.Limits{CPUTime: 3 * time.Second, Wall: 10 * time.Second}, "python3 -c 'import time\nt=time.process_time()\nwhile time.process_time()-t < 0.5: pass\nprint(\"ok\")'", sandbox.ReasonExited, 0, "ok\n"},
		// Exit codes above 128 stay exit codes (bwrap alone reports a
		// signal as 128+n, indistinguishable from these).
		{"exit_137", sandbox.Limits{}, "exit 137", sandbox.ReasonExited, 137, ""},
		{"signal_9", sandbox.Limits{}, "kill -9 $$", sandbox.ReasonSignaled, -1, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := Sh(t, b, sandbox.Spec{Limits: c.limits}, c.script)
			if res.Reason != c.reason || res.ExitCode != c.exit || res.Stdout != c.stdout {
				t.Fatalf("got reason=%s exit=%d signal=%s stdout=%q stderr=%q message=%q; want reason=%s exit=%d stdout=%q",
					res.Reason, res.ExitCode, res.Signal, res.Stdout, Tail(res.Stderr), res.Message, c.reason, c.exit, c.stdout)
			}
		})
	}
}

// workSizeWriteFiles: WriteFiles into a full work dir is a typed limit
// error.
func workSizeWriteFiles(t *testing.T, b sandbox.Backend) {
	sb := Create(t, b, sandbox.Spec{Limits: sandbox.Limits{WorkSize: 4 * sandbox.MiB}})
	if err := sb.WriteFiles(t.Context(), map[string][]byte{"small": make([]byte, 3*sandbox.MiB)}); err != nil {
		t.Fatalf("3 MiB into a 4 MiB work dir: %v", err)
	}
	err := sb.WriteFiles(t.Context(), map[string][]byte{"big": make([]byte, 2*sandbox.MiB)})
	if sandbox.CodeOf(err) != "work_size_exceeded" {
		t.Fatalf("2 MiB more into a 4 MiB work dir: %v (code %q), want work_size_exceeded", err, sandbox.CodeOf(err))
	}
}

// sessionState: the work dir carries over between Execs of one sandbox;
// /tmp is fresh for each.
func sessionState(t *testing.T, b sandbox.Backend) {
	sb := Create(t, b, sandbox.Spec{})
	WantOK(t, Exec(t, sb, "/bin/sh", "-c", "echo kept > /work/state; echo gone > /tmp/state"))
	res := Exec(t, sb, "/bin/sh", "-c", "cat /work/state; cat /tmp/state 2>/dev/null || echo fresh-tmp")
	WantOK(t, res)
	if res.Stdout != "kept\nfresh-tmp\n" {
		t.Fatalf("second Exec saw %q", res.Stdout)
	}
}

// notFound: a program that is not there exits 127, one that cannot be
// executed 126, as a shell says (sandbox.ExitNotFound, ExitNotExecutable),
// with the cause in Message; a working directory missing in the sandbox is
// ErrInvalid naming it; a program that exists runs.
func notFound(t *testing.T, b sandbox.Backend) {
	sb := Create(t, b, sandbox.Spec{})
	if err := sb.WriteFiles(t.Context(), map[string][]byte{"sub/f": []byte("x")}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"no-such-program"}, 127, `program "no-such-program" not found in the sandbox's PATH`},
		{[]string{"/usr/bin/no-such-program"}, 127, `program "/usr/bin/no-such-program": not found`},
		{[]string{"/etc/passwd"}, 126, `program "/etc/passwd": not executable`},
		{[]string{"/etc"}, 126, `program "/etc": is a directory`},
		{[]string{"sub/f"}, 126, `program "sub/f": not executable`},
	} {
		res, err := sb.Exec(t.Context(), &sandbox.Process{Args: c.args})
		if err != nil || res.Reason != sandbox.ReasonExited || res.ExitCode != c.code || !strings.HasPrefix(res.Message, c.msg) {
			t.Errorf("Exec %q: %v %+v, want exit %d with a message starting %q", c.args, err, res, c.code, c.msg)
		}
	}
	for _, dir := range []string{"missing", "sub/f"} {
		_, err := sb.Exec(t.Context(), &sandbox.Process{Args: []string{"/bin/true"}, Dir: dir})
		if !errors.Is(err, sandbox.ErrInvalid) || sandbox.CodeOf(err) != "dir_not_found" {
			t.Errorf("Exec in %q: %v (code %q), want ErrInvalid dir_not_found", dir, err, sandbox.CodeOf(err))
		}
	}
	res := Exec(t, sb, "pwd")
	WantOK(t, res)
	if res.Stdout != "/work\n" {
		t.Fatalf("pwd = %q", res.Stdout)
	}
	res, err := sb.Exec(t.Context(), &sandbox.Process{Args: []string{"cat", "f"}, Dir: "sub"})
	if err != nil || res.Stdout != "x" {
		t.Fatalf("cat f in sub: %v %+v", err, res)
	}
}

// tmpExec: /tmp, /work and writable mounts are noexec unless
// Policy.TmpExec.
func tmpExec(t *testing.T, b sandbox.Backend) {
	rw := t.TempDir()
	os.Chmod(rw, 0o777)
	mount := []sandbox.Mount{{Source: rw, Target: "/out", Writable: true}}
	script := "cp /bin/true /tmp/t && cp /bin/true /work/t && cp /bin/true /out/t && for p in /tmp/t /work/t /out/t; do $p && echo ran; done; true"
	res := Sh(t, b, sandbox.Spec{Policy: sandbox.Policy{Mounts: mount}}, script)
	WantOK(t, res)
	if res.Stdout != "" {
		t.Fatalf("a copied binary ran from a noexec dir: %q", res.Stdout)
	}
	os.Remove(filepath.Join(rw, "t"))
	res = Sh(t, b, sandbox.Spec{Policy: sandbox.Policy{TmpExec: true, Mounts: mount}}, script)
	WantOK(t, res)
	if res.Stdout != "ran\nran\nran\n" {
		t.Fatalf("with tmp_exec: %q %q", res.Stdout, res.Stderr)
	}
}

// concurrentRuns: sandboxes run side by side, each with its own /tmp and
// work dir.
func concurrentRuns(t *testing.T, b sandbox.Backend) {
	const n = 8
	errs := make(chan error, n)
	for i := range n {
		go func() {
			res, err := sandbox.Run(t.Context(), b, sandbox.Spec{Files: map[string][]byte{"in": []byte(strings.Repeat("x", i))}},
				&sandbox.Process{Args: []string{"/bin/sh", "-c", "ls /tmp | wc -l; wc -c < in; echo $i > /tmp/f; sleep 0.2; cat /tmp/f"}, Env: map[string]string{"i": string(rune('a' + i))}})
			switch {
			case err != nil:
				errs <- err
			case !res.Succeeded() || res.Stdout != "0\n"+string(rune('0'+i))+"\n"+string(rune('a'+i))+"\n":
				errs <- errors.New(res.Stdout + res.Stderr + res.Message)
			default:
				errs <- nil
			}
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
