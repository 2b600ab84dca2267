package hostbase

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/execbox/execbox/internal/host/hostview"
	"github.com/execbox/execbox/internal/host/proc"
	"github.com/execbox/execbox/internal/host/workdir"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
)

// mini is the smallest backend on this core: its launch and exec phase
// starts the program as a plain host process in the sandbox's work dir
// (in its cgroup where cgroup v2 allows that at clone time). It isolates
// nothing; it is here to test the core and to show what a backend must
// write: the types, Create and run below.
type mini struct{ *Backend[struct{}] }

type miniSandbox struct{ *Sandbox }

func newMini(s sandbox.Settings, o Options[struct{}]) *mini {
	b := &mini{}
	b.Backend = NewBackend(b, s, o)
	return b
}

func (b *mini) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	h, spec, err := b.Admit(spec)
	if err != nil {
		return nil, err
	}
	s := &miniSandbox{}
	if s.Sandbox, err = b.NewSandbox(h, spec, false, s.run); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *miniSandbox) run(ctx context.Context, p *sandbox.Process) (*sandbox.Result, error) {
	cmd := exec.Command(p.Args[0], p.Args[1:]...)
	cmd.Dir, cmd.Env = s.Work.Path, []string{"PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if fd, ok := s.Cgroup.FD(); ok {
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, fd
	}
	out, err := proc.Run(ctx, cmd, s.Supervision(p, nil))
	if err != nil {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "program_not_found", "%w", err)
	}
	res := s.Result(out)
	s.Account(res, out.Killed(), s.Spec.Limits)
	return res, nil
}

var _ sandbox.Backend = (*mini)(nil)

// rootMini is a mini backend with its own work root, as root (the work
// dir is a tmpfs then).
func rootMini(t *testing.T, o Options[struct{}]) *mini {
	t.Helper()
	testutil.RequiresRoot(t, "hostbase")
	o.Name, o.Isolation = "mini", sandbox.IsolationNone
	return newMini(sandbox.Settings{WorkRoot: t.TempDir()}, o)
}

// A sandbox of the core: files in, a program run in the work dir (its
// tmpfs bounding what it writes), artifacts out, the enforcement table,
// and Close removes the directory, the mount and the cgroup.
func TestSandboxLifecycle(t *testing.T) {
	b := rootMini(t, Options[struct{}]{SandboxDir: true, HostNetwork: "the host's"})
	if h := b.Health(t.Context()); !h.Available || !h.Ready || h.Details["cgroups"] == "" {
		t.Fatalf("Health: %+v", h)
	}
	sb, err := b.Create(t.Context(), sandbox.Spec{Policy: sandbox.Policy{Network: sandbox.NetworkHost}, Limits: sandbox.Limits{WorkSize: 4 * sandbox.MiB}})
	if err != nil {
		t.Fatal(err)
	}
	s := sb.(*miniSandbox)
	if err := sb.WriteFiles(t.Context(), map[string][]byte{"in": []byte("x")}); err != nil {
		t.Fatal(err)
	}
	res := testutil.Exec(t, sb, "/bin/sh", "-c", "cat in > out; head -c 5M /dev/zero > big || echo full")
	testutil.WantOK(t, res)
	if res.Stdout != "full\n" || res.Backend != "mini" || res.Enforcement["network"] != "the host's" || res.Enforcement["output"] == "" {
		t.Fatalf("result %+v", res)
	}
	res.Enforcement["network"] = "changed"
	if s.Enforcement["network"] != "the host's" {
		t.Fatal("a Result's enforcement is the sandbox's own map")
	}
	a, err := sb.Artifacts(t.Context())
	if err != nil || len(a.Files) != 2 || a.Files[1].Path != "out" {
		t.Fatalf("artifacts %+v %v", a, err)
	}
	if filepath.Dir(s.Dir) != b.Host().Base || filepath.Dir(s.Work.Path) != s.Dir {
		t.Fatalf("layout: dir %s, work dir %s, base %s", s.Dir, s.Work.Path, b.Host().Base)
	}
	leaves := s.Cgroup.Dirs()
	if err := sb.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, d := range append(leaves, s.Dir) {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s left after Close: %v", d, err)
		}
	}
	if err := sb.Close(t.Context()); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := sb.Exec(t.Context(), &sandbox.Process{Args: []string{"/bin/true"}}); sandbox.CodeOf(err) != "sandbox_closed" {
		t.Errorf("Exec after Close: %v", err)
	}
}

// Close during a run cancels it and waits for it; what a backend added
// with OnClose runs first.
func TestCloseEndsExec(t *testing.T) {
	b := rootMini(t, Options[struct{}]{})
	sb, err := b.Create(t.Context(), sandbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	s := sb.(*miniSandbox)
	s.OnClose(func() error { order = append(order, "first"); return nil })
	s.OnClose(func() error {
		order = append(order, "second")
		if _, err := os.Stat(s.Work.Path); err != nil {
			t.Errorf("the work dir is gone before the backend's own step: %v", err)
		}
		return errors.New("step failed")
	})
	done := make(chan *sandbox.Result)
	go func() { done <- testutil.Exec(t, sb, "/bin/sleep", "30") }()
	time.Sleep(200 * time.Millisecond)
	err = sb.Close(t.Context())
	if sandbox.CodeOf(err) != "close_failed" || len(order) != 2 || order[0] != "second" {
		t.Fatalf("Close: %v, steps %v", err, order)
	}
	if res := <-done; res.Reason != sandbox.ReasonCanceled {
		t.Fatalf("the run ended %s", res.Reason)
	}
	if _, err := os.Stat(s.Work.Path); !os.IsNotExist(err) {
		t.Fatalf("the work dir is left: %v", err)
	}
}

// One health rule: an answer is kept for TTL (forever when 0) and probed
// again after it; an unusable host is probed again after TTL; an answer
// given to an ended context is not kept.
func TestHealthRule(t *testing.T) {
	probes := 0
	fail := true
	o := Options[struct{}]{TTL: time.Hour, Probe: func(h *Host[struct{}]) error {
		probes++
		if fail {
			return errors.New("not yet")
		}
		h.OpenCgroups()
		return h.OpenBase()
	}}
	b := rootMini(t, o)
	h1 := b.Health(t.Context())
	if h1.Available || h1.Reason != "not yet" {
		t.Fatalf("Health of an unusable host: %+v", h1)
	}
	if _, err := b.Create(t.Context(), sandbox.Spec{}); sandbox.CodeOf(err) != "mini_unavailable" || !errors.Is(err, sandbox.ErrUnavailable) {
		t.Fatalf("Create on an unusable host: %v", err)
	}
	fail = false
	if h := b.Health(t.Context()); !h.CheckedAt.Equal(h1.CheckedAt) || probes != 1 {
		t.Fatalf("within the TTL: %+v after %d probes", h, probes)
	}
	b.Expire()
	if h := b.Health(t.Context()); !h.Available || probes != 2 {
		t.Fatalf("after the TTL: %+v after %d probes", h, probes)
	}

	forever := rootMini(t, Options[struct{}]{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if h := forever.Health(ctx); h.Available {
		t.Fatalf("Health with an ended context: %+v", h)
	}
	h2 := forever.Health(t.Context())
	forever.Expire()
	if h := forever.Health(t.Context()); !h2.Available || !h.CheckedAt.Equal(h2.CheckedAt) {
		t.Fatalf("TTL 0: %+v, then %+v", h2, h)
	}
}

// Backend.Close removes this process's base once every sandbox is closed
// and refuses new sandboxes; with CloseEmpty it refuses while a sandbox is
// open.
func TestBackendClose(t *testing.T) {
	for _, empty := range []bool{false, true} {
		b := rootMini(t, Options[struct{}]{SandboxDir: true, CloseEmpty: empty})
		sb, err := b.Create(t.Context(), sandbox.Spec{})
		if err != nil {
			t.Fatal(err)
		}
		base := b.Host().Base
		if empty {
			if err := b.Close(); err == nil {
				t.Fatal("CloseEmpty: Close with an open sandbox succeeded")
			}
		}
		sb.Close(t.Context())
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(base); !os.IsNotExist(err) {
			t.Fatalf("the base %s is left: %v", base, err)
		}
		if _, err := b.Create(t.Context(), sandbox.Spec{}); !errors.Is(err, sandbox.ErrUnavailable) {
			t.Fatalf("Create after Close: %v", err)
		}
	}
}

// Reconcile removes a dead process's base and keeps the live one's.
func TestReconcile(t *testing.T) {
	b := rootMini(t, Options[struct{}]{})
	base := b.Host().Base
	dead := filepath.Join(b.WorkRoot(), "4194305.dead") // above pid_max: never alive
	if err := os.MkdirAll(filepath.Join(dead, "sb"), 0o700); err != nil {
		t.Fatal(err)
	}
	removed, err := b.Reconcile(t.Context())
	if err != nil || len(removed) != 1 || removed[0] != dead {
		t.Fatalf("Reconcile: %v %v", removed, err)
	}
	if _, err := os.Stat(base); err != nil {
		t.Fatalf("the live base went: %v", err)
	}
}

// The sandboxes' device nodes are made without CAP_MKNOD (a unit with
// PrivateDevices=yes has none: the release test's hardened unit), and not
// even root changes them through their directory.
func TestOpenDevices(t *testing.T) {
	testutil.RequiresRoot(t, "hostbase")
	h := &Host[struct{}]{Base: t.TempDir()}
	t.Cleanup(func() { workdir.UnmountUnder(h.Base) })
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the thread ends with the capability gone.
		runtime.LockOSThread()
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err != nil {
			errc <- err
			return
		}
		data[0].Effective &^= 1 << unix.CAP_MKNOD
		if err := unix.Capset(&hdr, &data[0]); err != nil {
			errc <- err
			return
		}
		if err := unix.Mknod(filepath.Join(h.Base, "probe"), unix.S_IFCHR|0o666, 0x103); !errors.Is(err, unix.EPERM) {
			errc <- fmt.Errorf("mknod with CAP_MKNOD dropped: %v, want EPERM", err)
			return
		}
		errc <- h.OpenDevices()
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	for _, d := range hostview.Devices {
		p := filepath.Join(h.Devices, d)
		var st, host unix.Stat_t
		if err := unix.Stat(p, &st); err != nil || unix.Stat("/dev/"+d, &host) != nil || st.Rdev != host.Rdev || st.Mode&unix.S_IFMT != unix.S_IFCHR {
			t.Fatalf("%s is not the host's /dev/%s (%v)", p, d, err)
		}
		if err := unix.Chmod(p, 0o600); !errors.Is(err, unix.EROFS) {
			t.Errorf("chmod %s: %v, want EROFS", p, err)
		}
		if err := unix.Utimes(p, nil); !errors.Is(err, unix.EROFS) {
			t.Errorf("touch %s: %v, want EROFS", p, err)
		}
	}
	if err := os.WriteFile(filepath.Join(h.Devices, "x"), nil, 0o600); !errors.Is(err, unix.EROFS) {
		t.Errorf("a new file beside the nodes: %v, want EROFS", err)
	}
}

// OpenDevices while this process starts programs (as the server starts
// sandboxes beside a backend's probe): a child between fork and exec holds
// copies of the process's fds, and a remount read-only fails (EBUSY) while
// a file on the mount is open for writing — CI saw bwrap "not ready" so.
func TestOpenDevicesWhileForking(t *testing.T) {
	testutil.RequiresRoot(t, "hostbase")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				exec.Command("/bin/true").Run()
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()
	for i := range 100 {
		h := &Host[struct{}]{Base: t.TempDir()}
		err := h.OpenDevices()
		workdir.UnmountUnder(h.Base)
		if err != nil {
			t.Fatalf("try %d: %v", i, err)
		}
	}
}
