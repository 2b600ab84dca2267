package sandboxtest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// pidsLimit is Limits.Pids in the pids checks.
const pidsLimit = 32

// forkBomb forks children that each wait on a pipe until the program
// fails to fork (at most 200), prints how many it made and why it
// stopped, then waits on its stdin for the host (which counts them) and
// ends them. Its own live tasks are 1 + the children (Python without
// threads).
const forkBomb = `
import errno, os, sys
r, w = os.pipe()
kids, err = 0, None
while kids < 200:
    try:
        pid = os.fork()
    except OSError as e:
        err = e.errno
        break
    if pid == 0:
        os.close(w)
        os.read(r, 1)
        os._exit(0)
    kids += 1
print("tasks", 1 + kids, "errno", errno.errorcode.get(err, err), flush=True)
sys.stdin.readline()
os.close(w)
for _ in range(kids):
    os.wait()
print("done")
`

// threadBomb starts threads (pthread_create with a 64 KiB stack, each
// waiting in pause) until pthread_create fails (at most 200), prints how
// many tasks it had and the error pthread_create returned, then waits on
// its stdin for the host.
const threadBomb = `
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
attr = ctypes.create_string_buffer(128)
libc.pthread_attr_init(attr)
libc.pthread_attr_setstacksize(attr, ctypes.c_size_t(64 << 10))
start = ctypes.cast(libc.pause, ctypes.c_void_p)
threads, err = 0, 0
while threads < 200:
    tid = ctypes.c_ulong()
    err = libc.pthread_create(ctypes.byref(tid), attr, start, None)
    if err != 0:
        break
    threads += 1
print("tasks", 1 + threads, "errno", errno.errorcode.get(err, err), flush=True)
sys.stdin.readline()
print("done", flush=True)
os._exit(0)
`

// cpuSpinner forks 4 processes that spin for 3 s of the parent's clock
// and reports the wall time and the CPU time they used.
const cpuSpinner = `
import os, time
t0 = time.monotonic()
kids = []
for _ in range(4):
    pid = os.fork()
    if pid == 0:
        while time.monotonic() - t0 < 3.0:
            pass
        os._exit(0)
    kids.append(pid)
cpu = 0.0
for k in kids:
    _, _, ru = os.wait4(k, 0)
    cpu += ru.ru_utime + ru.ru_stime
print("wall %.3f cpu %.3f" % (time.monotonic() - t0, cpu))
`

// enforced skips the test when the backend says it does not enforce limit.
func (s *suite) enforced(t *testing.T, limit string) {
	t.Helper()
	if e := s.caps.Limits[limit]; e == "" || strings.HasPrefix(e, "not enforced") {
		t.Skipf("backend %s does not enforce %s: %q (Capabilities.Limits)", s.b.Name(), limit, e)
	}
}

func (s *suite) testLimits(t *testing.T) {
	// bomb runs a program that makes tasks until the pids limit refuses
	// one, and checks that its own live tasks (processes and threads)
	// never exceed the limit: as it reports them, and as the host counts
	// them in its /proc where the program's tasks are host tasks. The
	// refusal must be the limit's: EAGAIN, in the program's own words.
	bomb := func(t *testing.T, code, kind string) {
		s.enforced(t, "pids")
		tok := token()
		sb := s.create(t, s.spec(func(sp *sandbox.Spec) { sp.Limits.Pids = pidsLimit; sp.Limits.Wall = 60 * time.Second }))
		out := newWatch("\n")
		g := newGate(t)
		p := &sandbox.Process{Args: []string{"python3", "-I", "-c", "# " + tok + "\n" + code}, Stdout: out, Stdin: g}
		done := goExec(s.ctx(t), sb, p)
		stopped := make(chan struct{})
		var o execOutcome
		go func() { o = <-done; close(stopped) }()
		reported := out.waitFor(func(o string) bool { return strings.Contains(o, "\n") }, stopped, s.cfg.opTimeout)
		hostCount, hostErr := -1, error(nil)
		if reported && s.hostVisible() {
			hostCount, hostErr = tasksWith(tok)
		}
		g.open("\n")
		<-stopped
		if o.err != nil {
			t.Fatalf("Exec: %v", o.err)
		}
		line, _, _ := strings.Cut(out.String(), "\n")
		var tasks int
		var errName string
		if _, err := fmt.Sscanf(line, "tasks %d errno %s", &tasks, &errName); err != nil {
			t.Fatalf("the %s bomb did not report its tasks (%q): %s", kind, line, describe(o.res))
		}
		t.Logf("%s bomb: %d live tasks, stopped by %s; the host counted %d (%v): %s", kind, tasks, errName, hostCount, hostErr, describe(o.res))
		if tasks > pidsLimit {
			t.Errorf("the %s bomb had %d live tasks of its own under Limits.Pids = %d", kind, tasks, pidsLimit)
		}
		if hostCount > pidsLimit {
			t.Errorf("the host counted %d live tasks of the %s bomb under Limits.Pids = %d", hostCount, kind, pidsLimit)
		}
		if hostCount >= 0 && hostCount != tasks {
			t.Errorf("the host counted %d live tasks of the %s bomb, the bomb %d", hostCount, kind, tasks)
		}
		if errName != "EAGAIN" {
			t.Errorf("the %s bomb stopped with %s after %d tasks, want EAGAIN: the pids limit was not what refused it", kind, errName, tasks)
		}
		if tasks < pidsLimit/2 {
			t.Errorf("the %s bomb got only %d of its %d tasks", kind, tasks, pidsLimit)
		}
		if o.res.Reason != sandbox.ReasonExited || !strings.Contains(o.res.Stdout, "done") {
			t.Errorf("the %s bomb did not end by itself after coping with the limit: %s", kind, describe(o.res))
		}
	}
	s.run(t, "pids_fork_bomb", func(t *testing.T) { bomb(t, forkBomb, "fork") })
	s.run(t, "pids_thread_bomb", func(t *testing.T) { bomb(t, threadBomb, "thread") })

	s.run(t, "cpu_quota", func(t *testing.T) {
		// Four spinners under a quota of a twentieth of a core: the CPU
		// time the sandbox reports may not exceed the quota over the run's
		// wall time, with 10 % and one scheduling period of slack. Load on
		// the host only lowers what the spinners get, so the bound holds on
		// a busy machine. The quota is that small so that a backend that
		// drops it is caught there too: spinners starved to a fifth of a
		// core (a 2-core host at a load of 15) still use twice the bound.
		s.enforced(t, "cpus")
		const quota = 0.05
		spec := s.spec(func(sp *sandbox.Spec) { sp.Limits.CPUs = quota; sp.Limits.Wall = 60 * time.Second })
		res := s.oneShot(t, spec, &sandbox.Process{Args: []string{"python3", "-I", "-c", cpuSpinner}})
		wantExit(t, res, 0)
		bound := time.Duration(float64(res.Usage.Wall)*quota*1.1) + 100*time.Millisecond
		t.Logf("4 spinners under %.2f cores: Usage.CPU %v over Usage.Wall %v (bound %v); the program says %q",
			quota, res.Usage.CPU, res.Usage.Wall, bound, strings.TrimSpace(res.Stdout))
		if res.Usage.CPU <= 0 {
			t.Fatalf("the backend enforces cpus (%q) but reports no CPU usage: %s", s.caps.Limits["cpus"], describe(res))
		}
		if res.Usage.CPU > bound {
			t.Errorf("the sandbox used %v of CPU in %v under a quota of %.2f cores (bound %v): the quota did not hold",
				res.Usage.CPU, res.Usage.Wall, quota, bound)
		}
	})
}

// tasksWith counts the live tasks (threads) of the host processes whose
// command line contains tok and whose program is python (not a backend's
// launcher that carries the program's argv in its own).
func tasksWith(tok string) (int, error) {
	procs, err := procsWith(tok)
	if err != nil {
		return -1, err
	}
	n := 0
	for _, p := range procs {
		if !strings.HasPrefix(filepath.Base(p.argv[0]), "python") {
			continue
		}
		ents, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(p.pid), "task"))
		if err != nil {
			continue // gone
		}
		n += len(ents)
	}
	return n, nil
}
