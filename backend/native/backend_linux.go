package native

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/execbox/execbox/internal/workdir"
	"github.com/execbox/execbox/internal/cgroups"
	"github.com/execbox/execbox/internal/landlock"
	"github.com/execbox/execbox/internal/seccomp"
	"github.com/execbox/execbox/sandbox"
)

// The program's ids inside the sandbox; as root they are also its ids on
// the host (an unprivileged host user, so host permissions apply to it).
const (
	sandboxUID = 65534
	sandboxGID = 65534
)

// initThreads is what the pids limit adds for the init: PID 1 is in the
// cgroup too, and each of its (Go runtime) threads counts as a task.
const initThreads = 8

// hostEnv holds what the backend found out about the host, once.
type hostEnv struct {
	rootless bool
	hostUID  int // the program's uid and gid on the host
	hostGID  int
	cg       *cgroups.Manager // nil: no usable cgroups
	cgInfo   string           // version and reason, for Health
	mech     map[string]string
	filter   []byte // seccomp program; nil when unavailable
	filterN  int
	llABI    int
	initPath string // "" = re-exec this binary
	base     string // this process's directory under the work root
	rootDir  string // where inits mount their new root (in their own namespace)
	err      error  // the backend cannot work here
	limits   map[string]string
}

// hostEnv probes the host the first time it is needed: cgroups (and
// reconciling what a crashed execbox left), seccomp, Landlock, the init.
func (b *Backend) hostEnv() *hostEnv {
	b.envOnce.Do(func() { b.env = b.probeEnv() })
	return b.env
}

func (b *Backend) probeEnv() *hostEnv {
	e := &hostEnv{rootless: os.Geteuid() != 0, hostUID: sandboxUID, hostGID: sandboxGID}
	if e.rootless {
		e.hostUID, e.hostGID = os.Getuid(), os.Getgid()
	}
	if m, err := cgroups.Open(); err != nil {
		e.cgInfo = "cgroups unusable: " + err.Error()
	} else {
		e.cgInfo = m.Version() + ": " + m.Reason()
		e.mech = m.Mechanisms()
		if m.Version() != cgroups.None {
			e.cg = m
			if _, err := m.Reconcile(); err != nil {
				e.cgInfo += " (reconciling: " + err.Error() + ")"
			}
		}
	}
	if f, err := seccomp.Bytes(); err != nil {
		e.err = fmt.Errorf("building the seccomp filter: %w", err)
	} else {
		e.filter, e.filterN = f, len(f)/8
	}
	e.llABI = landlock.ABI()
	e.initPath, e.err = b.findInit(e.err)
	if e.err == nil {
		e.err = b.prepareWorkRoot(e)
	}
	e.limits = e.enforcement()
	return e
}

// findInit picks the init binary: configured, next to the executable, or
// none (re-exec).
func (b *Backend) findInit(prev error) (string, error) {
	switch p := b.cfg.InitPath; p {
	case "reexec":
		return "", prev
	case "":
		exe, err := os.Executable()
		if err != nil {
			return "", prev
		}
		cand := filepath.Join(filepath.Dir(exe), "execbox-init")
		if isExecutable(cand) {
			return cand, prev
		}
		return "", prev
	default:
		if !isExecutable(p) {
			return "", errors.Join(prev, fmt.Errorf("native.init_path %s is not an executable file", p))
		}
		return p, prev
	}
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
}

// prepareWorkRoot removes what dead execbox processes left under the work
// root and makes this process's own directory there.
func (b *Backend) prepareWorkRoot(e *hostEnv) error {
	d, err := workdir.OpenBase(b.workRoot)
	if err != nil {
		return err
	}
	e.base = d.Path
	e.rootDir = filepath.Join(e.base, ".root")
	if err := os.Mkdir(e.rootDir, 0o700); err != nil {
		return fmt.Errorf("creating root mount point: %w", err)
	}
	return nil
}

// Reconcile removes what a crashed execbox left: cgroups of dead
// processes, and work dirs (with their mounts) of processes that are gone.
// It runs by itself on first use; calling it again is safe at any time.
func (b *Backend) Reconcile(ctx context.Context) ([]string, error) {
	e := b.hostEnv()
	var removed []string
	var errs []error
	if e.cg != nil {
		r, err := e.cg.Reconcile()
		removed = append(removed, r...)
		errs = append(errs, err)
	}
	r, err := workdir.Reconcile(b.workRoot)
	removed = append(removed, r...)
	errs = append(errs, err)
	return removed, errors.Join(errs...)
}

// enforcement says how each limit is enforced on this host.
func (e *hostEnv) enforcement() map[string]string {
	m := map[string]string{
		"wall":      "execbox timer (SIGKILL to the sandbox's PID-namespace init, then the cgroup)",
		"output":    "execbox capture",
		"cpu_time":  "rlimit RLIMIT_CPU",
		"nofile":    "rlimit RLIMIT_NOFILE (hard)",
		"file_size": "rlimit RLIMIT_FSIZE",
		"tmp_size":  "tmpfs size (/tmp; /dev/shm points into it)",
		"work_size": "tmpfs size (a host tmpfs mounted on the work dir)",
		"network":   "empty network namespace (loopback only)",
		"seccomp":   "default-deny allowlist (" + strconv.Itoa(e.filterN) + " BPF instructions, Docker's default profile without capabilities)",
		"landlock":  "not enforced (landlock unavailable on this kernel)",
	}
	if e.llABI > 0 {
		m["landlock"] = fmt.Sprintf("landlock ABI %d: writes only to /tmp, /work and writable mounts", e.llABI)
	}
	if e.rootless {
		m["work_size"] = "not enforced (rootless: no host tmpfs; RLIMIT_FSIZE bounds each file)"
	}
	why := e.cgInfo
	for _, k := range []string{"memory", "pids", "cpus"} {
		key := k
		if k == "cpus" {
			key = "cpu"
		}
		if v, ok := e.mech[key]; ok && e.cg != nil {
			m[k] = v
			continue
		}
		switch k {
		case "memory":
			m[k] = "rlimit RLIMIT_AS per process (no cgroup memory controller: " + why + ")"
		case "pids":
			m[k] = "rlimit RLIMIT_NPROC in the sandbox's user namespace (no cgroup pids controller: " + why + ")"
		case "cpus":
			m[k] = "not enforced (no cgroup cpu controller: " + why + ")"
		}
	}
	if v, ok := m["pids"]; ok && e.cg != nil {
		m["pids"] = v + fmt.Sprintf(" (limit + %d for the init's threads)", initThreads)
	}
	return m
}

// Capabilities describe the native backend on this host.
func (b *Backend) Capabilities() sandbox.Capabilities {
	e := b.hostEnv()
	return sandbox.Capabilities{
		Isolation: sandbox.IsolationProcess,
		Sessions:  true,
		Networks:  []sandbox.Network{sandbox.NetworkNone, sandbox.NetworkHost},
		Limits:    maps.Clone(e.limits),
	}
}

// Health starts /bin/true in a sandbox once and caches what happened.
func (b *Backend) Health(ctx context.Context) sandbox.Health {
	b.healthMu.Lock()
	defer b.healthMu.Unlock()
	if b.health != nil {
		h := *b.health
		h.Details = maps.Clone(h.Details)
		return h
	}
	e := b.hostEnv()
	h := sandbox.Health{CheckedAt: time.Now(), Details: map[string]string{
		"cgroups":  e.cgInfo,
		"landlock": strconv.Itoa(e.llABI),
		"seccomp":  strconv.Itoa(e.filterN) + " instructions",
		"rootless": strconv.FormatBool(e.rootless),
		"init":     cmp(e.initPath, "re-exec of "+exeName()),
	}}
	if e.err != nil {
		h.Reason = e.err.Error()
		return h // not cached: the operator may fix it
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := sandbox.Run(pctx, b, sandbox.Spec{}, &sandbox.Process{Args: []string{"/bin/true"}})
	switch {
	case err != nil:
		h.Reason = "probe failed: " + err.Error()
	case !res.Succeeded():
		h.Reason = fmt.Sprintf("probe /bin/true ended %s (exit %d): %s %s", res.Reason, res.ExitCode, res.Message, res.Stderr)
	default:
		h.Available, h.Ready = true, true
		h.Reason = "namespaces, " + e.cgInfo
		if e.rootless {
			h.Reason += "; rootless: " + rootlessGaps(e)
		}
	}
	if ctx.Err() == nil {
		b.health = &h
	}
	out := h
	out.Details = maps.Clone(h.Details)
	return out
}

// rootlessGaps says what a rootless backend cannot enforce.
func rootlessGaps(e *hostEnv) string {
	var gaps []string
	if e.cg == nil {
		gaps = append(gaps, "no cgroups (memory via RLIMIT_AS, pids via RLIMIT_NPROC, no CPU quota)")
	}
	gaps = append(gaps, "the program runs as the invoking host user", "work dir size not enforced")
	return strings.Join(gaps, "; ")
}

func exeName() string {
	exe, err := os.Executable()
	if err != nil {
		return "/proc/self/exe"
	}
	return exe
}

func cmp(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Create validates spec against the host, makes the cgroup and the work
// dir (a size-limited tmpfs as root).
func (b *Backend) Create(ctx context.Context, spec sandbox.Spec) (sb sandbox.Sandbox, err error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	e := b.hostEnv()
	if e.err != nil {
		return nil, sandbox.Errorf(sandbox.ErrUnavailable, "native_unavailable", "native backend: %w", e.err)
	}
	spec.Limits = spec.Limits.WithDefaults(b.defaults)
	pl, err := b.plan(spec, e)
	if err != nil {
		return nil, err
	}
	s := &Sandbox{id: sandbox.NewID(), b: b, env: e, spec: spec, plan: pl}
	s.enforcement = maps.Clone(e.limits)
	if spec.Policy.Network == sandbox.NetworkHost {
		s.enforcement["network"] = "host network (policy network=host)"
	}
	var undo []func()
	defer func() {
		if err != nil {
			slices.Reverse(undo)
			for _, u := range undo {
				u()
			}
		}
	}()
	if e.cg != nil {
		cg, err := e.cg.Create(s.id, cgroups.Limits{Memory: spec.Limits.Memory, Pids: spec.Limits.Pids + initThreads, CPUs: spec.Limits.CPUs})
		if err != nil {
			return nil, sandbox.Errorf(sandbox.ErrInternal, "cgroup_failed", "creating cgroup: %w", err)
		}
		s.cg = cg
		undo = append(undo, func() { cg.Close() })
	}
	wd, err := workdir.New(e.base, e.hostUID, e.hostGID)
	if err != nil {
		return nil, sandbox.Errorf(sandbox.ErrInternal, "workdir_failed", "creating work dir: %w", err)
	}
	s.wd = wd
	undo = append(undo, func() { wd.Remove() })
	if !e.rootless {
		// The work dir's own size limit: a tmpfs only this sandbox writes.
		opts := fmt.Sprintf("size=%d,nr_inodes=%d,mode=0700,uid=%d,gid=%d",
			spec.Limits.WorkSize, inodesFor(spec.Limits.WorkSize), e.hostUID, e.hostGID)
		if err := unix.Mount("tmpfs", wd.Path, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
			return nil, sandbox.Errorf(sandbox.ErrInternal, "workdir_failed", "mounting the work dir tmpfs: %w", err)
		}
		s.mounted = true
		undo = append(undo, func() { unix.Unmount(wd.Path, unix.MNT_DETACH) })
	}
	return s, nil
}

// inodesFor bounds a tmpfs's inodes by its size: one per KiB, within
// [1024, 1<<20].
func inodesFor(size int64) int64 {
	return min(max(size/1024, 1024), 1<<20)
}

// Close removes this process's directory under the work root, and the
// backend's directory when nothing else is left in it. Every sandbox must
// be closed first (the engine closes backends at shutdown).
func (b *Backend) Close() error {
	d := workdir.Base{Root: b.workRoot}
	if b.env != nil {
		d.Path = b.env.base
	}
	if err := d.Close(); err != nil {
		return fmt.Errorf("removing the native work dir: %w", err)
	}
	return nil
}
