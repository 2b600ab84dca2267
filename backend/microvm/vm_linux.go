package microvm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/execbox/execbox/internal/host/cgroups"
	"github.com/execbox/execbox/internal/host/guest"
	"github.com/execbox/execbox/internal/host/hostview"
	"github.com/execbox/execbox/internal/host/proc"
	"github.com/execbox/execbox/internal/host/workdir"
	"github.com/execbox/execbox/sandbox"
)

// qemuOverhead is what QEMU holds beside the guest's RAM (its own heap,
// TCG's translation cache): the host cgroup's memory limit is the RAM plus
// this.
const qemuOverhead = 384 * sandbox.MiB

// shape is what a VM is booted with; warm VMs are kept per shape.
type shape struct {
	memMiB int64  // guest RAM
	cpus   int    // vCPUs
	view   string // viewKey of the host view
}

// machine is one running VM.
type machine struct {
	id      string
	shape   shape
	dir     string // on the host: the control socket and the view
	cmd     *exec.Cmd
	cg      *cgroups.Cgroup
	client  *guest.Client
	console *tail
	exited  chan struct{}
	booted  time.Duration

	once    sync.Once
	killErr error
}

// bootTimeout bounds a boot until the agent says hello.
const bootTimeout = 60 * time.Second

// boot starts a VM of shape sh showing view and waits for its agent.
func (b *Backend) boot(ctx context.Context, h *host, accel string, sh shape, view *hostview.View) (_ *machine, err error) {
	start := time.Now()
	m := &machine{id: sandbox.NewID(), shape: sh, console: &tail{}, exited: make(chan struct{})}
	m.dir = filepath.Join(h.Base, "vm-"+m.id)
	if err := os.Mkdir(m.dir, 0o700); err != nil {
		return nil, sandbox.Errorf(sandbox.ErrInternal, "workdir_failed", "making the VM's dir: %w", err)
	}
	defer func() {
		if err != nil {
			m.kill()
		}
	}()
	if err := makeView(filepath.Join(m.dir, "view"), view); err != nil {
		return nil, sandbox.Errorf(sandbox.ErrInternal, "view_failed", "making the VM's root: %w", err)
	}
	if h.Cgroups != nil {
		l := cgroups.Limits{Memory: sh.memMiB*sandbox.MiB + qemuOverhead, Pids: 256, CPUs: float64(sh.cpus)}
		if m.cg, err = h.Cgroups.Create("vm-"+m.id, l); err != nil {
			return nil, sandbox.Errorf(sandbox.ErrInternal, "cgroup_failed", "creating the VM's cgroup: %w", err)
		}
	}
	m.cmd = exec.Command(h.Own.qemu, qemuArgs(h, accel, sh, m.dir)...)
	m.cmd.Env = []string{}
	m.cmd.Stdout, m.cmd.Stderr = m.console, m.console
	proc.PrivateStdio(m.cmd)
	m.cmd.SysProcAttr = &syscall.SysProcAttr{
		// QEMU sees no host network, IPC or processes; it drops to nobody
		// (-runas) and filters its syscalls (-sandbox) once it has opened
		// its files. PDEATHSIG: a VM never outlives execbox.
		Cloneflags: unix.CLONE_NEWNS | unix.CLONE_NEWNET | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWPID,
		Pdeathsig:  syscall.SIGKILL,
	}
	if m.cg != nil {
		if fd, ok := m.cg.FD(); ok {
			m.cmd.SysProcAttr.UseCgroupFD, m.cmd.SysProcAttr.CgroupFD = true, fd
		}
	}
	if err := m.cmd.Start(); err != nil {
		return nil, sandbox.Errorf(sandbox.ErrInternal, "vm_failed", "starting %s: %w", h.Own.qemu, err)
	}
	go func() {
		m.cmd.Wait()
		close(m.exited)
	}()
	if m.cg != nil && !m.cmd.SysProcAttr.UseCgroupFD {
		if err := m.cg.Add(m.cmd.Process.Pid); err != nil {
			return nil, sandbox.Errorf(sandbox.ErrInternal, "cgroup_failed", "%w", err)
		}
	}
	if err := m.connect(ctx); err != nil {
		return nil, err
	}
	m.booted = time.Since(start)
	return m, nil
}

// connect dials the control socket once QEMU made it and waits for the
// agent's hello.
func (m *machine) connect(ctx context.Context) error {
	deadline := time.Now().Add(bootTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	sock := filepath.Join(m.dir, "ctl.sock")
	var conn net.Conn
	for {
		c, err := net.Dial("unix", sock)
		if err == nil {
			conn = c
			break
		}
		select {
		case <-m.exited:
			return m.failed("QEMU exited while starting")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return m.failed("QEMU made no control socket in time")
		}
	}
	conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	c, err := guest.Dial(conn)
	stop()
	if err != nil {
		conn.Close()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// A QEMU that aborted resets the socket just before it is reaped.
		select {
		case <-m.exited:
			return m.failed("QEMU exited while booting")
		case <-time.After(time.Second):
			return m.failed(fmt.Sprintf("the guest agent did not say hello (%v)", err))
		}
	}
	conn.SetDeadline(time.Time{})
	m.client = c
	return nil
}

// failed is a boot error quoting what QEMU and the guest printed last.
func (m *machine) failed(what string) error {
	out := strings.TrimSpace(m.console.String())
	if out == "" {
		out = "(nothing on the console)"
	}
	return sandbox.Errorf(sandbox.ErrInternal, "vm_failed", "%s: %s", what, out)
}

// alive reports whether QEMU still runs.
func (m *machine) alive() bool {
	select {
	case <-m.exited:
		return false
	default:
		return true
	}
}

// kill stops the VM at once and removes everything of it.
func (m *machine) kill() error {
	m.once.Do(func() {
		var errs []error
		if m.client != nil {
			m.client.Close()
		}
		if m.cmd != nil && m.cmd.Process != nil {
			m.cmd.Process.Kill()
			<-m.exited
		}
		if m.cg != nil {
			errs = append(errs, m.cg.Close())
		}
		errs = append(errs, workdir.RemoveTree(m.dir))
		m.killErr = errors.Join(errs...)
	})
	return m.killErr
}

// memory is what the VM holds on the host (QEMU's cgroup): what a
// sandbox costs.
func (m *machine) memory() (int64, error) {
	if m.cg == nil {
		return 0, sandbox.Errorf(sandbox.ErrUnavailable, "no_cgroup", "the VM has no cgroup to measure")
	}
	return m.cg.Memory()
}

// qemuArgs are QEMU's arguments for a VM of shape sh in dir.
func qemuArgs(h *host, accel string, sh shape, dir string) []string {
	cpu := []string{"-accel", "tcg,tb-size=64", "-cpu", "max"}
	if accel == "kvm" {
		cpu = []string{"-accel", "kvm", "-cpu", "host"}
	}
	cmdline := "console=ttyS0 quiet loglevel=1 panic=-1 rdinit=/init lsm=landlock cryptomgr.notests " + h.Own.tscArgs
	return append(cpu,
		"-M", "microvm,x-option-roms=off,pit=on,pic=off,rtc=on,isa-serial=on",
		"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		"-m", strconv.FormatInt(sh.memMiB, 10)+"M", "-smp", strconv.Itoa(sh.cpus),
		"-kernel", h.Own.img.kernel, "-initrd", h.Own.img.initrd, "-append", cmdline,
		"-serial", "stdio",
		"-device", "virtio-serial-device",
		"-chardev", "socket,id=ctl,path="+filepath.Join(dir, "ctl.sock")+",server=on,wait=off",
		"-device", "virtserialport,chardev=ctl,name="+guest.PortName,
		"-fsdev", "local,id=root,path="+filepath.Join(dir, "view")+",security_model=none,readonly=on,multidevs=remap",
		"-device", "virtio-9p-device,fsdev=root,mount_tag="+guest.RootTag,
		// elevateprivileges stays allowed: -runas drops to nobody after
		// the filter is in place, and a denied setuid kills QEMU.
		"-sandbox", "on,obsolete=deny,elevateprivileges=allow,spawn=deny,resourcecontrol=deny",
		"-runas", "nobody",
	)
}

// tscArgs tell the guest kernel the TSC's rate, which it otherwise
// calibrates against the emulated PIT: slow, and under TCG it sometimes
// never ends.
func tscArgs() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, l := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if ok && strings.TrimSpace(k) == "cpu MHz" {
			if mhz, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && mhz > 0 {
				khz := int64(mhz * 1000)
				return fmt.Sprintf("tsc_early_khz=%d lpj=%d tsc=reliable", khz, khz*1000/250)
			}
		}
	}
	return ""
}

// makeView builds the guest's root in dir: the host paths of view bound
// read-only at their own paths, its symlinks, and mount points for what
// the guest mounts itself. QEMU shares dir as the guest's root over 9p.
func makeView(dir string, v *hostview.View) error {
	for _, d := range []string{"", "dev", "proc", "sys", "run"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	binds := append(append([]hostview.Bind(nil), v.Binds...), v.Mounts...)
	for _, bd := range binds {
		target := filepath.Join(dir, bd.Source)
		st, err := os.Stat(bd.Source)
		if err != nil {
			return err
		}
		if st.IsDir() {
			err = os.MkdirAll(target, 0o755)
		} else if err = os.MkdirAll(filepath.Dir(target), 0o755); err == nil {
			err = os.WriteFile(target, nil, 0o644)
		}
		if err != nil {
			return err
		}
		if err := unix.Mount(bd.Source, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("binding %s: %w", bd.Source, err)
		}
		if err := unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
			return fmt.Errorf("making %s read-only: %w", bd.Source, err)
		}
	}
	for _, l := range v.Symlinks {
		p := filepath.Join(dir, l.Path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.Symlink(l.Target, p); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
	}
	return nil
}

// viewKey tells views apart for the warm pool.
func viewKey(v *hostview.View) string {
	var b strings.Builder
	for _, bd := range append(append([]hostview.Bind(nil), v.Binds...), v.Mounts...) {
		b.WriteString(bd.Source + "\x00")
	}
	b.WriteString("\x01")
	for _, l := range v.Symlinks {
		b.WriteString(l.Path + "\x00" + l.Target + "\x00")
	}
	return b.String()
}

// tail keeps the last bytes QEMU and the guest console printed.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

const tailSize = 4096

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailSize {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-tailSize:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
