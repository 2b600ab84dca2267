package hostbase

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/execbox/execbox/internal/host/cgroups"
	"github.com/execbox/execbox/internal/host/hostview"
	"github.com/execbox/execbox/internal/host/workdir"
	"github.com/execbox/execbox/sandbox"
)

// The program's ids inside the sandbox and, unless the backend runs
// rootless, on the host: an unprivileged host user, so host permissions
// and per-user limits apply to it.
const (
	UID = 65534
	GID = 65534
)

// Options describe a backend to the core. F is the type of the facts the
// backend finds out about the host itself. Only Name and Isolation are
// required; a nil func has the default its comment names.
type Options[F any] struct {
	// Name is the backend's registered name; errors say "<name> backend"
	// and carry the code "<name>_unavailable".
	Name      string
	Isolation sandbox.Isolation
	// TTL is how long a Health answer is reused and after which a probe
	// that found the host unusable is repeated; 0 means forever and never.
	TTL time.Duration
	// SandboxDir gives every sandbox a directory <base>/<id> of its own,
	// holding its work dir and whatever the backend adds; without it the
	// work dir sits directly in the base.
	SandboxDir bool
	// CloseEmpty makes Close refuse while a sandbox is still open (its
	// directory is left for the next start's reconciling) instead of
	// removing everything under the base.
	CloseEmpty bool
	// CgroupPids is a sandbox cgroup's pids limit for Limits.Pids: the
	// backend's own processes and threads are in the cgroup too. Default:
	// Limits.Pids.
	CgroupPids func(pids int) int
	// ProgramLeaf gives the program a pids leaf of its own in the
	// sandbox's cgroup (cgroups.Limits.ProgramPids) holding exactly
	// Limits.Pids of its tasks plus the init's forking thread, which the
	// backend moves there with Cgroup.AddProgramThread before the program
	// starts; CgroupPids then bounds the cgroup as a whole.
	ProgramLeaf bool
	// HostNetwork is Enforcement["network"] of a sandbox on the host's
	// network.
	HostNetwork string
	// RootImages: the backend mounts Spec.Root (Capabilities.RootImages).
	RootImages bool

	// Probe finds the backend's own facts and prepares the host, with
	// Host.OpenCgroups and Host.OpenBase in the order it needs; its error
	// makes the backend unavailable. Default: OpenCgroups, OpenBase.
	Probe func(h *Host[F]) error
	// Enforcement says how each limit is enforced on this host. Default:
	// Host.Enforcement, the part the backends share.
	Enforcement func(h *Host[F]) map[string]string
	// ReconcileMore removes what the backend's runs leave beyond cgroups
	// and work dirs; it runs after the cgroups are reconciled.
	ReconcileMore func(h *Host[F])

	// HealthDetails are the facts Health shows. Default: the cgroups.
	HealthDetails func(h *Host[F]) map[string]string
	// Ready is the Health reason once the probe's /bin/true ran, which
	// took took. Default: the cgroups.
	Ready func(h *Host[F], took time.Duration) string
	// ProbeFailed is the Health reason when the probe's /bin/true did not
	// succeed. Default: how it ended, its message and stderr.
	ProbeFailed func(h *Host[F], res *sandbox.Result) string
	// Unavailable prefixes the Health reason of an unusable host.
	Unavailable string
	// ProbeTimeout bounds the health probe (default 20 s); ProbeWall is
	// its program's wall-clock limit (default: the default limit).
	ProbeTimeout, ProbeWall time.Duration
}

// withDefaults fills in the funcs left nil.
func (o Options[F]) withDefaults() Options[F] {
	if o.ProbeTimeout == 0 {
		o.ProbeTimeout = 20 * time.Second
	}
	if o.CgroupPids == nil {
		o.CgroupPids = func(pids int) int { return pids }
	}
	if o.Probe == nil {
		o.Probe = func(h *Host[F]) error {
			h.OpenCgroups()
			return h.OpenBase()
		}
	}
	if o.Enforcement == nil {
		o.Enforcement = func(h *Host[F]) map[string]string {
			return h.Enforcement(o.CgroupPids(0), "the backend's own processes")
		}
	}
	if o.HealthDetails == nil {
		o.HealthDetails = func(h *Host[F]) map[string]string { return map[string]string{"cgroups": h.CgroupInfo} }
	}
	if o.Ready == nil {
		o.Ready = func(h *Host[F], _ time.Duration) string { return h.CgroupVersion() }
	}
	if o.ProbeFailed == nil {
		o.ProbeFailed = func(_ *Host[F], res *sandbox.Result) string {
			return fmt.Sprintf("probe /bin/true ended %s (exit %d): %s %s", res.Reason, res.ExitCode, res.Message, res.Stderr)
		}
	}
	return o
}

// Backend is the shared part of a backend: it probes the host, says what
// the backend can enforce and whether it works, reconciles and closes.
// The backend embeds it and adds Create.
type Backend[F any] struct {
	self     sandbox.Backend // the embedding backend, whose sandbox Health starts
	opts     Options[F]
	root     string // this backend's directory under Settings.WorkRoot
	defaults sandbox.Limits

	mu     sync.Mutex
	host   *Host[F]
	closed bool

	healthMu sync.Mutex
	health   *sandbox.Health
}

// NewBackend returns the core of backend self (the backend that embeds
// it) for settings s. It only records them; the host is looked at on
// first use.
func NewBackend[F any](self sandbox.Backend, s sandbox.Settings, o Options[F]) *Backend[F] {
	return &Backend[F]{self: self, opts: o.withDefaults(), root: filepath.Join(s.Root(), o.Name), defaults: s.DefaultLimits()}
}

// Name is the registered name.
func (b *Backend[F]) Name() string { return b.opts.Name }

// WorkRoot is this backend's directory under the work root.
func (b *Backend[F]) WorkRoot() string { return b.root }

// Host is what the backend found out about this host. It probes on first
// use, and again after TTL while the last probe found the host unusable.
func (b *Backend[F]) Host() *Host[F] {
	b.mu.Lock()
	defer b.mu.Unlock()
	if h := b.host; h == nil || (h.Err != nil && !b.closed && b.opts.TTL > 0 && time.Since(h.at) >= b.opts.TTL) {
		b.host = b.probe()
	}
	return b.host
}

func (b *Backend[F]) probe() *Host[F] {
	h := &Host[F]{root: b.root, UID: UID, GID: GID, rootless: os.Geteuid() != 0, at: time.Now()}
	h.Err = b.opts.Probe(h)
	if h.Err != nil && h.Base != "" {
		// Nothing will be made there; a later probe makes its own.
		(&workdir.Base{Root: b.root, Path: h.Base}).Close()
		h.Base = ""
	}
	h.Limits = b.opts.Enforcement(h)
	return h
}

// Capabilities describe the backend on this host.
func (b *Backend[F]) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{
		Isolation:  b.opts.Isolation,
		Sessions:   true,
		RootImages: b.opts.RootImages,
		Networks:   []sandbox.Network{sandbox.NetworkNone, sandbox.NetworkHost},
		Limits:     maps.Clone(b.Host().Limits),
		Weak:       b.Host().weak(),
		WeakWhy:    b.Host().weakWhy(),
	}
}

// weak names the limits no cgroup bounds here: without one, memory and
// pids fall back to per-process rlimits and CPU has no quota. A host
// the backend cannot use at all is unavailable (Admit says why), not weak.
func (h *Host[F]) weak() map[string]string {
	if h.Cgroups != nil || h.Err != nil {
		return nil
	}
	return map[string]string{
		"memory": "per process only (RLIMIT_AS)",
		"pids":   "per user namespace (RLIMIT_NPROC), not per sandbox",
		"cpus":   "not enforced",
	}
}

// weakWhy says why the limits weak names are weak.
func (h *Host[F]) weakWhy() string {
	if h.Cgroups != nil || h.Err != nil {
		return ""
	}
	return "no usable cgroup (" + h.CgroupInfo + ")"
}

// Admit checks spec against the host before a sandbox is made: it
// returns the host and spec with the default limits applied.
func (b *Backend[F]) Admit(spec sandbox.Spec) (*Host[F], sandbox.Spec, error) {
	if err := spec.Validate(); err != nil {
		return nil, spec, err
	}
	h := b.Host()
	if h.Err != nil {
		return nil, spec, sandbox.Errorf(sandbox.ErrUnavailable, b.opts.Name+"_unavailable", "%s backend: %w", b.opts.Name, h.Err)
	}
	spec.Limits = spec.Limits.WithDefaults(b.defaults)
	return h, spec, nil
}

// Reconcile removes what a crashed execbox left: cgroups of dead
// processes (and with them their processes), and work dirs (with their
// mounts) of processes that are gone. It runs by itself on first use;
// calling it again is safe at any time.
func (b *Backend[F]) Reconcile(ctx context.Context) ([]string, error) {
	h := b.Host()
	var removed []string
	var errs []error
	if h.Cgroups != nil {
		r, err := h.Cgroups.Reconcile()
		removed = append(removed, r...)
		errs = append(errs, err)
		if b.opts.ReconcileMore != nil {
			b.opts.ReconcileMore(h)
		}
	}
	r, err := workdir.Reconcile(b.root)
	removed = append(removed, r...)
	errs = append(errs, err)
	return removed, errors.Join(errs...)
}

// Close removes this process's directory under the work root, and the
// backend's directory when nothing else is left in it; new sandboxes are
// refused from then on. The engine calls it at shutdown, after every
// sandbox is closed.
func (b *Backend[F]) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	h := &Host[F]{}
	if b.host != nil {
		h = b.host
	}
	// Open sandboxes keep the old value; new ones are refused.
	closed := *h
	closed.Err = errors.New("the backend is closed")
	b.host = &closed
	d := workdir.Base{Root: b.root, Path: h.Base}
	if b.opts.CloseEmpty {
		if err := d.CloseEmpty(); err != nil {
			return fmt.Errorf("removing the %s backend's work dir (a sandbox is still open?): %w", b.opts.Name, err)
		}
		return nil
	}
	if err := d.Close(); err != nil {
		return fmt.Errorf("removing the %s work dir: %w", b.opts.Name, err)
	}
	return nil
}

// Host is what a backend found out about this host. It does not change
// once probed (a new probe makes a new Host).
type Host[F any] struct {
	// Own are the backend's own facts.
	Own F
	// Cgroups makes the sandboxes' cgroups; nil when none are usable.
	Cgroups *cgroups.Manager
	// CgroupInfo is the cgroup version and why, or why there is none.
	CgroupInfo string
	// Mechanisms say what enforces each cgroup limit (cgroups.Manager).
	Mechanisms map[string]string
	// Base is this process's directory under the work root.
	Base string
	// Devices is the directory of the device nodes a sandbox's /dev binds
	// (OpenDevices); "" when the backend binds none of its own.
	Devices string
	// UID and GID are the program's ids on the host (UID and GID unless
	// rootless).
	UID, GID int
	// Err says why the backend cannot work here; nil when it can.
	Err error
	// Limits say how each limit is enforced.
	Limits map[string]string

	root     string
	rootless bool
	at       time.Time
}

// Rootless reports whether execbox runs unprivileged: it cannot mount on
// the host then, and the work dir has no size limit of its own.
func (h *Host[F]) Rootless() bool { return h.rootless }

// CgroupVersion names the cgroups limits go through, in a few words
// ("cgroup v1", "no cgroups"); CgroupInfo says why, at length.
func (h *Host[F]) CgroupVersion() string {
	if h.Cgroups == nil {
		return "no cgroups"
	}
	return "cgroup " + h.Cgroups.Version()
}

// OpenCgroups finds the host's cgroups and removes what dead execbox
// processes left in them.
func (h *Host[F]) OpenCgroups() {
	m, err := cgroups.Open()
	if err != nil {
		h.CgroupInfo = "cgroups unusable: " + err.Error()
		return
	}
	h.CgroupInfo = m.Version() + ": " + m.Reason()
	h.Mechanisms = m.Mechanisms()
	if m.Version() == cgroups.None {
		return
	}
	h.Cgroups = m
	if _, err := m.Reconcile(); err != nil {
		h.CgroupInfo += " (reconciling: " + err.Error() + ")"
	}
}

// OpenBase removes what dead execbox processes left under the work root
// and makes this process's own directory there.
func (h *Host[F]) OpenBase() error {
	d, err := workdir.OpenBase(h.root)
	if err != nil {
		return err
	}
	h.Base = d.Path
	return nil
}

// WorkRoot is the backend's directory under the work root.
func (h *Host[F]) WorkRoot() string { return h.root }

// OpenDevices makes Base/dev: a small tmpfs, read-only once made (and
// nosuid, noexec), holding a read-only bind of each host node that
// hostview.Devices names, which a sandbox's /dev binds instead of the
// host's /dev. A host's node may come to belong to a sandbox's user (runsc
// chowns the stdio files it is handed, /dev/null among them), and a
// sandbox must never hold a host inode it could then chmod: through a
// read-only mount chmod, chown and utimes fail with EROFS, and a user
// namespace cannot make a mount it inherited writable again. Binds, not
// nodes of execbox's own: mknod needs CAP_MKNOD, which a hardened unit
// (PrivateDevices=yes) does not have. Root only. The directory goes with
// the base: Close and Reconcile unmount what is under it.
func (h *Host[F]) OpenDevices() error {
	dir := filepath.Join(h.Base, "dev")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("making the sandboxes' device nodes: %w", err)
	}
	const flags = unix.MS_NOSUID | unix.MS_NOEXEC
	if err := unix.Mount("tmpfs", dir, "tmpfs", flags, "mode=0755,size=16k,nr_inodes=16"); err != nil {
		return fmt.Errorf("mounting the sandboxes' device nodes: %w", err)
	}
	for _, d := range hostview.Devices {
		host := "/dev/" + d
		var st unix.Stat_t
		if err := unix.Stat(host, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR {
			return fmt.Errorf("the host's %s is not a character device (%v)", host, err)
		}
		p := filepath.Join(dir, d)
		// Made with no descriptor open for writing: a child this process
		// forks meanwhile holds a copy until it execs, and the read-only
		// remount below fails (EBUSY) while one is open.
		fd, err := unix.Open(p, unix.O_CREAT|unix.O_EXCL|unix.O_RDONLY|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return fmt.Errorf("making the sandboxes' /dev/%s: %w", d, err)
		}
		unix.Close(fd)
		if err := unix.Mount(host, p, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("binding the sandboxes' /dev/%s: %w", d, err)
		}
		if err := unix.Mount("", p, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|flags, ""); err != nil {
			return fmt.Errorf("making the sandboxes' /dev/%s read-only: %w", d, err)
		}
	}
	if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_RDONLY|flags, ""); err != nil {
		return fmt.Errorf("making the sandboxes' device nodes read-only: %w", err)
	}
	h.Devices = dir
	return nil
}

// Interface guards.
var (
	_ sandbox.Closer     = (*Backend[struct{}])(nil)
	_ sandbox.Reconciler = (*Backend[struct{}])(nil)
)
