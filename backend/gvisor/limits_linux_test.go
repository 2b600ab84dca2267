package gvisor

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox/internal/host/proc"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
)

// A memory bomb OOM-kills the whole gVisor sandbox through its cgroup and
// the result says memory_limit; a program well under the limit is fine.
func TestMemoryLimit(t *testing.T) {
	b := newBackend(t)
	spec := sandbox.Spec{Limits: sandbox.Limits{Memory: 128 * sandbox.MiB}}
	res := testutil.Py(t, b, spec, `
x = []
while True:
    x.append(bytearray(1 << 20))`)
	if res.Reason != sandbox.ReasonMemoryLimit || res.Signal != "SIGKILL" {
		t.Fatalf("memory bomb: reason %s exit %d signal %q message %q stderr %q", res.Reason, res.ExitCode, res.Signal, res.Message, res.Stderr)
	}
	// The cgroup's high-water mark may pass the limit by the charge in
	// flight when reclaim gave up (a page or a few).
	if res.Usage.PeakMemory < 100*sandbox.MiB || res.Usage.PeakMemory > 129*sandbox.MiB {
		t.Errorf("peak memory %d, want close to the 128 MiB limit", res.Usage.PeakMemory)
	}
	t.Logf("bomb: %s (%s); enforcement: %s", res.Reason, res.Message, res.Enforcement["memory"])

	// The other side: 48 MiB touched under the same limit.
	res = testutil.Py(t, b, spec, `
x = bytearray(48 << 20)
for i in range(0, len(x), 4096):
    x[i] = 1
print("ok", sum(x[::4096]))`)
	testutil.WantOK(t, res)
	if !strings.HasPrefix(res.Stdout, "ok ") || res.Usage.PeakMemory < 48*sandbox.MiB {
		t.Fatalf("48 MiB under a 128 MiB limit: %q peak %d", res.Stdout, res.Usage.PeakMemory)
	}
	// The sentry sizes its memory to the limit.
	res = testutil.Sh(t, b, spec, "head -1 /proc/meminfo")
	testutil.WantOK(t, res)
	if got := strings.Join(strings.Fields(res.Stdout), " "); got != "MemTotal: 131072 kB" {
		t.Errorf("MemTotal inside = %q, want the 128 MiB limit", got)
	}
}

// /tmp, /dev/shm and /work are bounded by their sizes, each on both sides.
func TestFilesystemSizes(t *testing.T) {
	b := newBackend(t)
	spec := sandbox.Spec{Limits: sandbox.Limits{TmpSize: 8 * sandbox.MiB, WorkSize: 8 * sandbox.MiB}}
	res := testutil.Sh(t, b, spec, `for d in /tmp /dev/shm /work; do
  head -c 6M /dev/zero > $d/a && echo "$d 6M ok"
  head -c 4M /dev/zero > $d/b 2>/dev/null || echo "$d full"
done`)
	testutil.WantOK(t, res)
	want := "/tmp 6M ok\n/tmp full\n/dev/shm 6M ok\n/dev/shm full\n/work 6M ok\n/work full\n"
	if res.Stdout != want {
		t.Fatalf("got %q (stderr %q), want %q", res.Stdout, res.Stderr, want)
	}
}

// The rlimits the sentry enforces: open files and file size, each on both
// sides; a file over the limit ends the program with SIGXFSZ.
func TestRlimits(t *testing.T) {
	b := newBackend(t)
	t.Run("nofile", func(t *testing.T) {
		spec := sandbox.Spec{Limits: sandbox.Limits{NoFile: 64}}
		res := testutil.Py(t, b, spec, `
import resource
fs = []
try:
    for i in range(100):
        fs.append(open("/dev/null"))
except OSError as e:
    print("stopped", type(e).__name__)
print(resource.getrlimit(resource.RLIMIT_NOFILE), len(fs))`)
		testutil.WantOK(t, res)
		if !strings.HasPrefix(res.Stdout, "stopped OSError\n(64, 64) ") {
			t.Fatalf("100 files under nofile 64: %q %q", res.Stdout, res.Stderr)
		}
		res = testutil.Py(t, b, spec, `fs = [open("/dev/null") for i in range(50)]; print(len(fs))`)
		testutil.WantOK(t, res)
		if res.Stdout != "50\n" {
			t.Fatalf("50 files under nofile 64: %q %q", res.Stdout, res.Stderr)
		}
	})
	t.Run("file_size", func(t *testing.T) {
		spec := sandbox.Spec{Limits: sandbox.Limits{FileSize: 1 * sandbox.MiB}}
		res := testutil.Run(t, b, spec, "/bin/sh", "-c", "exec head -c 2M /dev/zero > /work/f")
		if res.Reason != sandbox.ReasonFileSizeLimit || res.Signal != "SIGXFSZ" {
			t.Fatalf("2 MiB under file_size 1 MiB: reason %s signal %q exit %d stderr %q", res.Reason, res.Signal, res.ExitCode, res.Stderr)
		}
		res = testutil.Run(t, b, spec, "/bin/sh", "-c", "exec head -c 1M /dev/zero > /work/f")
		testutil.WantOK(t, res)
	})
}

// CPU time: a busy loop is ended at the limit with reason cpu_limit; a
// program that mostly sleeps for longer than the limit is not.
func TestCPUTimeLimit(t *testing.T) {
	b := newBackend(t)
	spec := sandbox.Spec{Limits: sandbox.Limits{CPUTime: time.Second, Wall: 10 * time.Second}}
	start := time.Now()
	res := testutil.Sh(t, b, spec, "while :; do :; done")
	if res.Reason != sandbox.ReasonCPULimit {
		t.Fatalf("busy loop with cpu_time 1s: reason %s message %q", res.Reason, res.Message)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the CPU limit ended the loop only after %v", d)
	}
	res = testutil.Sh(t, b, spec, "sleep 1.5; echo slept")
	testutil.WantOK(t, res)
	if res.Stdout != "slept\n" {
		t.Fatalf("sleeping 1.5 s with cpu_time 1s: %q", res.Stdout)
	}
}

// The process limit is the sentry's RLIMIT_NPROC, which counts every task
// of the sandbox's uid: processes and threads. A fork bomb and a thread
// bomb stop at it with reason pids_limit (the sentry's strace says a fork
// failed with EAGAIN); processes full of threads never have more live
// tasks than the limit; the host backstop is never what stops them; and
// under the limit, forks work.
func TestPidsLimit(t *testing.T) {
	b := newBackend(t)
	const limit = 32
	spec := sandbox.Spec{Limits: sandbox.Limits{Pids: limit, Wall: 30 * time.Second}}
	sb := testutil.Create(t, b, spec)
	s := sb.(*Sandbox)
	py := func(code string) *sandbox.Result {
		t.Helper()
		return testutil.Exec(t, sb, "/usr/bin/python3", "-c", code)
	}
	for name, code := range map[string]string{
		"fork bomb":   "import os\nwhile True:\n    os.fork()\n",
		"thread bomb": "import threading, time\nwhile True:\n    threading.Thread(target=time.sleep, args=(1,)).start()\n",
	} {
		start := time.Now()
		res := py(code)
		if res.Reason != sandbox.ReasonPidsLimit || !strings.Contains(res.Message, "limit of 32 processes") {
			t.Errorf("%s: reason %s exit %d message %q, want pids_limit; stderr %q", name, res.Reason, res.ExitCode, res.Message, testutil.Tail(res.Stderr))
		}
		t.Logf("%s: %s after %v: %s", name, res.Reason, time.Since(start).Round(time.Millisecond), res.Message)
	}
	testutil.CheckCopesWithPids(t, limit, py)

	// Live tasks, counted from inside while processes start threads until
	// refused and hold them: never more than the limit.
	res := py(`
import os, threading, time
def tasks():
    n = 0
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                n += len(os.listdir("/proc/%s/task" % p))
            except OSError:
                pass
    return n
peak, kids = 0, []
for i in range(40):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        try:
            for j in range(40):
                threading.Thread(target=time.sleep, args=(1.5,)).start()
        except RuntimeError:
            pass
        time.sleep(1.5)
        os._exit(0)
    kids.append(pid)
    peak = max(peak, tasks())
end = time.time() + 1
while time.time() < end:
    peak = max(peak, tasks())
print(len(kids), peak)
for k in kids:
    os.waitpid(k, 0)`)
	testutil.WantOK(t, res)
	var kids, peak int
	if _, err := fmt.Sscan(res.Stdout, &kids, &peak); err != nil {
		t.Fatalf("output %q %q", res.Stdout, res.Stderr)
	}
	t.Logf("processes with threads under pids %d: %d children, at most %d live tasks seen", limit, kids, peak)
	if peak > limit {
		t.Errorf("%d live tasks under pids %d", peak, limit)
	}
	if peak < limit/2 {
		t.Errorf("only %d live tasks seen: the check above proves little", peak)
	}
	// The sentry's limit stopped them all, never the host's backstop.
	st, err := s.Cgroup.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.PidsLimitHits != 0 {
		t.Errorf("the host pids backstop (%d) refused %d forks", pidsBackstop(limit), st.PidsLimitHits)
	}

	// Under the limit: 20 children at once are fine.
	res = py(`
import os, time
kids = []
for i in range(20):
    pid = os.fork()
    if pid == 0:
        time.sleep(0.5)
        os._exit(0)
    kids.append(pid)
for k in kids:
    os.waitpid(k, 0)
print(len(kids))`)
	testutil.WantOK(t, res)
	if res.Stdout != "20\n" {
		t.Fatalf("20 children under pids %d: %q %q", limit, res.Stdout, res.Stderr)
	}
}

// The cpus limit holds for the whole sandbox, measured from the host: two
// threads that spin without Python's lock (hashing releases it) use no
// more than the limit, with a margin for the scheduler and a loaded host,
// and every host process of the sandbox (sentry, gofer, the platform's
// stubs: everything runsc started) is inside the sandbox's cgroup, so its
// CPU is counted there. Only an upper bound is asserted: on a loaded host
// the program may get less.
func TestCPUsLimit(t *testing.T) {
	b := newBackend(t)
	for _, cpus := range []float64{0.5, 1} {
		sb := testutil.Create(t, b, sandbox.Spec{Limits: sandbox.Limits{CPUs: cpus, Wall: 30 * time.Second}})
		s := sb.(*Sandbox)
		done := make(chan *sandbox.Result, 1)
		go func() {
			done <- testutil.Exec(t, sb, "/usr/bin/python3", "-c", `
import hashlib, threading, time
data = b"x" * (1 << 22)
def spin():
    end = time.time() + 4
    while time.time() < end:
        hashlib.sha256(data).digest()
ts = [threading.Thread(target=spin) for _ in range(2)]
[t.start() for t in ts]
[t.join() for t in ts]`)
		}()
		time.Sleep(1500 * time.Millisecond) // past start-up
		before, err := s.Cgroup.Stats()
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		time.Sleep(2 * time.Second)
		after, err := s.Cgroup.Stats()
		if err != nil {
			t.Fatal(err)
		}
		used := float64(after.CPU-before.CPU) / float64(time.Since(start))
		outside := outsideCgroup(t, s)
		res := <-done
		testutil.WantOK(t, res)
		t.Logf("cpus %.1f: the sandbox used %.2f CPUs (cgroup usage over wall, measured on the host)", cpus, used)
		if used > cpus*1.15 {
			t.Errorf("cpus %.1f: the sandbox used %.2f CPUs", cpus, used)
		}
		if len(outside) > 0 {
			t.Errorf("host processes of the sandbox outside its cgroup (their CPU is not limited): %v", outside)
		}
	}
}

// outsideCgroup lists the running sandbox's host processes (runsc's
// descendants) that are not in its cgroup.
func outsideCgroup(t *testing.T, s *Sandbox) []string {
	t.Helper()
	in, err := s.Cgroup.Procs()
	if err != nil {
		t.Fatal(err)
	}
	children := map[int][]int{}
	runsc := 0
	for pid, ppid := range proc.Parents() {
		children[ppid] = append(children[ppid], pid)
		if cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); bytes.Contains(cmd, []byte("--root="+s.paths.state+"\x00")) &&
			bytes.Contains(cmd, []byte("\x00run\x00")) {
			runsc = pid
		}
	}
	if runsc == 0 {
		t.Fatal("no runsc run process found for the sandbox")
	}
	var out []string
	var walk func(int)
	walk = func(p int) {
		for _, c := range children[p] {
			if !slices.Contains(in, c) {
				cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", c))
				out = append(out, fmt.Sprintf("%d %q", c, strings.ReplaceAll(string(cmd), "\x00", " ")))
			}
			walk(c)
		}
	}
	walk(runsc)
	if len(in) < 2 {
		t.Fatalf("only %d processes in the cgroup: the check above proves nothing", len(in))
	}
	return out
}
