package bwrap

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/execbox/execbox/backend/internal/hostbase"
	"github.com/execbox/execbox/internal/host/binfacts"
	"github.com/execbox/execbox/internal/host/cleanup"
	"github.com/execbox/execbox/internal/host/seccomp"
	"github.com/execbox/execbox/sandbox"
)

// helperTasks is what the sandbox's cgroup holds beyond the program's pids
// leaf for bwrap's own processes: the monitor outside and the init's (Go
// runtime) threads inside. The program's own leaf holds exactly its limit
// (hostbase.Options.ProgramLeaf).
const helperTasks = 10

// healthTTL is how long a Health answer is reused, and how long an
// unusable host waits before it is probed again (bwrap may be installed
// later).
const healthTTL = time.Minute

// Backend runs sandboxes with bubblewrap under execbox's cgroups and
// seccomp policy. It is safe for concurrent use.
type Backend struct {
	*hostbase.Backend[facts]
	cfg          Config
	versionCache string // where `bwrap --version` is kept (binfacts); "" keeps nothing
}

// facts are what the bwrap backend finds out about the host besides
// hostbase's.
type facts struct {
	bwrap   string // resolved path of the bwrap binary
	version string
	filter  []byte   // seccomp program for --seccomp
	exe     *os.File // this executable, run by bwrap as the sandbox's PID 1
}

type host = hostbase.Host[facts]

func build(cfg Config, s sandbox.Settings) (sandbox.Backend, error) {
	b := &Backend{cfg: cfg}
	if s.StateDir != "" {
		b.versionCache = filepath.Join(s.StateDir, "bwrap-version.json")
	}
	b.Backend = hostbase.NewBackend(b, s, hostbase.Options[facts]{
		Name:        Name,
		Isolation:   sandbox.IsolationProcess,
		TTL:         healthTTL,
		SandboxDir:  true,
		CgroupPids:  func(pids int) int { return pids + helperTasks },
		ProgramLeaf: true,
		// An image's skeleton is an overlay mounted on the host: root only.
		RootImages:  os.Geteuid() == 0,
		HostNetwork: "host network (policy network=host, bwrap --share-net)",
		Probe:       b.probe,
		Enforcement: enforcement,
		HealthDetails: func(h *host) map[string]string {
			return map[string]string{
				"bwrap":   h.Own.bwrap,
				"version": h.Own.version,
				"cgroups": h.CgroupInfo,
				"seccomp": strconv.Itoa(len(h.Own.filter)/8) + " instructions",
			}
		},
		Ready: func(h *host, _ time.Duration) string {
			return h.Own.version + " as uid 65534 in its own namespaces, " + h.CgroupVersion()
		},
		ProbeFailed: func(_ *host, res *sandbox.Result) string {
			if res.Reason == sandbox.ReasonSandboxError {
				return "probe /bin/true: " + res.Message // bwrap's complaint included
			}
			return strings.TrimSpace(fmt.Sprintf("probe /bin/true ended %s (exit %d): %s %s", res.Reason, res.ExitCode, res.Message, res.Stderr))
		},
	})
	return b, nil
}

// probe finds bwrap, cgroups (reconciling what a crashed execbox left),
// the seccomp filter and this executable, and makes this process's base
// dir, which uid 65534 must be able to reach.
func (b *Backend) probe(h *host) error {
	if h.Rootless() {
		return errors.New("the bwrap backend runs as root: it starts bwrap as uid 65534 and mounts size-limited tmpfs for /tmp and the work dir (rootless execbox: use the native backend)")
	}
	var err error
	if h.Own.bwrap, err = exec.LookPath(b.cfg.Path); err != nil {
		return fmt.Errorf("bwrap.path %q: %w", b.cfg.Path, err)
	}
	if v, err := binfacts.Output(b.versionCache, h.Own.bwrap, "--version"); err == nil {
		h.Own.version = v
	}
	h.OpenCgroups()
	if h.Own.filter, err = seccomp.Bytes(); err != nil {
		return fmt.Errorf("building the seccomp filter: %w", err)
	}
	exe, err := os.Executable()
	if err == nil {
		h.Own.exe, err = os.Open(exe)
	}
	if err != nil {
		return fmt.Errorf("opening this executable (the sandbox init): %w", err)
	}
	cu := cleanup.Make(func() {
		h.Own.exe.Close()
		h.Own.exe = nil
	})
	defer cu.Clean()
	if err := os.MkdirAll(h.WorkRoot(), 0o711); err != nil {
		return fmt.Errorf("creating work root: %w", err)
	}
	// bwrap runs as 65534 and opens the work dir, /tmp and the mounts by
	// path: every directory above them must let it through.
	if err := searchable(h.WorkRoot()); err != nil {
		return err
	}
	if err := h.OpenBase(); err != nil {
		return err
	}
	if err := h.OpenDevices(); err != nil {
		return err
	}
	cu.Release()
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
		case sys.Uid == hostbase.UID:
			ok = perm&0o100 != 0
		case sys.Gid == hostbase.GID:
			ok = perm&0o010 != 0
		default:
			ok = perm&0o001 != 0
		}
		if !ok {
			return fmt.Errorf("the work root %s is not reachable by uid %d, as which bwrap runs: %s has mode %04o", dir, hostbase.UID, d, perm)
		}
		if d == "/" {
			return nil
		}
	}
}

// enforcement says how each limit is enforced on this host.
func enforcement(h *host) map[string]string {
	m := h.Enforcement(helperTasks, "bwrap and the init's threads")
	if v := h.ProgramLeafPids(helperTasks, "bwrap and the init's threads"); v != "" {
		m["pids"] = v
	}
	m["wall"] = "execbox timer (SIGKILL to the cgroup, bwrap and the sandbox's PID 1; bwrap --die-with-parent)"
	m["tmp_size"] = "tmpfs size (a host tmpfs per Exec, noexec unless tmp_exec, bound on /tmp; /dev/shm points into it)"
	m["network"] = "empty network namespace (bwrap --unshare-all, loopback only)"
	m["seccomp"] = "default-deny allowlist (" + strconv.Itoa(len(h.Own.filter)/8) + " BPF instructions, Docker's default profile without capabilities) via bwrap --seccomp"
	m["landlock"] = "not enforced (bwrap has no Landlock; the root, its binds and /dev are read-only mounts)"
	return m
}
