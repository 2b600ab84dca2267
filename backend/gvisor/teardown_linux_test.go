package gvisor

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/execbox/execbox/internal/host/workdir"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
)

// hostProcs lists the host processes whose command line mentions s: runsc
// and the gofer and sentry it starts all carry the sandbox's --root.
func hostProcs(s string) []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cmd, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.Contains(string(cmd), s) {
			out = append(out, e.Name()+": "+strings.ReplaceAll(string(cmd), "\x00", " "))
		}
	}
	return out
}

// myLeaves lists this process's cgroup leaves in every v1 hierarchy.
func myLeaves(b *Backend) []string {
	var out []string
	prefix := "execbox-" + strconv.Itoa(os.Getpid()) + "-"
	for _, mp := range b.Host().Cgroups.Hierarchies() {
		ents, _ := os.ReadDir(filepath.Join(mp, "execbox"))
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), prefix) {
				out = append(out, filepath.Join(mp, "execbox", e.Name()))
			}
		}
	}
	return out
}

// mountsUnder lists the mounts at or below dir.
func mountsUnder(dir string) []string {
	mps, _ := workdir.MountsUnder(dir)
	return mps
}

// Nothing outlives a sandbox: after many runs, some ending normally, some
// by timeout, some cancelled at random moments of runsc's start-up, and
// some closed while running, no runsc, gofer or sentry process, cgroup,
// mount, state or sandbox directory of this backend is left. While a run
// is going on, the same checks do see its parts, so they can fail.
func TestNoLeftovers(t *testing.T) {
	b := newBackend(t)
	base := b.Host().Base

	// The checks see a running sandbox.
	sb := testutil.Create(t, b, sandbox.Spec{})
	done := make(chan *sandbox.Result, 1)
	go func() { done <- testutil.Exec(t, sb, "/bin/sleep", "2") }()
	var procs, leaves, mounts []string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		procs, leaves, mounts = hostProcs(b.WorkRoot()), myLeaves(b), mountsUnder(b.WorkRoot())
		if len(procs) >= 3 {
			break
		}
	}
	if len(procs) < 3 || len(leaves) < 5 || len(mounts) < 1 {
		t.Fatalf("while a sandbox runs, found %d processes, %d cgroup leaves, %d mounts: the checks below would prove nothing\n%s",
			len(procs), len(leaves), len(mounts), strings.Join(procs, "\n"))
	}
	t.Logf("while running: %d processes, %d cgroup leaves, %d mounts", len(procs), len(leaves), len(mounts))
	testutil.WantOK(t, <-done)
	if err := sb.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	const runs = 52
	reasons := map[sandbox.Reason]int{}
	for i := range runs {
		spec := sandbox.Spec{Limits: sandbox.Limits{Wall: 10 * time.Second}}
		p := &sandbox.Process{Args: []string{"/bin/sh", "-c", "sleep 100 & setsid sleep 100 & echo up; wait"}}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		switch i % 4 {
		case 0:
			p = &sandbox.Process{Args: []string{"/bin/true"}}
		case 1:
			p.Timeout = 200 * time.Millisecond
		case 2:
			// Anywhere from before runsc has a container to after the
			// program started.
			time.AfterFunc(time.Duration(i*7%250)*time.Millisecond, cancel)
		case 3:
			sb, err := b.Create(ctx, spec)
			if err != nil {
				t.Fatal(err)
			}
			time.AfterFunc(time.Duration(i*11%300)*time.Millisecond, func() { sb.Close(context.Background()) })
			res, err := sb.Exec(ctx, p)
			if err == nil {
				reasons[res.Reason]++
			}
			if err := sb.Close(context.Background()); err != nil {
				t.Errorf("Close: %v", err)
			}
			cancel()
			continue
		}
		res, err := sandbox.Run(ctx, b, spec, p)
		cancel()
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		reasons[res.Reason]++
	}
	t.Logf("%d runs ended: %v", runs, reasons)
	if reasons[sandbox.ReasonExited] < runs/4 || reasons[sandbox.ReasonTimeout] < runs/4 || reasons[sandbox.ReasonCanceled] < runs/4 {
		t.Errorf("the runs did not end the intended ways: %v", reasons)
	}

	var left []string
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		left = nil
		for _, p := range hostProcs(b.WorkRoot()) {
			left = append(left, "process "+p)
		}
		for _, l := range myLeaves(b) {
			left = append(left, "cgroup "+l)
		}
		for _, m := range mountsUnder(b.WorkRoot()) {
			left = append(left, "mount "+m)
		}
		ents, err := os.ReadDir(base)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			left = append(left, "directory "+filepath.Join(base, e.Name()))
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	for _, l := range left {
		t.Error("left behind: " + l)
	}
}

// A FIFO made inside the sandbox lives in the sentry's memory only: it
// never appears in the work dir on the host, so collecting artifacts
// cannot block on it, and the regular files next to it come back.
func TestFIFOStaysInside(t *testing.T) {
	b := newBackend(t)
	sb := testutil.Create(t, b, sandbox.Spec{})
	testutil.WantOK(t, testutil.Exec(t, sb, "/bin/sh", "-c", "mkfifo fifo && echo keep > kept.txt && test -p fifo"))
	if _, err := os.Lstat(filepath.Join(sb.(*Sandbox).Work.Path, "fifo")); !os.IsNotExist(err) {
		t.Fatalf("the FIFO is on the host (err %v); the suite's special_files check applies again", err)
	}
	a, err := sb.Artifacts(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Files) != 1 || a.Files[0].Path != "kept.txt" || string(a.Files[0].Data) != "keep\n" {
		t.Fatalf("artifacts %+v", a)
	}
}

// Closing the backend removes its directory under the work root, but not
// while a sandbox in it is open.
func TestBackendClose(t *testing.T) {
	b := newBackend(t)
	base := b.Host().Base
	sb, err := b.Create(t.Context(), sandbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err == nil {
		t.Errorf("Close with an open sandbox succeeded")
	}
	if err := sb.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, d := range []string{base, b.WorkRoot()} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Fatalf("the backend's directory %s is still there (%v)", d, err)
		}
	}
	if _, err := b.Create(t.Context(), sandbox.Spec{}); !errors.Is(err, sandbox.ErrUnavailable) {
		t.Fatalf("Create after Close: %v, want ErrUnavailable", err)
	}
}

// Newer runsc releases pin a network namespace with a bind mount in their
// --root (null-netns) unless told not to; whatever a release mounts there,
// the next run and Close detach it, and nothing is left.
func TestStateMountsDetached(t *testing.T) {
	b := newBackend(t)
	sb := testutil.Create(t, b, sandbox.Spec{})
	s := sb.(*Sandbox)
	testutil.WantOK(t, testutil.Exec(t, sb, "/bin/true"))
	if m := mountsUnder(s.paths.state); len(m) != 0 {
		t.Errorf("runsc left mounts in its root after a run: %v", m)
	}
	pin := func() {
		t.Helper()
		p := filepath.Join(s.paths.state, "null-netns")
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount("/proc/self/ns/net", p, "", unix.MS_BIND, ""); err != nil {
			t.Fatal(err)
		}
	}
	pin()
	testutil.WantOK(t, testutil.Exec(t, sb, "/bin/true"))
	if m := mountsUnder(s.paths.state); len(m) != 0 {
		t.Errorf("a mount in runsc's root outlived the next run: %v", m)
	}
	pin()
	if err := sb.Close(t.Context()); err != nil {
		t.Fatalf("Close with a mount in runsc's root: %v", err)
	}
	if m := mountsUnder(s.Dir); len(m) != 0 {
		t.Errorf("mounts left after Close: %v", m)
	}
	if _, err := os.Stat(s.Dir); !os.IsNotExist(err) {
		t.Errorf("the sandbox dir is left: %v", err)
	}
}

// treeScript starts a process tree in which every member writes its own
// heartbeat file in /work every 50 ms, the host's view of the work dir
// showing each write: a background child, a child in a session of its
// own, an orphan (its parent has exited), a thread of a Python process,
// and the main shell. All of them ignore SIGTERM, SIGHUP and SIGINT.
const treeScript = `
trap '' TERM HUP INT
beat() { while :; do date +%s%N > "/work/hb.$1"; sleep 0.05; done; }
beat child &
setsid sh -c 'trap "" TERM HUP INT; while :; do date +%s%N > /work/hb.session; sleep 0.05; done' &
sh -c '(trap "" TERM HUP INT; while :; do date +%s%N > /work/hb.orphan; sleep 0.05; done) & exit 0'
python3 -c '
import signal, threading, time
for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
    signal.signal(s, signal.SIG_IGN)
def beat():
    while True:
        with open("/work/hb.thread", "w") as f:
            f.write(str(time.time_ns()))
        time.sleep(0.05)
threading.Thread(target=beat).start()
' &
beat main
`

var heartbeatNames = []string{"child", "session", "orphan", "thread", "main"}

// heartbeats reads every heartbeat file in the directory open as dir.
func heartbeats(dir *os.File) map[string]string {
	out := map[string]string{}
	for _, n := range heartbeatNames {
		fd, err := unix.Openat(int(dir.Fd()), "hb."+n, unix.O_RDONLY, 0)
		if err != nil {
			continue
		}
		f := os.NewFile(uintptr(fd), n)
		b, _ := io.ReadAll(f)
		f.Close()
		out[n] = string(b)
	}
	return out
}

// beating waits until every member of the tree has written a heartbeat
// twice.
func beating(t *testing.T, dir *os.File) {
	t.Helper()
	first := heartbeats(dir)
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		now := heartbeats(dir)
		ok := len(now) == len(heartbeatNames)
		for _, n := range heartbeatNames {
			if now[n] == "" || now[n] == first[n] {
				ok = false
			}
		}
		if ok {
			return
		}
	}
	t.Fatalf("the tree is not beating: %v", heartbeats(dir))
}

// stopped fails the test if any heartbeat still changes.
func stopped(t *testing.T, how string, dir *os.File) {
	t.Helper()
	before := heartbeats(dir)
	time.Sleep(time.Second)
	after := heartbeats(dir)
	if len(after) != len(heartbeatNames) {
		t.Fatalf("%s: the heartbeats can no longer be read (%v): the check proves nothing", how, after)
	}
	for _, n := range heartbeatNames {
		if after[n] != before[n] {
			t.Errorf("%s: the %s of the tree still beats", how, n)
		}
	}
}

// Timeout, cancel and Close each end the whole tree — children, another
// session, orphans, threads — as the heartbeats each member writes to the
// work dir show from the host; no host process of the sandbox is left.
// (For Close, the work dir is held open across it: its tmpfs, detached,
// stays readable.)
func TestTreeKilled(t *testing.T) {
	b := newBackend(t)
	for _, how := range []string{"timeout", "cancel", "Close"} {
		t.Run(how, func(t *testing.T) {
			sb, err := b.Create(t.Context(), sandbox.Spec{Limits: sandbox.Limits{Wall: 60 * time.Second}})
			if err != nil {
				t.Fatal(err)
			}
			s := sb.(*Sandbox)
			defer sb.Close(context.Background())
			dir, err := os.Open(s.Work.Path)
			if err != nil {
				t.Fatal(err)
			}
			defer dir.Close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			p := &sandbox.Process{Args: []string{"/bin/sh", "-c", treeScript}}
			if how == "timeout" {
				p.Timeout = 3 * time.Second
			}
			done := make(chan *sandbox.Result, 1)
			go func() {
				res, err := sb.Exec(ctx, p)
				if err != nil {
					t.Error(err)
				}
				done <- res
			}()
			beating(t, dir)
			switch how {
			case "cancel":
				cancel()
			case "Close":
				if err := sb.Close(context.Background()); err != nil {
					t.Errorf("Close: %v", err)
				}
			}
			select {
			case res := <-done:
				if res != nil {
					t.Logf("%s: reason %s signal %s", how, res.Reason, res.Signal)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("%s: Exec did not return", how)
			}
			stopped(t, how, dir)
			if procs := hostProcs(s.Dir); len(procs) > 0 {
				t.Errorf("%s: host processes left: %v", how, procs)
			}
		})
	}
}
