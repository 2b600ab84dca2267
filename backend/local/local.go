package local

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/execbox/execbox/internal/reexec"
	"github.com/execbox/execbox/sandbox"
)

// Name is the registered name of this backend.
const Name = "local"

func init() {
	reexec.Entry("local-reaper", reaperMain)
	reexec.Entry("local-exec", execMain)
	sandbox.Register(sandbox.Registration{Name: Name, New: New})
}

// Backend runs sandboxes as plain host subprocesses.
type Backend struct {
	workRoot string
	defaults sandbox.Limits
}

// New returns the local backend for settings s.
func New(s sandbox.Settings) (sandbox.Backend, error) {
	return &Backend{workRoot: s.Root(), defaults: s.DefaultLimits()}, nil
}

func (b *Backend) Name() string { return Name }

// enforcement says how each limit is enforced here; the same for every run
// of this process.
func enforcement() map[string]string {
	m := map[string]string{
		"wall":      "execbox timer (process tree killed through a subreaper)",
		"output":    "execbox capture",
		"memory":    "rlimit RLIMIT_DATA",
		"pids":      "rlimit RLIMIT_NPROC (per host user: every process of the user counts)",
		"file_size": "rlimit RLIMIT_FSIZE",
		"nofile":    "rlimit RLIMIT_NOFILE",
		"cpu_time":  "rlimit RLIMIT_CPU",
		"cpus":      "not enforced (no cgroup in the local backend)",
		"tmp_size":  "not enforced (host temp dir)",
		"work_size": "not enforced (host temp dir)",
		"network":   "not enforced (host network; local has no isolation)",
		"seccomp":   "not enforced (local has no isolation)",
	}
	if os.Geteuid() == 0 {
		m["pids"] = "not enforced (RLIMIT_NPROC does not bind root; run_as_user makes it per that user)"
	}
	return m
}

func (b *Backend) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{
		Isolation: sandbox.IsolationNone,
		Sessions:  true,
		Networks:  []sandbox.Network{sandbox.NetworkHost},
		Limits:    enforcement(),
	}
}

// Health really starts /bin/true through the reaper.
func (b *Backend) Health(ctx context.Context) sandbox.Health {
	h := sandbox.Health{CheckedAt: time.Now(), Details: map[string]string{"isolation": "none"}}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := sandbox.Run(ctx, b, sandbox.Spec{}, &sandbox.Process{Args: []string{"/bin/true"}})
	switch {
	case err != nil:
		h.Reason = "probe failed: " + err.Error()
	case !res.Succeeded():
		h.Reason = fmt.Sprintf("probe /bin/true ended %s (exit %d): %s", res.Reason, res.ExitCode, res.Stderr)
	default:
		h.Available, h.Ready = true, true
		h.Reason = "plain host subprocess: no isolation; used only when allow_unisolated is set"
	}
	return h
}

// Interface guards.
var _ sandbox.Backend = (*Backend)(nil)
