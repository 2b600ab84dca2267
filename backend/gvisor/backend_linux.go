package gvisor

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

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/execbox/execbox/internal/cgroups"
	"github.com/execbox/execbox/internal/workdir"
	"github.com/execbox/execbox/sandbox"
)

// The program's ids inside the sandbox; files it writes to the work dir
// belong to the same, unprivileged, ids on the host.
const (
	sandboxUID = 65534
	sandboxGID = 65534
)

// hostEnv holds what the backend found out about the host when it probed.
type hostEnv struct {
	runsc    *runsc
	cg       *cgroups.Manager // nil: no usable cgroups
	cgInfo   string
	mech     map[string]string
	hier     []string // cgroup v1 hierarchies (runsc makes leaves in those we do not use)
	seccomp  *specs.LinuxSeccomp
	rules    int    // syscall names the seccomp policy lists
	base     string // this process's directory under the work root
	err      error  // the backend cannot work here
	limits   map[string]string
	platform string    // for Health
	at       time.Time // when it was probed
}

// hostEnv probes the host on first use. Without a working runsc nothing
// was set up yet, and the probe is repeated after healthTTL, so a runsc
// installed later is picked up without a restart.
func (b *Backend) hostEnv() *hostEnv {
	b.envMu.Lock()
	defer b.envMu.Unlock()
	if b.env == nil || (b.env.runsc == nil && !b.closed && time.Since(b.env.at) >= healthTTL) {
		b.env = b.probeEnv()
	}
	return b.env
}

func (b *Backend) probeEnv() *hostEnv {
	e := &hostEnv{at: time.Now()}
	defer func() { e.limits = e.enforcement() }()
	if os.Geteuid() != 0 {
		e.err = fmt.Errorf("the gvisor backend runs runsc as root (euid is %d); rootless runsc has no cgroup limits", os.Geteuid())
		return e
	}
	r, err := findRunsc(b.cfg.Runsc)
	if err != nil {
		e.err = err
		return e
	}
	e.runsc = r
	e.platform = r.platform + " (offered: " + strings.Join(r.offered, ", ") + "; kvm is never chosen on its own)"
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
	if e.cg != nil && e.cg.Version() == cgroups.V1 {
		e.hier = v1Hierarchies()
		reconcileExtra(e.hier)
	}
	if e.seccomp, e.rules, err = seccompPolicy(); err != nil {
		e.err = err
		return e
	}
	e.err = b.prepareWorkRoot(e)
	return e
}

// prepareWorkRoot removes what dead execbox processes left under the work
// root and makes this process's own directory there.
func (b *Backend) prepareWorkRoot(e *hostEnv) error {
	d, err := workdir.OpenBase(b.workRoot)
	if err != nil {
		return err
	}
	e.base = d.Path
	return nil
}

// Reconcile removes what a crashed execbox left: cgroups (and with them
// the runsc processes inside) and directories of dead processes. It runs
// by itself on first use; calling it again is safe at any time.
func (b *Backend) Reconcile(ctx context.Context) ([]string, error) {
	e := b.hostEnv()
	var removed []string
	var errs []error
	if e.cg != nil {
		r, err := e.cg.Reconcile()
		removed = append(removed, r...)
		errs = append(errs, err)
		reconcileExtra(e.hier)
	}
	r, err := workdir.Reconcile(b.workRoot)
	removed = append(removed, r...)
	errs = append(errs, err)
	return removed, errors.Join(errs...)
}

// Close removes this process's directory under the work root once every
// sandbox is closed (one still holding a sandbox is left for the next
// start's reconciling), and the backend's directory when nothing else is
// left in it. The engine calls it when it shuts down; the backend is not
// used afterwards.
func (b *Backend) Close() error {
	b.envMu.Lock()
	defer b.envMu.Unlock()
	b.closed = true
	e := &hostEnv{}
	if b.env != nil {
		e = b.env
	}
	// Open sandboxes keep the old value; new ones are refused.
	closed := *e
	closed.err = errors.New("the backend is closed")
	b.env = &closed
	d := workdir.Base{Root: b.workRoot, Path: e.base}
	if err := d.CloseEmpty(); err != nil {
		return fmt.Errorf("removing the gvisor backend's work dir (a sandbox is still open?): %w", err)
	}
	return nil
}

// enforcement says how each limit is enforced on this host.
func (e *hostEnv) enforcement() map[string]string {
	m := map[string]string{
		"wall":      "execbox timer (runsc kill --all, then the sandbox's cgroup is killed)",
		"output":    "execbox capture",
		"cpu_time":  "not enforced (no usable cgroups; the RLIMIT_CPU rlimit is set, but not every runsc release enforces it)",
		"nofile":    "rlimit RLIMIT_NOFILE (hard), enforced by gVisor's sentry",
		"file_size": "rlimit RLIMIT_FSIZE, enforced by gVisor's sentry",
		"tmp_size":  "gVisor tmpfs size, each of /tmp and /dev/shm (kept in the sentry's memory, so also under the memory limit)",
		"work_size": "host tmpfs size (mounted on the work dir, served to the sandbox by runsc's gofer)",
		"network":   "gVisor netstack, runsc --network=none (loopback only, no host interface)",
		"seccomp":   fmt.Sprintf("execbox's policy (%d syscall names, Docker's default without capabilities) enforced by the sentry (--oci-seccomp); the sentry and gofer run under gVisor's own host seccomp filters", e.rules),
		"landlock":  "not applicable: the program never reaches the host kernel; runsc's gofer serves only the mounted paths",
		"isolation": "gVisor user-space kernel (runsc " + e.versionOr("?") + ", platform " + e.platformName() + ")",
	}
	why := e.cgInfo
	if e.cg == nil {
		m["memory"] = "rlimit RLIMIT_AS per process, enforced by the sentry (no usable cgroups: " + why + ")"
		m["pids"] = "rlimit RLIMIT_NPROC, enforced by the sentry (no usable cgroups: " + why + ")"
		m["cpus"] = "not enforced (no usable cgroups: " + why + ")"
		return m
	}
	m["memory"] = e.mech["memory"] + " on the whole sandbox (sentry, gofer and the program's memory; the sentry sizes its memory to the limit); an overrun OOM-kills the sandbox"
	m["pids"] = "rlimit RLIMIT_NPROC (per sandbox), enforced by the sentry; host backstop " + e.mech["pids"] + " = " + pidsBackstopFormula + " on the sandbox's host tasks"
	m["cpus"] = e.mech["cpu"] + " on the whole sandbox (sentry and gofer included)"
	m["cpu_time"] = fmt.Sprintf("execbox watcher on the sandbox cgroup's CPU usage (sentry, gofer and program together, checked every %v; kills at the limit); the RLIMIT_CPU rlimit is set too, but not every runsc release enforces it", cpuPoll)
	return m
}

// pidsBackstop is the host pids limit of a sandbox: the sentry, the gofer
// and (on ptrace) a stub process with a few threads per program process
// are host tasks, so it is well above the program's own limit, which the
// sentry enforces exactly.
func pidsBackstop(pids int) int { return 16*pids + 256 }

const pidsBackstopFormula = "16 × limit + 256"

func (e *hostEnv) versionOr(def string) string {
	if e.runsc == nil {
		return def
	}
	return e.runsc.version
}

func (e *hostEnv) platformName() string {
	if e.runsc == nil {
		return "?"
	}
	return e.runsc.platform
}

// Capabilities describe the gvisor backend on this host.
func (b *Backend) Capabilities() sandbox.Capabilities {
	e := b.hostEnv()
	return sandbox.Capabilities{
		Isolation: sandbox.IsolationKernel,
		Sessions:  true,
		Networks:  []sandbox.Network{sandbox.NetworkNone, sandbox.NetworkHost},
		Limits:    maps.Clone(e.limits),
	}
}

// Health starts /bin/true in a gVisor sandbox and caches what happened for
// healthTTL.
func (b *Backend) Health(ctx context.Context) sandbox.Health {
	b.healthMu.Lock()
	defer b.healthMu.Unlock()
	if h := b.health; h != nil && time.Since(h.CheckedAt) < healthTTL {
		out := *h
		out.Details = maps.Clone(h.Details)
		return out
	}
	e := b.hostEnv()
	h := sandbox.Health{CheckedAt: time.Now(), Details: map[string]string{
		"runsc":    b.cfg.Runsc,
		"cgroups":  e.cgInfo,
		"seccomp":  strconv.Itoa(e.rules) + " syscall names, enforced by the sentry",
		"platform": e.platform,
	}}
	if e.runsc != nil {
		h.Details["runsc"] = e.runsc.path + " (version " + e.runsc.version + ")"
	}
	if e.err != nil {
		h.Reason = "gvisor unavailable: " + e.err.Error()
		b.health = &h
		return h
	}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	start := time.Now()
	res, err := sandbox.Run(pctx, b, sandbox.Spec{Limits: sandbox.Limits{Wall: 20 * time.Second}}, &sandbox.Process{Args: []string{"/bin/true"}})
	switch {
	case err != nil:
		h.Reason = "probe failed: " + err.Error()
	case !res.Succeeded():
		detail := res.Message
		if detail == "" {
			detail = strings.TrimSpace(res.Stderr)
		}
		h.Reason = fmt.Sprintf("probe /bin/true under runsc (platform %s) ended %s (exit %d): %s",
			e.runsc.platform, res.Reason, res.ExitCode, detail)
	default:
		h.Available, h.Ready = true, true
		h.Reason = fmt.Sprintf("runsc %s, platform %s; started /bin/true in %v; limits: %s",
			e.runsc.version, e.runsc.platform, time.Since(start).Round(time.Millisecond), e.cgInfo)
	}
	if ctx.Err() == nil {
		b.health = &h
	}
	out := h
	out.Details = maps.Clone(h.Details)
	return out
}

// Create checks spec against the host and makes the sandbox's directory,
// cgroup, work dir (a size-limited tmpfs) and root skeleton.
func (b *Backend) Create(ctx context.Context, spec sandbox.Spec) (sb sandbox.Sandbox, err error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	e := b.hostEnv()
	if e.err != nil {
		return nil, sandbox.Errorf(sandbox.ErrUnavailable, "gvisor_unavailable", "gvisor backend: %w", e.err)
	}
	spec.Limits = spec.Limits.WithDefaults(b.defaults)
	view, err := b.view(spec)
	if err != nil {
		return nil, err
	}
	s := &Sandbox{id: sandbox.NewID(), b: b, env: e, spec: spec, view: view}
	s.cid = "execbox-" + s.id
	s.enforcement = maps.Clone(e.limits)
	if spec.Policy.Network == sandbox.NetworkHost {
		s.enforcement["network"] = "host network through the sentry (runsc --network=host, policy network=host)"
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
	s.dir = filepath.Join(e.base, s.id)
	if err := os.Mkdir(s.dir, 0o711); err != nil {
		return nil, sandbox.Errorf(sandbox.ErrInternal, "workdir_failed", "creating sandbox dir: %w", err)
	}
	undo = append(undo, func() { os.RemoveAll(s.dir) })
	s.paths = dirs{bundle: s.dir, state: filepath.Join(s.dir, "state"), logs: filepath.Join(s.dir, "log")}
	for _, d := range []string{s.paths.state, s.paths.logs} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, sandbox.Errorf(sandbox.ErrInternal, "workdir_failed", "creating %s: %w", d, err)
		}
	}
	if err := buildRoot(filepath.Join(s.dir, "rootfs"), view); err != nil {
		return nil, sandbox.Errorf(sandbox.ErrInternal, "rootfs_failed", "building the sandbox root: %w", err)
	}
	if e.cg != nil {
		cg, err := e.cg.Create(s.id, cgroups.Limits{Memory: spec.Limits.Memory, Pids: pidsBackstop(spec.Limits.Pids), CPUs: spec.Limits.CPUs})
		if err != nil {
			return nil, sandbox.Errorf(sandbox.ErrInternal, "cgroup_failed", "creating cgroup: %w", err)
		}
		s.cg = cg
		undo = append(undo, func() { cg.Close(); removeExtra(e.hier, cg.Name()) })
	}
	if err := s.makeWorkDir(); err != nil {
		return nil, err
	}
	undo = append(undo, s.removeWorkDir)
	return s, nil
}

// unescapeMount is workdir's, for reading mountinfo in this package.
func unescapeMount(s string) string { return workdir.UnescapeMount(s) }
