package gvisor

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/execbox/execbox/backend/internal/hostbase"
	"github.com/execbox/execbox/sandbox"
)

// healthTTL is how long a probe's answer is reused, and how long a host
// without a working runsc waits before it is probed again (runsc may be
// installed later).
const healthTTL = time.Minute

// Backend runs each Exec in a fresh gVisor sandbox. It is safe for
// concurrent use.
type Backend struct {
	*hostbase.Backend[facts]
	cfg        Config
	hidden     []string // execbox's work roots, never mounted
	runscCache string   // the file runsc's answers are kept in ("": none)
}

// facts are what the gvisor backend finds out about the host besides
// hostbase's.
type facts struct {
	runsc    *runsc
	hier     []string // cgroup v1 hierarchies (runsc makes leaves in those we do not use)
	policy   *policy  // the seccomp policy as this runsc enforces it
	platform string   // for Health
}

type host = hostbase.Host[facts]

func build(cfg Config, s sandbox.Settings) (sandbox.Backend, error) {
	b := &Backend{cfg: cfg, hidden: []string{s.Root()}}
	if s.StateDir != "" {
		b.runscCache = filepath.Join(s.StateDir, runscCacheFile)
	}
	b.Backend = hostbase.NewBackend(b, s, hostbase.Options[facts]{
		Name:          Name,
		Isolation:     sandbox.IsolationKernel,
		TTL:           healthTTL,
		SandboxDir:    true,
		CloseEmpty:    true, // an open sandbox's runsc state is left for the next start's reconciling
		CgroupPids:    pidsBackstop,
		RootImages:    true,
		HostNetwork:   "host network through the sentry (runsc --network=host, policy network=host)",
		Probe:         b.probe,
		Enforcement:   enforcement,
		ReconcileMore: func(h *host) { reconcileExtra(h.Own.hier) },
		HealthDetails: b.healthDetails,
		Unavailable:   "gvisor unavailable: ",
		Ready: func(h *host, took time.Duration) string {
			return fmt.Sprintf("runsc %s, platform %s; started /bin/true in %v; limits: %s",
				h.Own.runsc.version, h.Own.runsc.platform, took.Round(time.Millisecond), h.CgroupVersion())
		},
		ProbeFailed: func(h *host, res *sandbox.Result) string {
			detail := res.Message
			if detail == "" {
				detail = strings.TrimSpace(res.Stderr)
			}
			return fmt.Sprintf("probe /bin/true under runsc (platform %s) ended %s (exit %d): %s",
				h.Own.runsc.platform, res.Reason, res.ExitCode, detail)
		},
		ProbeTimeout: 30 * time.Second,
		ProbeWall:    20 * time.Second,
	})
	return b, nil
}

// probe finds runsc and its platform, cgroups (reconciling what a crashed
// execbox left, runsc's own leaves included) and the seccomp policy, and
// makes this process's base dir.
func (b *Backend) probe(h *host) error {
	if h.Rootless() {
		return fmt.Errorf("the gvisor backend runs runsc as root (euid is %d); rootless runsc has no cgroup limits", os.Geteuid())
	}
	_, goarch, err := hostSyscalls()
	if err != nil {
		return err
	}
	r, table, err := loadRunsc(b.cfg.Runsc, b.runscCache, goarch)
	if err != nil {
		return err
	}
	h.Own.runsc = r
	h.Own.platform = r.platform + " (offered: " + strings.Join(r.offered, ", ") + "; kvm is never chosen on its own)"
	h.OpenCgroups()
	if h.Cgroups != nil {
		h.Own.hier = h.Cgroups.Hierarchies()
		reconcileExtra(h.Own.hier)
	}
	if h.Own.policy, err = seccompPolicy(table); err != nil {
		return err
	}
	return h.OpenBase()
}

func (b *Backend) healthDetails(h *host) map[string]string {
	d := map[string]string{
		"runsc":    b.cfg.Runsc,
		"cgroups":  h.CgroupInfo,
		"platform": h.Own.platform,
	}
	if p := h.Own.policy; p != nil {
		d["seccomp"] = seccompInfo(p)
	}
	if r := h.Own.runsc; r != nil {
		d["runsc"] = r.path + " (version " + r.version + ")"
	}
	return d
}

// enforcement says how each limit is enforced on this host.
func enforcement(h *host) map[string]string {
	version, platform := "?", "?"
	if r := h.Own.runsc; r != nil {
		version, platform = r.version, r.platform
	}
	m := map[string]string{
		"wall":      "execbox timer (runsc kill --all, then the sandbox's cgroup is killed)",
		"output":    "execbox capture",
		"cpu_time":  "not enforced (no usable cgroups; the RLIMIT_CPU rlimit is set, but not every runsc release enforces it)",
		"nofile":    "rlimit RLIMIT_NOFILE (hard), enforced by gVisor's sentry",
		"file_size": "rlimit RLIMIT_FSIZE, enforced by gVisor's sentry",
		"tmp_size":  "gVisor tmpfs size, each of /tmp and /dev/shm (kept in the sentry's memory, so also under the memory limit)",
		"work_size": "host tmpfs size (mounted on the work dir, served to the sandbox by runsc's gofer)",
		"network":   "gVisor netstack, runsc --network=none (loopback only, no host interface)",
		"seccomp":   "execbox's policy (Docker's default without capabilities) enforced by the sentry (--oci-seccomp); the sentry and gofer run under gVisor's own host seccomp filters",
		"landlock":  "not applicable: the program never reaches the host kernel; runsc's gofer serves only the mounted paths",
		"isolation": "gVisor user-space kernel (runsc " + version + ", platform " + platform + ")",
	}
	if p := h.Own.policy; p != nil {
		m["seccomp"] = fmt.Sprintf("execbox's policy (%s) enforced by the sentry (--oci-seccomp); the sentry and gofer run under gVisor's own host seccomp filters", seccompInfo(p))
	}
	why := h.CgroupInfo
	if h.Cgroups == nil {
		m["memory"] = "rlimit RLIMIT_AS per process, enforced by the sentry (no usable cgroups: " + why + ")"
		m["pids"] = "rlimit RLIMIT_NPROC on the program's processes and threads, enforced by the sentry (a refused fork is seen in its strace) (no usable cgroups: " + why + ")"
		m["cpus"] = "not enforced (no usable cgroups: " + why + ")"
		return m
	}
	m["memory"] = h.Mechanisms["memory"] + " on the whole sandbox (sentry, gofer and the program's memory; the sentry sizes its memory to the limit); an overrun OOM-kills the sandbox"
	m["pids"] = "rlimit RLIMIT_NPROC on the program's processes and threads (per sandbox), enforced by the sentry (a refused fork is seen in its strace); host backstop " + h.Mechanisms["pids"] + " = " + pidsBackstopFormula + " on the sandbox's host tasks"
	m["cpus"] = h.Mechanisms["cpu"] + " on the whole sandbox (sentry and gofer included)"
	m["cpu_time"] = fmt.Sprintf("execbox watcher on the sandbox cgroup's CPU usage (sentry, gofer and program together, checked every %v; kills at the limit); the RLIMIT_CPU rlimit is set too, but not every runsc release enforces it", cpuPoll)
	return m
}

// seccompInfo says what the policy is on this runsc.
func seccompInfo(p *policy) string {
	s := strconv.Itoa(p.rules) + " syscall names, Docker's default without capabilities, translated to this runsc's syscall table"
	if len(p.unimplemented) > 0 {
		s += fmt.Sprintf("; %d the policy allows are not implemented by this runsc and answer ENOSYS: %s", len(p.unimplemented), strings.Join(p.unimplemented, ", "))
	}
	return s
}

// pidsBackstop is the host pids limit of a sandbox: the sentry, the gofer
// and (on ptrace) a stub process with a few threads per program process
// are host tasks, so it is well above the program's own limit, which the
// sentry enforces exactly.
func pidsBackstop(pids int) int { return 16*pids + 256 }

const pidsBackstopFormula = "16 × limit + 256"
