package local

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
)

// manyTasks starts 24 processes and then 24 threads, all alive at once,
// and prints how many of each it had.
const manyTasks = `
import os, threading
r, w = os.pipe()
kids = []
for _ in range(24):
    pid = os.fork()
    if pid == 0:
        os.close(w)
        os.read(r, 1)
        os._exit(0)
    kids.append(pid)
go = threading.Event()
threads = [threading.Thread(target=go.wait) for _ in range(24)]
for t in threads:
    t.start()
print("processes", len(kids), "threads", len(threads), flush=True)
go.set()
for t in threads:
    t.join()
os.close(w)
for k in kids:
    os.waitpid(k, 0)
`

// TestPidsAsOwnUser: run by an unprivileged user with no run_as_user, a
// program may start more tasks than Limits.Pids. RLIMIT_NPROC would count
// every task of that user (the test binary's threads, the reaper's, the
// user's other programs), not the sandbox's, and keep the program from
// starting any: the limit is not applied, and the result and Capabilities
// say it is not enforced. As root the test runs again as nobody.
func TestPidsAsOwnUser(t *testing.T) {
	testutil.RequiresBinary(t, "python3", "python3")
	if os.Geteuid() == 0 && os.Getenv(childEnv) == "" {
		asNobody(t, workRootFor(t))
		return
	}
	b := newBackend(t)
	res := testutil.Py(t, b, sandbox.Spec{Limits: sandbox.Limits{Pids: 8}}, manyTasks)
	t.Logf("%s", testutil.Tail(res.Stdout+res.Stderr))
	if res.Reason != sandbox.ReasonExited || res.ExitCode != 0 || res.Stdout != "processes 24 threads 24\n" {
		t.Errorf("under Limits.Pids = 8 as uid %d: %s exit %d, stdout %q, stderr %q", os.Getuid(), res.Reason, res.ExitCode, res.Stdout, res.Stderr)
	}
	for where, e := range map[string]string{"Result.Enforcement": res.Enforcement["pids"], "Capabilities.Limits": b.Capabilities().Limits["pids"]} {
		if !strings.HasPrefix(e, "not enforced (RLIMIT_NPROC would count every process of host user") {
			t.Errorf("%s[pids] = %q, want not enforced, saying why", where, e)
		}
	}
}

// TestRunAsUserPids: with run_as_user the pids limit is RLIMIT_NPROC of
// that user: a program that tries to start 24 processes under
// Limits.Pids = 8 is refused (EAGAIN) before it has 8, and the result says
// how the limit was enforced.
func TestRunAsUserPids(t *testing.T) {
	testutil.RequiresRoot(t, "root")
	testutil.RequiresBinary(t, "python3", "python3")
	spec := sandbox.Spec{Policy: sandbox.Policy{RunAsUser: "nobody"}, Limits: sandbox.Limits{Pids: 8}}
	res := testutil.Py(t, runAsBackend(t, workRootFor(t)), spec, `
import errno, os
r, w = os.pipe()
n, err = 0, None
while n < 24:
    try:
        pid = os.fork()
    except OSError as e:
        err = errno.errorcode.get(e.errno, e.errno)
        break
    if pid == 0:
        os.close(w)
        os.read(r, 1)
        os._exit(0)
    n += 1
print(n, err)
`)
	t.Logf("as nobody under Limits.Pids = 8, forks until: %q", res.Stdout)
	var n int
	var why string
	if _, err := fmt.Sscanf(res.Stdout, "%d %s", &n, &why); err != nil || why != "EAGAIN" || n >= 8 {
		t.Errorf("24 forks under Limits.Pids = 8 as nobody: stdout %q, stderr %q, want fewer than 8 and EAGAIN", res.Stdout, res.Stderr)
	}
	if e := res.Enforcement["pids"]; e != "rlimit RLIMIT_NPROC (per host user nobody: every process of that user counts)" {
		t.Errorf("Enforcement[pids] = %q", e)
	}
}
