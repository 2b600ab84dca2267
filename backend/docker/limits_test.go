package docker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
)

// TestPidsExact: the program's own live tasks — processes and threads —
// reach Limits.Pids and never pass it. Inside, a program that forks (or
// starts threads) until refused gets exactly 32 tasks of its own under
// pids 32 (itself and 31 more). From the host, the container's pids
// cgroup holds exactly 32 + 3 (the keeper, the wrapper and its
// substitution) at its peak under a fork bomb and under a thread bomb, the
// bomb's result is pids_limit, and afterwards only the keeper is left.
func TestPidsExact(t *testing.T) {
	b := newBackend(t, Config{})
	spec := sandbox.Spec{Limits: sandbox.Limits{Pids: 32, Wall: 20 * time.Second}}
	forks := `
import os, time
kids = []
try:
    while True:
        pid = os.fork()
        if pid == 0:
            time.sleep(30)
            os._exit(0)
        kids.append(pid)
except OSError as e:
    print(len(kids) + 1, e.errno)
`
	threads := `
import threading
ev = threading.Event()
ts = []
try:
    while True:
        t = threading.Thread(target=ev.wait)
        t.start()
        ts.append(t)
except RuntimeError:
    print(len(ts) + 1)
ev.set()
`
	for _, c := range []struct{ name, code, want string }{
		{"forks", forks, "32 11\n"}, // EAGAIN
		{"threads", threads, "32\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := py(t, b, spec, c.code)
			if !res.Succeeded() || res.Stdout != c.want {
				t.Errorf("%s; want stdout %q", describe(res), c.want)
			}
			// It coped, and exited 0: the limit is named all the same.
			if c.name == "forks" && !strings.Contains(res.Message, "limit of 32 processes") {
				t.Errorf("a program that met the limit and coped: message %q, want the limit named", res.Message)
			}
		})
	}
	for _, c := range []struct{ name, code string }{
		{"fork_bomb", "import os\nwhile True:\n    os.fork()\n"},
		{"thread_bomb", "import threading, time\nwhile True:\n    threading.Thread(target=time.sleep, args=(100,), daemon=True).start()\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			sb := create(t, b, spec)
			cg := pidsCgroup(t, b, sb.(*Sandbox).c.id)
			res, err := sb.Exec(context.Background(), &sandbox.Process{Args: []string{"python3", "-c", c.code}})
			if err != nil {
				t.Fatal(err)
			}
			if res.Reason != sandbox.ReasonPidsLimit || !strings.Contains(res.Message, "limit of 32 processes") {
				t.Errorf("%s: %s; want pids_limit", c.name, describe(res))
			}
			max, peak := readInt(t, filepath.Join(cg, "pids.max")), readInt(t, filepath.Join(cg, "pids.peak"))
			if max != 32+ownPids || peak != 32+ownPids {
				t.Errorf("the container's pids cgroup: max %d, peak %d; want both %d (32 of the program's, %d of execbox's)", max, peak, 32+ownPids, ownPids)
			}
			// After the run only the keeper is left (and, for a moment, the
			// wrapper that wrote the trailer).
			cur := readInt(t, filepath.Join(cg, "pids.current"))
			for deadline := time.Now().Add(2 * time.Second); cur > 1 && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
				cur = readInt(t, filepath.Join(cg, "pids.current"))
			}
			if cur != 1 {
				t.Errorf("pids.current after the run = %d, want 1 (the keeper)", cur)
			}
			t.Logf("host view of %s: pids.max %d, pids.peak %d; %s", cg, max, peak, res.Message)
		})
	}
}

// pidsCgroup is the host directory of container id's pids cgroup, found
// through its init's /proc/PID/cgroup; it skips when the engine's
// processes are not visible here (an engine on another machine).
func pidsCgroup(t *testing.T, b *Backend, id string) string {
	t.Helper()
	in, err := b.cli.ContainerInspect(context.Background(), id, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", in.Container.State.Pid))
	if err != nil {
		testutil.SkipOrFail(t, "docker", "the engine's processes are not visible on this host: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		switch {
		case f[1] == "pids" || strings.Contains(","+f[1]+",", ",pids,"):
			return filepath.Join("/sys/fs/cgroup", f[1], f[2])
		case f[0] == "0" && f[1] == "":
			if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
				return filepath.Join("/sys/fs/cgroup", f[2])
			}
		}
	}
	testutil.SkipOrFail(t, "docker", "no pids cgroup in %q", data)
	return ""
}

func readInt(t *testing.T, path string) int64 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return n
}

// TestUsage: CPU time and peak memory come from the container's cgroup,
// on both sides: a program that burns a second of CPU and touches 64 MiB
// reports about that, and the next program in the same sandbox reports
// its own CPU time, not the sum.
func TestUsage(t *testing.T) {
	b := newBackend(t, Config{})
	sb := create(t, b, sandbox.Spec{Limits: sandbox.Limits{Memory: 256 * sandbox.MiB}})
	res := testutil.Exec(t, sb, "python3", "-c", `
import time
b = bytearray(64 << 20)
for i in range(0, len(b), 4096):
    b[i] = 1
t = time.process_time()
while time.process_time() - t < 1: pass
`)
	testutil.WantOK(t, res)
	if res.Usage.CPU < 900*time.Millisecond || res.Usage.CPU > 3*time.Second {
		t.Errorf("CPU %v for a second of work", res.Usage.CPU)
	}
	if res.Usage.PeakMemory < 64*sandbox.MiB || res.Usage.PeakMemory > 200*sandbox.MiB {
		t.Errorf("peak memory %d for 64 MiB touched", res.Usage.PeakMemory)
	}
	if res.Usage.Wall < res.Usage.CPU/2 {
		t.Errorf("wall %v, CPU %v", res.Usage.Wall, res.Usage.CPU)
	}
	res = testutil.Exec(t, sb, "/bin/true")
	testutil.WantOK(t, res)
	if res.Usage.CPU <= 0 || res.Usage.CPU > 200*time.Millisecond {
		t.Errorf("CPU of /bin/true after a busy program: %v (want its own, not the sum)", res.Usage.CPU)
	}
	t.Logf("usage: %+v", res.Usage)
}

// TestNetwork checks the network probe on both sides, against a listener
// on the host's loopback: with network none it cannot connect (the
// container has a loopback of its own and no other interface); with
// network host the same probe gets the listener's answer, so the probe can
// succeed and its failure above means something.
func TestNetwork(t *testing.T) {
	b := newBackend(t, Config{})
	port := testutil.Listen(t, "pong")
	probe := fmt.Sprintf(`
import os, socket
s = socket.socket()
s.settimeout(3)
try:
    s.connect(("127.0.0.1", %d))
    print("connected", s.recv(10).decode(), sorted(os.listdir("/sys/class/net")) == ["lo"])
except OSError as e:
    print("blocked", e.errno, sorted(os.listdir("/sys/class/net")))
`, port)
	res := py(t, b, sandbox.Spec{}, probe)
	if !res.Succeeded() || res.Stdout != "blocked 111 ['lo']\n" { // ECONNREFUSED: its own loopback
		t.Errorf("network none: %s", describe(res))
	}
	res = py(t, b, sandbox.Spec{Policy: sandbox.Policy{Network: sandbox.NetworkHost}}, probe)
	if !res.Succeeded() || !strings.HasPrefix(res.Stdout, "connected pong ") {
		t.Errorf("network host (the positive control): %s", describe(res))
	}
}
