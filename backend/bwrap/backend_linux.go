package bwrap

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/execbox/execbox/internal/cgroups"
	"github.com/execbox/execbox/internal/seccomp"
	"github.com/execbox/execbox/internal/workdir"
	"github.com/execbox/execbox/sandbox"
)

// The program's ids, inside the sandbox and on the host alike: bwrap runs
// as this unprivileged host user, so its user namespace maps 65534 to
// 65534 and nothing else.
const (
	sandboxUID = 65534
	sandboxGID = 65534
)

// helperTasks is what the pids limit adds for bwrap's own processes: the
// monitor outside and the init's (Go runtime) threads inside.
const helperTasks = 10

// healthTTL is how long a Health probe is reused.
const healthTTL = time.Minute

// hostEnv holds what the backend found out about the host, once.
type hostEnv struct {
	bwrap   string // resolved path of the bwrap binary
	version string
	cg      *cgroups.Manager // nil: no usable cgroups
	cgInfo  string
	mech    map[string]string
	filter  []byte // seccomp program for --seccomp
	exe     *os.File
	base    string // this process's directory under the work root
	err     error  // the backend cannot work here
	at      time.Time
	limits  map[string]string
}

type cachedHealth struct {
	h     sandbox.Health
	until time.Time
}

// hostEnv probes the host the first time it is needed, and again after
// healthTTL while the last probe found the backend unusable (bwrap may be
// installed later).
func (b *Backend) hostEnv() *hostEnv {
	b.envMu.Lock()
	defer b.envMu.Unlock()
	if b.env == nil || (b.env.err != nil && time.Since(b.env.at) > healthTTL) {
		b.env = b.probeEnv()
	}
	return b.env
}

func (b *Backend) probeEnv() *hostEnv {
	e := &hostEnv{at: time.Now()}
	defer func() {
		e.limits = e.enforcement()
		if e.err != nil && e.exe != nil {
			e.exe.Close()
			e.exe = nil
		}
	}()
	if os.Geteuid() != 0 {
		e.err = errors.New("the bwrap backend runs as root: it starts bwrap as uid 65534 and mounts size-limited tmpfs for /tmp and the work dir (rootless execbox: use the native backend)")
		return e
	}
	p, err := exec.LookPath(b.cfg.Path)
	if err != nil {
		e.err = fmt.Errorf("bwrap.path %q: %w", b.cfg.Path, err)
		return e
	}
	e.bwrap = p
	if out, err := exec.Command(p, "--version").Output(); err == nil {
		e.version = strings.TrimSpace(string(out))
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
	if e.filter, err = seccomp.Bytes(); err != nil {
		e.err = fmt.Errorf("building the seccomp filter: %w", err)
		return e
	}
	exe, err := os.Executable()
	if err == nil {
		e.exe, err = os.Open(exe)
	}
	if err != nil {
		e.err = fmt.Errorf("opening this executable (the sandbox init): %w", err)
		return e
	}
	e.err = b.prepareWorkRoot(e)
	return e
}

// prepareWorkRoot makes the work root, removes what dead execbox
// processes left there and makes this process's own directory.
func (b *Backend) prepareWorkRoot(e *hostEnv) error {
	if err := os.MkdirAll(b.workRoot, 0o711); err != nil {
		return fmt.Errorf("creating work root: %w", err)
	}
	// bwrap runs as 65534 and opens the work dir, /tmp and the mounts by
	// path: every directory above them must let it through.
	if err := searchable(b.workRoot); err != nil {
		return err
	}
	d, err := workdir.OpenBase(b.workRoot)
	if err != nil {
		return err
	}
	e.base = d.Path
	return nil
}

// searchable checks that uid/gid 65534 may pass through dir and every
// directory above it.
func searchable(dir string) error {
	for d := dir; ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("checking the work root: %w", err)
		}
		sys := st.Sys().(*syscall.Stat_t)
		perm := st.Mode().Perm()
		var ok bool
		switch {
		case sys.Uid == sandboxUID:
			ok = perm&0o100 != 0
		case sys.Gid == sandboxGID:
			ok = perm&0o010 != 0
		default:
			ok = perm&0o001 != 0
		}
		if !ok {
			return fmt.Errorf("the work root %s is not reachable by uid %d, as which bwrap runs: %s has mode %04o", dir, sandboxUID, d, perm)
		}
		if d == "/" {
			return nil
		}
	}
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

// removeTree, unmountUnder and mountsUnder are workdir's, for the
// sandbox's teardown and the tests.
func removeTree(dir string) error              { return workdir.RemoveTree(dir) }
func unmountUnder(dir string) error            { return workdir.UnmountUnder(dir) }
func mountsUnder(dir string) ([]string, error) { return workdir.MountsUnder(dir) }

// enforcement says how each limit is enforced on this host.
func (e *hostEnv) enforcement() map[string]string {
	m := map[string]string{
		"wall":      "execbox timer (SIGKILL to the cgroup, bwrap and the sandbox's PID 1; bwrap --die-with-parent)",
		"output":    "execbox capture",
		"cpu_time":  "rlimit RLIMIT_CPU",
		"nofile":    "rlimit RLIMIT_NOFILE (hard)",
		"file_size": "rlimit RLIMIT_FSIZE",
		"tmp_size":  "tmpfs size (a host tmpfs per Exec, noexec unless tmp_exec, bound on /tmp; /dev/shm points into it)",
		"work_size": "tmpfs size (a host tmpfs mounted on the work dir)",
		"network":   "empty network namespace (bwrap --unshare-all, loopback only)",
		"seccomp":   "default-deny allowlist (" + strconv.Itoa(len(e.filter)/8) + " BPF instructions, Docker's default profile without capabilities) via bwrap --seccomp",
		"landlock":  "not enforced (bwrap has no Landlock; the root, its binds and /dev are read-only mounts)",
	}
	why := e.cgInfo
	for _, k := range []string{"memory", "pids", "cpus"} {
		key := k
		if k == "cpus" {
			key = "cpu"
		}
		if v, ok := e.mech[key]; ok && e.cg != nil {
			m[k] = v
			if k == "pids" {
				m[k] += fmt.Sprintf(" (limit + %d for bwrap and the init's threads)", helperTasks)
			}
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
	return m
}

// Capabilities describe the bwrap backend on this host.
func (b *Backend) Capabilities() sandbox.Capabilities {
	e := b.hostEnv()
	return sandbox.Capabilities{
		Isolation: sandbox.IsolationProcess,
		Sessions:  true,
		Networks:  []sandbox.Network{sandbox.NetworkNone, sandbox.NetworkHost},
		Limits:    maps.Clone(e.limits),
	}
}

// Health starts /bin/true in a sandbox and caches what happened for
// healthTTL: a bwrap that is installed but cannot make its namespaces is
// unavailable, with bwrap's own words as the reason.
func (b *Backend) Health(ctx context.Context) sandbox.Health {
	b.healthMu.Lock()
	defer b.healthMu.Unlock()
	if c := b.health; c != nil && time.Now().Before(c.until) {
		return copyHealth(c.h)
	}
	e := b.hostEnv()
	h := sandbox.Health{CheckedAt: time.Now(), Details: map[string]string{
		"bwrap":   e.bwrap,
		"version": e.version,
		"cgroups": e.cgInfo,
		"seccomp": strconv.Itoa(len(e.filter)/8) + " instructions",
	}}
	if e.err != nil {
		h.Reason = e.err.Error()
	} else {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		res, err := sandbox.Run(pctx, b, sandbox.Spec{}, &sandbox.Process{Args: []string{"/bin/true"}})
		cancel()
		switch {
		case err != nil:
			h.Reason = "probe failed: " + err.Error()
		case res.Reason == sandbox.ReasonSandboxError:
			h.Reason = "probe /bin/true: " + res.Message // bwrap's complaint included
		case !res.Succeeded():
			h.Reason = strings.TrimSpace(fmt.Sprintf("probe /bin/true ended %s (exit %d): %s %s", res.Reason, res.ExitCode, res.Message, res.Stderr))
		default:
			h.Available, h.Ready = true, true
			h.Reason = e.version + " as uid 65534 in its own namespaces, " + e.cgInfo
		}
	}
	if ctx.Err() == nil {
		b.health = &cachedHealth{h: h, until: time.Now().Add(healthTTL)}
	}
	return copyHealth(h)
}

func copyHealth(h sandbox.Health) sandbox.Health {
	h.Details = maps.Clone(h.Details)
	return h
}

// Close removes this process's directory under the work root, and the
// backend's directory when nothing else is left in it. Every sandbox must
// be closed first (the engine closes backends at shutdown).
func (b *Backend) Close() error {
	b.envMu.Lock()
	e := b.env
	b.envMu.Unlock()
	d := workdir.Base{Root: b.workRoot}
	if e != nil {
		d.Path = e.base
	}
	if err := d.Close(); err != nil {
		return fmt.Errorf("removing the bwrap work dir: %w", err)
	}
	return nil
}
