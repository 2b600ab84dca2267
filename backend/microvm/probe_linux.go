package microvm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/execbox/execbox/backend/internal/hostbase"
	"github.com/execbox/execbox/backend/internal/warm"
	"github.com/execbox/execbox/internal/host/binfacts"
	"github.com/execbox/execbox/internal/host/proc"
	"github.com/execbox/execbox/sandbox"
)

// healthTTL is how long a probe's answer is reused, and how long a host
// without a working QEMU waits before it is probed again: a probe boots
// VMs, seconds of CPU under emulation, and a server probes every backend
// every 30 s.
const healthTTL = 10 * time.Minute

// Backend runs each sandbox in a VM of its own. It is safe for concurrent
// use.
type Backend struct {
	*hostbase.Backend[facts]
	cfg          Config
	hidden       []string // execbox's work roots, never shown to a VM
	versionCache string   // where `qemu --version` is kept (binfacts); "" keeps nothing
	pool         *warm.Pool[shape, *machine]

	slowMu sync.Mutex
	slow   string // how much slower programs run under TCG, once measured
}

// facts are what the backend finds out about the host besides hostbase's.
type facts struct {
	qemu    string // the binary's path
	version string // its first --version line
	guest   string // the agent binary
	img     *image
	accel   string // "kvm" or "tcg"
	kvmWhy  string // why not KVM, when accel is tcg
	tscArgs string
}

type host = hostbase.Host[facts]

func build(cfg Config, s sandbox.Settings) (sandbox.Backend, error) {
	b := &Backend{cfg: cfg, hidden: []string{s.Root()}}
	switch {
	case cfg.Cache != "":
	case s.StateDir != "":
		b.cfg.Cache = filepath.Join(s.StateDir, "microvm")
	default:
		b.cfg.Cache = "/var/cache/execbox/microvm"
	}
	if s.StateDir != "" {
		b.versionCache = filepath.Join(s.StateDir, "microvm-qemu-version.json")
	}
	// A fixed size: under emulation each boot keeps both cores busy for
	// seconds, which a pool growing with demand would take from the runs.
	b.pool = warm.New[shape](warm.Sizing{Min: cfg.Warm, Max: cfg.Warm}, (*machine).alive, func(m *machine) { m.kill() })
	b.Backend = hostbase.NewBackend(b, s, hostbase.Options[facts]{
		Name:          Name,
		Isolation:     sandbox.IsolationVM,
		TTL:           healthTTL,
		HostNetwork:   "not supported: a VM has no network device",
		Probe:         b.probe,
		Enforcement:   enforcement,
		HealthDetails: healthDetails,
		Unavailable:   "microvm unavailable: ",
		Ready:         func(h *host, took time.Duration) string { return b.ready(h, took) },
		ProbeTimeout:  3 * time.Minute,
		ProbeWall:     60 * time.Second,
	})
	return b, nil
}

// healthDetails are the facts found, as far as the probe got: a fact
// not found is left out (doctor shows a detail all backends share once).
func healthDetails(h *host) map[string]string {
	d := map[string]string{}
	for k, v := range map[string]string{"cgroups": h.CgroupInfo, "qemu": h.Own.qemu, "qemu_version": h.Own.version,
		"accel": h.Own.accel, "guest": h.Own.guest, "kvm": h.Own.kvmWhy} {
		if v != "" {
			d[k] = v
		}
	}
	if h.Own.img != nil {
		d["kernel"] = h.Own.img.version
	}
	return d
}

// Capabilities describe the backend: no host network, and under TCG
// emulated (auto never picks it).
func (b *Backend) Capabilities() sandbox.Capabilities {
	c := b.Backend.Capabilities()
	c.Networks = []sandbox.Network{sandbox.NetworkNone}
	c.Emulated = b.Host().Own.accel == "tcg"
	return c
}

// probe finds QEMU, the guest image and KVM.
func (b *Backend) probe(h *host) error {
	if h.Rootless() {
		return fmt.Errorf("the microvm backend runs QEMU as root dropping to nobody (euid is %d)", os.Geteuid())
	}
	q, err := exec.LookPath(b.cfg.QEMU)
	if err != nil {
		return fmt.Errorf("QEMU (%s) not found: install Debian's qemu-system-x86 or set microvm.qemu: %w", b.cfg.QEMU, err)
	}
	h.Own.qemu = q
	if h.Own.guest, err = findGuest(b.cfg.Guest); err != nil {
		return err
	}
	version, err := binfacts.Output(b.versionCache, q, "--version")
	if err != nil {
		return err
	}
	h.Own.version, _, _ = strings.Cut(version, "\n")
	if h.Own.img, err = prepareImage(b.cfg.Kernel, h.Own.guest, b.cfg.Cache); err != nil {
		return err
	}
	h.Own.tscArgs = tscArgs()
	h.OpenCgroups()
	if err := h.OpenBase(); err != nil {
		return err
	}
	return b.chooseAccel(h)
}

// findGuest finds the agent binary: configured, next to the executable,
// or in PATH.
func findGuest(cfg string) (string, error) {
	if cfg != "" {
		if _, err := os.Stat(cfg); err != nil {
			return "", fmt.Errorf("microvm.guest: %w", err)
		}
		return cfg, nil
	}
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "execbox-guest")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	p, err := exec.LookPath("execbox-guest")
	if err != nil {
		return "", errors.New("execbox-guest (the VM's init) is neither next to the executable nor in PATH: build it with CGO_ENABLED=0 go build ./cmd/execbox-guest, or set microvm.guest")
	}
	return filepath.Abs(p)
}

// kvmVerdict is a KVM boot probe's outcome, kept per host boot: an open
// /dev/kvm does not mean that a guest boots (a nested hypervisor may run
// only kernels built for it), and the probe costs a boot.
type kvmVerdict struct {
	BootID string `json:"boot_id"`
	Kernel string `json:"kernel"`
	OK     bool   `json:"ok"`
	Why    string `json:"why"`
}

// chooseAccel picks KVM when a guest really boots under it, else TCG as
// microvm.accel allows.
func (b *Backend) chooseAccel(h *host) error {
	if b.cfg.Accel == "tcg" {
		h.Own.accel, h.Own.kvmWhy = "tcg", "not tried: microvm.accel is tcg"
		return nil
	}
	v := b.kvmProbe(h)
	if v.OK {
		h.Own.accel = "kvm"
		return nil
	}
	if b.cfg.Accel == "kvm" {
		return fmt.Errorf("microvm.accel is kvm, but a guest does not boot under KVM here: %s", v.Why)
	}
	h.Own.accel, h.Own.kvmWhy = "tcg", v.Why
	return nil
}

func (b *Backend) kvmProbe(h *host) kvmVerdict {
	bootID, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	v := kvmVerdict{BootID: strings.TrimSpace(string(bootID)), Kernel: h.Own.img.kernel}
	file := filepath.Join(b.cfg.Cache, "kvm.json")
	var old kvmVerdict
	if data, err := os.ReadFile(file); err == nil && json.Unmarshal(data, &old) == nil &&
		old.BootID == v.BootID && old.Kernel == v.Kernel && v.BootID != "" {
		return old
	}
	if f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0); err != nil {
		v.Why = "/dev/kvm cannot be opened: " + err.Error()
	} else {
		f.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		view, err := b.view(sandbox.Spec{})
		var m *machine
		if err == nil {
			m, err = b.boot(ctx, h, "kvm", shape{memMiB: 256, cpus: 1}, view)
		}
		cancel()
		if err == nil {
			m.kill()
			v.OK, v.Why = true, fmt.Sprintf("a guest booted under KVM in %v", m.booted.Round(time.Millisecond))
		} else {
			v.Why = "/dev/kvm opens, but a guest does not boot under it: " + lastLines(err.Error(), 3)
		}
	}
	if data, err := json.Marshal(v); err == nil {
		tmp := file + ".tmp" + fmt.Sprint(os.Getpid())
		if os.WriteFile(tmp, data, 0o644) == nil {
			os.Rename(tmp, file)
		}
	}
	return v
}

// lastLines keeps the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// ready is the Health reason of a VM that ran /bin/true.
func (b *Backend) ready(h *host, took time.Duration) string {
	if h.Own.accel == "kvm" {
		return fmt.Sprintf("KVM (%s); a sandbox ran /bin/true in %v; limits: %s", h.Own.version, took.Round(time.Millisecond), h.CgroupVersion())
	}
	return fmt.Sprintf("software emulation (QEMU TCG; KVM not used: %s): a sandbox started and ran /bin/true in %v, programs run %s; limits: %s",
		h.Own.kvmWhy, took.Round(time.Millisecond), b.slowdown(h), h.CgroupVersion())
}

// slowdown measures once how much slower a shell loop runs in a VM than
// on the host.
func (b *Backend) slowdown(h *host) string {
	b.slowMu.Lock()
	defer b.slowMu.Unlock()
	if b.slow != "" {
		return b.slow
	}
	const loop = `i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done`
	t0 := time.Now()
	sh := exec.Command("/bin/sh", "-c", loop)
	proc.PrivateStdio(sh)
	if err := sh.Run(); err != nil {
		return "slower (not measured: " + err.Error() + ")"
	}
	native := time.Since(t0)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := sandbox.Run(ctx, b, sandbox.Spec{Limits: sandbox.Limits{Wall: 50 * time.Second}}, &sandbox.Process{Args: []string{"/bin/sh", "-c", loop}})
	if err != nil || !res.Succeeded() {
		return "slower (not measured)"
	}
	b.slow = fmt.Sprintf("%.0f× slower than on the host (a shell loop: %v here, %v in the VM)",
		float64(res.Usage.Wall)/float64(native), native.Round(time.Millisecond), res.Usage.Wall.Round(time.Millisecond))
	return b.slow
}

// Warm says what the pool of booted VMs holds per shape and why
// (sandbox.Warmer).
func (b *Backend) Warm() []sandbox.Warm {
	return b.pool.Report(func(s shape) string { return fmt.Sprintf("%d MiB of RAM, %d vCPUs", s.memMiB, s.cpus) })
}

// Close stops the warm VMs, then closes the host side.
func (b *Backend) Close() error {
	b.pool.Close()
	return b.Backend.Close()
}

// enforcement says how each limit is enforced on this host.
func enforcement(h *host) map[string]string {
	inside := "in the guest: "
	m := map[string]string{
		"isolation": "a virtual machine per sandbox (QEMU microvm, " + h.Own.accel + "): its own guest kernel; inside it the native backend's namespaces, seccomp and Landlock",
		"memory":    "the VM's RAM (limit + work_size + tmp_size + 128 MiB for the guest kernel), and " + inside + "cgroup v2 memory.max on the sandbox (an overrun OOM-kills the program)",
		"pids":      inside + "cgroup v2 pids.max",
		"cpus":      "the VM's vCPUs, " + inside + "cgroup v2 cpu.max",
		"cpu_time":  inside + "execbox watcher and RLIMIT_CPU",
		"wall":      inside + "execbox timer; host backstop: the VM is killed when the guest does not answer",
		"output":    inside + "execbox capture",
		"nofile":    inside + "rlimit RLIMIT_NOFILE",
		"file_size": inside + "rlimit RLIMIT_FSIZE",
		"tmp_size":  inside + "tmpfs size",
		"work_size": inside + "tmpfs size (in the VM's RAM)",
		"network":   "no network device in the VM at all; inside, an empty network namespace",
		"seccomp":   inside + "execbox's seccomp filter; QEMU itself runs under -sandbox on",
		"landlock":  inside + "Landlock of the guest kernel",
	}
	if h.Cgroups != nil {
		m["memory"] += "; QEMU as a whole: " + h.Mechanisms["memory"] + " (RAM + 384 MiB)"
	}
	return m
}
