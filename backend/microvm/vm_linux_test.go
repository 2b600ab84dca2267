package microvm

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
)

// A program runs in a guest kernel of its own, as nobody, with no network
// device at all.
func TestRunsInGuestKernel(t *testing.T) {
	b := newBackend(t)
	res := run(t, b, sandbox.Spec{}, &sandbox.Process{Args: []string{"/bin/sh", "-c", "uname -r; id -u; tail -n +3 /proc/net/dev | cut -d: -f1"}})
	if !res.Succeeded() || res.Backend != Name || res.Isolation != sandbox.IsolationVM {
		t.Fatalf("%+v", res)
	}
	want := b.Host().Own.img.version + "\n65534\n    lo\n"
	if res.Stdout != want {
		t.Fatalf("in the VM: %q, want %q (the guest kernel, nobody, loopback only)", res.Stdout, want)
	}
	var host unix.Utsname
	unix.Uname(&host)
	if strings.HasPrefix(res.Stdout, unix.ByteSliceToString(host.Release[:])+"\n") {
		t.Fatalf("the VM runs the host's kernel %s", res.Stdout)
	}
}

// The host network cannot be asked for, and a writable host path cannot
// be shared: both are refused before a VM boots.
func TestRefusesHostNetworkAndWritableMounts(t *testing.T) {
	b := newBackend(t)
	if c := b.Capabilities(); len(c.Networks) != 1 || c.Networks[0] != sandbox.NetworkNone {
		t.Fatalf("networks %v, want none only", c.Networks)
	}
	_, err := b.Create(t.Context(), sandbox.Spec{Policy: sandbox.Policy{Network: sandbox.NetworkHost}})
	if !errors.Is(err, sandbox.ErrInvalid) || sandbox.CodeOf(err) != "network_unsupported" {
		t.Fatalf("host network: %v", err)
	}
	dir := t.TempDir()
	_, err = b.Create(t.Context(), sandbox.Spec{Policy: sandbox.Policy{Mounts: []sandbox.Mount{{Source: dir, Target: "/data", Writable: true}}}})
	if !errors.Is(err, sandbox.ErrInvalid) || sandbox.CodeOf(err) != "mount_invalid" {
		t.Fatalf("writable mount: %v", err)
	}
	// A read-only one is shown, read-only.
	os.WriteFile(filepath.Join(dir, "in"), []byte("host data"), 0o644)
	os.Chmod(dir, 0o755)
	res := run(t, b, sandbox.Spec{Policy: sandbox.Policy{Mounts: []sandbox.Mount{{Source: dir, Target: "/data"}}}},
		&sandbox.Process{Args: []string{"/bin/sh", "-c", "cat /data/in; echo x > /data/out && echo wrote"}})
	if res.Stdout != "host data" || strings.Contains(res.Stdout, "wrote") {
		t.Fatalf("read-only mount: %+v", res)
	}
}

// A memory bomb ends at the sandbox's memory limit (memory_limit), inside
// the VM; the VM's RAM bounds everything else, and the host is untouched.
func TestMemoryBomb(t *testing.T) {
	b := newBackend(t)
	spec := sandbox.Spec{Limits: sandbox.Limits{Memory: 64 * sandbox.MiB, Wall: 60 * time.Second}}
	res := testutil.Py(t, b, spec, "chunks = []\nwhile True:\n    chunks.append(bytearray(8 << 20))\n")
	if res.Reason != sandbox.ReasonMemoryLimit {
		t.Fatalf("memory bomb: %s (exit %d signal %s, %s), want memory_limit", res.Reason, res.ExitCode, res.Signal, res.Message)
	}
	// Just below the limit, the same program's allocation succeeds.
	res = testutil.Py(t, b, spec, "b = bytearray(32 << 20); print(len(b))")
	testutil.WantOK(t, res)
}

// QEMU itself runs confined: as nobody, in namespaces of its own, under a
// seccomp filter and in a cgroup whose memory limit is the VM's RAM plus
// QEMU's own.
func TestQEMUIsConfined(t *testing.T) {
	b := newBackend(t)
	sb, err := b.Create(t.Context(), sandbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(context.Background())
	m := sb.(*vmSandbox).vm
	pid := m.cmd.Process.Pid
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Uid:\t65534\t65534\t65534\t65534", "Seccomp:\t2", "NoNewPrivs:\t1"} {
		if !strings.Contains(string(status), want) {
			t.Errorf("QEMU's status lacks %q:\n%s", want, status)
		}
	}
	// The VM has no network device: -nodefaults, and none is added.
	cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	args := strings.Split(string(cmdline), "\x00")
	if !slices.Contains(args, "-nodefaults") || slices.ContainsFunc(args, func(a string) bool {
		return a == "-netdev" || a == "-nic" || a == "-net" || strings.Contains(a, "virtio-net")
	}) {
		t.Errorf("QEMU's arguments may give the VM a network device: %q", args)
	}
	for _, ns := range []string{"net", "pid", "ipc", "uts", "mnt"} {
		self, _ := os.Readlink("/proc/self/ns/" + ns)
		its, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/" + ns)
		if its == "" || its == self {
			t.Errorf("QEMU shares the host's %s namespace (%q)", ns, its)
		}
	}
	if m.cg != nil {
		if mem, err := sb.(sandbox.Meter).Memory(); err != nil || mem <= 0 {
			t.Errorf("the VM's memory on the host: %d, %v", mem, err)
		} else {
			t.Logf("QEMU holds %d MiB on the host (a VM of %d MiB RAM)", mem>>20, m.shape.memMiB)
		}
	}
}

// Warm VMs: after a Create, one VM of the same shape is booted in the
// background, and the next Create takes it instead of booting. A health
// probe's Create boots a VM of its own and leaves the pool as it was.
func TestWarmPool(t *testing.T) {
	b := newBackend(t)
	spec := sandbox.Spec{Limits: sandbox.Limits{Memory: 200 * sandbox.MiB}} // a shape of its own
	sb, err := b.Create(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	sb.Close(context.Background())
	_, spec, _ = b.Admit(spec)
	view, _ := b.view(spec)
	sh := shapeOf(spec.Limits, viewKey(view))
	deadline := time.Now().Add(2 * time.Minute)
	for len(b.pool.Idle(sh)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no warm VM was booted")
		}
		time.Sleep(100 * time.Millisecond)
	}
	warm := b.pool.Idle(sh)[0]
	probe, err := b.Create(sandbox.Probing(t.Context()), spec)
	if err != nil {
		t.Fatal(err)
	}
	if probe.(*vmSandbox).vm == warm {
		t.Fatal("a probe's Create took the warm VM")
	}
	probe.Close(context.Background())
	if n := b.pool.Pending(sh); n != 1 || b.pool.Idle(sh)[0] != warm {
		t.Fatalf("after a probe: %d VMs waiting or booting, want the warm one alone", n)
	}
	// Of a shape with no warm VM, a probe has none booted after it.
	other := sandbox.Spec{Limits: sandbox.Limits{Memory: 180 * sandbox.MiB}}
	probe, err = b.Create(sandbox.Probing(t.Context()), other)
	if err != nil {
		t.Fatal(err)
	}
	probe.Close(context.Background())
	_, other, _ = b.Admit(other)
	otherView, _ := b.view(other)
	if n := b.pool.Pending(shapeOf(other.Limits, viewKey(otherView))); n != 0 {
		t.Fatalf("after a probe of a new shape: %d VMs waiting or booting, want none", n)
	}
	sb, err = b.Create(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(context.Background())
	if got := sb.(*vmSandbox).vm; got != warm {
		t.Fatalf("Create booted VM %s instead of taking the warm %s", got.id, warm.id)
	}
	res, err := sb.Exec(t.Context(), &sandbox.Process{Args: []string{"echo", "warm"}})
	if err != nil || res.Stdout != "warm\n" {
		t.Fatalf("%v %+v", err, res)
	}
}

// A guest that stops answering is killed with its VM once the wall limit
// and the grace have passed: the Exec still ends, typed.
func TestBackstopKillsAFrozenVM(t *testing.T) {
	b := newBackend(t)
	old := answerGrace
	answerGrace = 2 * time.Second
	defer func() { answerGrace = old }()
	// Room for the program to start under emulation: the VM freezes once
	// it runs.
	sb, err := b.Create(t.Context(), sandbox.Spec{Limits: sandbox.Limits{Wall: 15 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(context.Background())
	m := sb.(*vmSandbox).vm
	started := testutil.NewWatch("started\n")
	go func() {
		select {
		case <-started.Seen():
			m.cmd.Process.Signal(syscall.SIGSTOP) // the whole VM freezes
		case <-t.Context().Done():
		}
	}()
	res, err := sb.Exec(t.Context(), &sandbox.Process{Args: []string{"sh", "-c", "echo started; exec sleep 60"}, Stdout: started})
	if err != nil {
		t.Fatal(err)
	}
	if res.Reason != sandbox.ReasonTimeout || !strings.Contains(res.Message, "VM was killed") {
		t.Fatalf("%+v", res)
	}
	if m.alive() {
		t.Fatal("the frozen VM still runs")
	}
}

// Health says what runs the VMs and, under TCG, why not KVM and how much
// slower; Capabilities mark TCG as emulated.
func TestHealthSaysTheAccelerator(t *testing.T) {
	b := newBackend(t)
	h := b.Health(t.Context())
	if !h.Available || !h.Ready {
		t.Fatalf("%+v", h)
	}
	t.Logf("health: %s", h.Reason)
	switch b.Host().Own.accel {
	case "tcg":
		if !b.Capabilities().Emulated || !strings.Contains(h.Reason, "software emulation") ||
			!strings.Contains(h.Reason, "KVM not used: ") || !strings.Contains(h.Reason, "slower than on the host") {
			t.Fatalf("under TCG: %s (emulated %v)", h.Reason, b.Capabilities().Emulated)
		}
	case "kvm":
		if b.Capabilities().Emulated || !strings.HasPrefix(h.Reason, "KVM") {
			t.Fatalf("under KVM: %s", h.Reason)
		}
	default:
		t.Fatalf("accel %q", b.Host().Own.accel)
	}
	// accel: tcg skips the KVM probe and says so.
	tb := built(*config(func(c *Config) { c.Accel = "tcg" }), sandbox.Settings{WorkRoot: t.TempDir()})
	defer tb.Close()
	if h := tb.Host(); h.Err != nil || h.Own.accel != "tcg" || !strings.Contains(h.Own.kvmWhy, "microvm.accel is tcg") {
		t.Fatalf("accel tcg: %v %q %q", h.Err, h.Own.accel, h.Own.kvmWhy)
	}
}

// A missing QEMU or agent makes the backend unavailable, saying what to
// install, and nothing boots.
func TestUnavailableSaysWhy(t *testing.T) {
	testutil.RequiresRoot(t, Name)
	for _, c := range []struct {
		set  func(*Config)
		want string
	}{
		{func(c *Config) { c.QEMU = "no-such-qemu" }, "qemu-system-x86"},
		{func(c *Config) { c.Guest = "/nonexistent/execbox-guest" }, "microvm.guest"},
		{func(c *Config) { c.Kernel = "/nonexistent/vmlinuz-1" }, "vmlinuz-1"},
	} {
		b := built(*config(c.set), sandbox.Settings{WorkRoot: t.TempDir()})
		h := b.Health(t.Context())
		if h.Available || !strings.Contains(h.Reason, c.want) {
			t.Errorf("health %+v, want unavailable naming %q", h, c.want)
		}
		if _, err := b.Create(t.Context(), sandbox.Spec{}); !errors.Is(err, sandbox.ErrUnavailable) {
			t.Errorf("Create: %v", err)
		}
		b.Close()
	}
}

// Close during an Exec ends the Exec (canceled) and kills the whole VM:
// nothing of the sandbox's processes can outlive it.
func TestCloseDuringExecKillsTheVM(t *testing.T) {
	b := newBackend(t)
	sb, err := b.Create(t.Context(), sandbox.Spec{Limits: sandbox.Limits{Wall: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	m := sb.(*vmSandbox).vm
	started := make(chan struct{})
	done := make(chan *sandbox.Result, 1)
	go func() {
		res, _ := sb.Exec(context.Background(), &sandbox.Process{Args: []string{"/bin/sh", "-c", "(sleep 300 &); echo up; sleep 300"},
			Stdout: writerFunc(func(p []byte) (int, error) {
				select {
				case <-started:
				default:
					close(started)
				}
				return len(p), nil
			})})
		done <- res
	}()
	select {
	case <-started:
	case <-time.After(2 * time.Minute):
		t.Fatal("the program never started")
	}
	if err := sb.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-done:
		if res == nil || res.Reason == sandbox.ReasonExited {
			t.Fatalf("Exec after Close: %+v", res)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Exec did not return after Close")
	}
	if m.alive() {
		t.Fatal("QEMU runs after Close")
	}
	if _, err := os.Stat(m.dir); !os.IsNotExist(err) {
		t.Fatalf("the VM's dir is left: %v", err)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
