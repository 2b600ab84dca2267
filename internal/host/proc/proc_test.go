package proc

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/execbox/execbox/sandbox"
)

func sh(script string) *exec.Cmd {
	c := exec.Command("/bin/sh", "-c", script)
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return c
}

// killGroup kills the command's process group: enough for these tests,
// whose scripts do not call setsid.
func killGroup(c *exec.Cmd) func() error {
	return func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
}

func run(t *testing.T, ctx context.Context, c *exec.Cmd, o Options) *Outcome {
	t.Helper()
	if o.Wall == 0 {
		o.Wall = 10 * time.Second
	}
	if o.Output == 0 {
		o.Output = 1 << 20
	}
	if o.Kill == nil {
		o.Kill = killGroup(c)
	}
	out, err := Run(ctx, c, o)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestExitAndStreams(t *testing.T) {
	out := run(t, context.Background(), sh("read x; echo out $x; echo err >&2; exit 3"), Options{Stdin: strings.NewReader("in\n")})
	if out.Reason != sandbox.ReasonExited || out.ExitCode != 3 || string(out.Stdout.Bytes()) != "out in\n" || string(out.Stderr.Bytes()) != "err\n" {
		t.Fatalf("got %+v stdout=%q stderr=%q", out, out.Stdout.Bytes(), out.Stderr.Bytes())
	}
}

func TestSignaled(t *testing.T) {
	out := run(t, context.Background(), sh("kill -TERM $$"), Options{})
	if out.Reason != sandbox.ReasonSignaled || out.ExitCode != -1 || out.Signal != "SIGTERM" {
		t.Fatalf("got %+v", out)
	}
}

func TestTimeoutKeepsEarlierOutput(t *testing.T) {
	start := time.Now()
	out := run(t, context.Background(), sh("echo before; sleep 30 & wait"), Options{Wall: 300 * time.Millisecond})
	if out.Reason != sandbox.ReasonTimeout || string(out.Stdout.Bytes()) != "before\n" {
		t.Fatalf("got %+v %q", out, out.Stdout.Bytes())
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("timeout took %v", d)
	}
}

func TestCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	out := run(t, ctx, sh("sleep 30"), Options{})
	if out.Reason != sandbox.ReasonCanceled {
		t.Fatalf("got %+v", out)
	}
}

// A context done before the start is canceled every time, however quickly
// the program would have exited (it once raced /bin/true's own exit).
func TestCancelledBeforeStart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 50 {
		if out := run(t, ctx, exec.Command("/bin/true"), Options{}); out.Reason != sandbox.ReasonCanceled {
			t.Fatalf("run %d: %+v", i, out)
		}
	}
}

func TestOutputCap(t *testing.T) {
	script := "head -c 100000 /dev/zero; echo done >&2"
	var live bytes.Buffer
	out := run(t, context.Background(), sh(script), Options{Output: 1000, Stdout: &live})
	if out.Reason != sandbox.ReasonExited || len(out.Stdout.Bytes()) != 1000 || !out.Stdout.Truncated() || out.Stdout.Total() != 100000 {
		t.Fatalf("cap: %+v len=%d", out, len(out.Stdout.Bytes()))
	}
	if live.Len() != 1000 {
		t.Fatalf("the live copy got %d bytes, want the kept 1000", live.Len())
	}
	if string(out.Stderr.Bytes()) != "done\n" {
		t.Fatal("program did not keep running past the cap")
	}
	out = run(t, context.Background(), sh("head -c 1000 /dev/zero"), Options{Output: 1000})
	if out.Stdout.Truncated() || len(out.Stdout.Bytes()) != 1000 {
		t.Fatal("exactly at the cap must not be truncated")
	}
	out = run(t, context.Background(), sh("head -c 5000 /dev/zero; sleep 5; echo late"), Options{Output: 1000, OutputLimitKill: true})
	if out.Reason != sandbox.ReasonOutputLimit || strings.Contains(string(out.Stdout.Bytes()), "late") {
		t.Fatalf("kill on cap: %+v", out)
	}
	// Past the cap and gone at once: whether the kill or the exit comes
	// first, the reason is the cap's. A slow stream consumer makes the exit
	// come first (the cap is seen once the bytes are passed on). Below the
	// cap the same program exited.
	slow := writerFunc(func(p []byte) (int, error) { time.Sleep(20 * time.Millisecond); return len(p), nil })
	for range 20 {
		out = run(t, context.Background(), sh("head -c 1001 /dev/zero"), Options{Output: 1000, OutputLimitKill: true, Stdout: slow})
		if out.Reason != sandbox.ReasonOutputLimit || !out.Stdout.Truncated() {
			t.Fatalf("1001 bytes then exit under a 1000 cap with kill: reason %q truncated %v", out.Reason, out.Stdout.Truncated())
		}
		out = run(t, context.Background(), sh("head -c 1000 /dev/zero"), Options{Output: 1000, OutputLimitKill: true})
		if out.Reason != sandbox.ReasonExited || out.Stdout.Truncated() {
			t.Fatalf("1000 bytes then exit under a 1000 cap with kill: reason %q truncated %v", out.Reason, out.Stdout.Truncated())
		}
	}
}

// A process outside the killed tree holding the pipe must not hang Run.
func TestStragglerHoldingPipe(t *testing.T) {
	c := exec.Command("/bin/sh", "-c", "setsid sleep 2 & echo hi")
	start := time.Now()
	out := run(t, context.Background(), c, Options{Grace: 200 * time.Millisecond, Kill: func() error { return nil }})
	if out.Reason != sandbox.ReasonExited || string(out.Stdout.Bytes()) != "hi\n" {
		t.Fatalf("got %+v", out)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Run waited %v for a straggler", d)
	}
}

func TestOutcomeResult(t *testing.T) {
	// A small output cap so the truncated flags are seen on both sides:
	// stdout passes it, stderr does not.
	out := run(t, context.Background(), sh("echo 0123456789; echo e >&2; kill -TERM $$"), Options{Output: 4})
	res := out.Result("sb-1", "test", sandbox.IsolationProcess)
	if res.ID != "sb-1" || res.Backend != "test" || res.Isolation != sandbox.IsolationProcess {
		t.Errorf("identity: got %q %q %v", res.ID, res.Backend, res.Isolation)
	}
	if res.Reason != sandbox.ReasonSignaled || res.ExitCode != -1 || res.Signal != "SIGTERM" {
		t.Errorf("end: got reason %s exit %d signal %q", res.Reason, res.ExitCode, res.Signal)
	}
	if res.Stdout != "0123" || !res.StdoutTruncated || res.Stderr != "e\n" || res.StderrTruncated {
		t.Errorf("streams: got stdout %q (truncated %v) stderr %q (truncated %v)", res.Stdout, res.StdoutTruncated, res.Stderr, res.StderrTruncated)
	}
	if res.Usage.Wall != out.Wall || res.Usage.Wall <= 0 || res.Usage.CPU != 0 || res.Usage.PeakMemory != 0 {
		t.Errorf("usage: got %+v; want only the wall time %v", res.Usage, out.Wall)
	}
}

func TestOutcomeUsage(t *testing.T) {
	// Burn some CPU in the shell itself so the rusage is not zero.
	out := run(t, context.Background(), sh("i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"), Options{})
	u := out.Usage()
	if u.Wall != out.Wall || u.CPU <= 0 || u.PeakMemory <= 0 {
		t.Fatalf("got %+v; want the wall time %v and nonzero CPU and peak memory", u, out.Wall)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// StatFields reads past a command name with spaces and parentheses; Parents
// links a child to its parent.
func TestStatFields(t *testing.T) {
	dir := t.TempDir()
	odd := filepath.Join(dir, "a) (b c")
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(sleep, odd); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(odd, "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	f := StatFields(cmd.Process.Pid)
	if len(f) < 20 || f[1] != strconv.Itoa(os.Getpid()) || !strings.ContainsAny(f[0], "RSD") {
		t.Fatalf("StatFields of %q: %q", odd, f)
	}
	if _, err := strconv.ParseUint(f[19], 10, 64); err != nil {
		t.Errorf("start time %q: %v", f[19], err)
	}
	if p := Parents()[cmd.Process.Pid]; p != os.Getpid() {
		t.Errorf("Parents: %d's parent is %d, want %d", cmd.Process.Pid, p, os.Getpid())
	}
	cmd.Process.Kill()
	cmd.Wait()
	if f := StatFields(cmd.Process.Pid); f != nil {
		t.Errorf("StatFields of a reaped process: %q", f)
	}
}
