package native

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/execbox/execbox/backend/internal/hostbase"
	"github.com/execbox/execbox/internal/host/landlock"
	"github.com/execbox/execbox/internal/host/seccomp"
	"github.com/execbox/execbox/sandbox"
)

// initThreads is what the sandbox's cgroup holds beyond the program's
// pids leaf for the init: PID 1 is in the cgroup too, and each of its (Go
// runtime) threads counts as a task. The program's own leaf holds exactly
// its limit (hostbase.Options.ProgramLeaf). Without cgroups it is what
// RLIMIT_NPROC adds, as the init and the program share a user namespace.
const initThreads = 8

// Backend runs sandboxes in fresh Linux namespaces with cgroup limits,
// seccomp and Landlock. It is safe for concurrent use.
type Backend struct {
	*hostbase.Backend[facts]
	cfg Config
}

// facts are what the native backend finds out about the host besides
// hostbase's.
type facts struct {
	filter   []byte // seccomp program; nil when unavailable
	llABI    int
	initPath string // "" = re-exec this binary
	rootDir  string // where inits mount their new root (in their own namespace)
}

func build(cfg Config, s sandbox.Settings) (sandbox.Backend, error) {
	b := &Backend{cfg: cfg}
	b.Backend = hostbase.NewBackend(b, s, hostbase.Options[facts]{
		Name:        Name,
		Isolation:   sandbox.IsolationProcess,
		TTL:         0, // probed once: nothing of this host changes under a running execbox
		CgroupPids:  func(pids int) int { return pids + initThreads },
		ProgramLeaf: true,
		// Rootless, the init could mount the overlay in its user namespace
		// too, but no test shows it yet: images are root's for now.
		RootImages:    os.Geteuid() == 0,
		HostNetwork:   "host network (policy network=host)",
		Probe:         b.probe,
		Enforcement:   enforcement,
		HealthDetails: healthDetails,
		Ready:         ready,
	})
	return b, nil
}

type host = hostbase.Host[facts]

// probe looks at cgroups (reconciling what a crashed execbox left),
// seccomp, Landlock and the init, and makes this process's base dir.
func (b *Backend) probe(h *host) error {
	if h.Rootless() {
		// One id can be mapped: 65534 inside is the invoking user outside.
		h.UID, h.GID = os.Getuid(), os.Getgid()
	}
	h.OpenCgroups()
	var err error
	if h.Own.filter, err = seccomp.Bytes(); err != nil {
		err = fmt.Errorf("building the seccomp filter: %w", err)
	}
	h.Own.llABI = landlock.ABI()
	if h.Own.initPath, err = b.findInit(err); err != nil {
		return err
	}
	if err := h.OpenBase(); err != nil {
		return err
	}
	h.Own.rootDir = filepath.Join(h.Base, ".root")
	if err := os.Mkdir(h.Own.rootDir, 0o700); err != nil {
		return fmt.Errorf("creating root mount point: %w", err)
	}
	return nil
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
		if cand := filepath.Join(filepath.Dir(exe), "execbox-init"); isExecutable(cand) {
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

// enforcement says how each limit is enforced on this host.
func enforcement(h *host) map[string]string {
	m := h.Enforcement(initThreads, "the init's threads")
	if v := h.ProgramLeafPids(initThreads, "the init's threads"); v != "" {
		m["pids"] = v
	}
	m["wall"] = "execbox timer (SIGKILL to the sandbox's PID-namespace init, then the cgroup)"
	m["tmp_size"] = "tmpfs size (/tmp; /dev/shm points into it)"
	m["network"] = "empty network namespace (loopback only)"
	m["seccomp"] = "default-deny allowlist (" + strconv.Itoa(len(h.Own.filter)/8) + " BPF instructions, Docker's default profile without capabilities)"
	m["landlock"] = "not enforced (landlock unavailable on this kernel)"
	if h.Own.llABI > 0 {
		m["landlock"] = fmt.Sprintf("landlock ABI %d: writes only to /tmp, /work and writable mounts", h.Own.llABI)
	}
	if h.Rootless() {
		m["work_size"] = "not enforced (rootless: no host tmpfs; RLIMIT_FSIZE bounds each file)"
	}
	return m
}

func healthDetails(h *host) map[string]string {
	return map[string]string{
		"cgroups":  h.CgroupInfo,
		"landlock": strconv.Itoa(h.Own.llABI),
		"seccomp":  strconv.Itoa(len(h.Own.filter)/8) + " instructions",
		"rootless": strconv.FormatBool(h.Rootless()),
		"init":     cmp.Or(h.Own.initPath, "re-exec of "+exeName()),
	}
}

func ready(h *host, _ time.Duration) string {
	r := "namespaces, " + h.CgroupVersion()
	if h.Rootless() {
		r += "; rootless: " + rootlessGaps(h)
	}
	return r
}

// rootlessGaps says what a rootless backend cannot enforce.
func rootlessGaps(h *host) string {
	var gaps []string
	if h.Cgroups == nil {
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
