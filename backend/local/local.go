package local

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"time"

	"github.com/execbox/execbox/internal/host/reexec"
	"github.com/execbox/execbox/sandbox"
)

// Name is the registered name of this backend.
const Name = "local"

func init() {
	reexec.Entry("local-reaper", reaperMain)
	reexec.Entry("local-exec", execMain)
}

// Backend runs sandboxes as plain host subprocesses.
type Backend struct {
	workRoot string
	defaults sandbox.Limits
}

// New returns the local backend for settings s (it has no configuration
// section).
var New = sandbox.Define[struct{}](Name, nil, func(_ struct{}, s sandbox.Settings) (sandbox.Backend, error) {
	return &Backend{workRoot: s.Root(), defaults: s.DefaultLimits()}, nil
})

func (b *Backend) Name() string { return Name }

// enforcement says how each limit is enforced for a sandbox whose program
// runs as runAs (nil: as execbox's own user).
func enforcement(runAs *user.User) map[string]string {
	return map[string]string{
		"wall":      "execbox timer (process tree killed through a subreaper)",
		"output":    "execbox capture",
		"memory":    "rlimit RLIMIT_DATA",
		"pids":      pidsEnforcement(runAs),
		"file_size": "rlimit RLIMIT_FSIZE",
		"nofile":    "rlimit RLIMIT_NOFILE",
		"cpu_time":  "rlimit RLIMIT_CPU",
		"cpus":      "not enforced (no cgroup in the local backend)",
		"tmp_size":  "not enforced (host temp dir)",
		"work_size": "not enforced (host temp dir)",
		"network":   "not enforced (host network; local has no isolation)",
		"seccomp":   "not enforced (local has no isolation)",
	}
}

// pidsEnforcement says how the pids limit binds a program running as runAs.
// RLIMIT_NPROC counts every task of the program's real user, not the
// sandbox's: it is set only for a run_as_user, the host user execbox
// dedicates to its programs. As execbox's own user it would count
// execbox's threads and everything else that user runs (a developer's
// shell, editor, go test), and a program could not start a process or a
// thread; as root it binds nothing.
func pidsEnforcement(runAs *user.User) string {
	switch {
	case runAs != nil:
		return "rlimit RLIMIT_NPROC (per host user " + runAs.Username + ": every process of that user counts)"
	case os.Geteuid() == 0:
		return "not enforced (RLIMIT_NPROC does not bind root; run_as_user makes it per that user)"
	}
	return fmt.Sprintf("not enforced (RLIMIT_NPROC would count every process of host user %d, execbox's own and its other programs' included, "+
		"not the sandbox's; run_as_user, as root, makes it per that user)", os.Getuid())
}

func (b *Backend) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{
		Isolation: sandbox.IsolationNone,
		Sessions:  true,
		Networks:  []sandbox.Network{sandbox.NetworkHost},
		Limits:    enforcement(nil),
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
