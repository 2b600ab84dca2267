package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/execbox/execbox/internal/host/hostview"
	"github.com/execbox/execbox/internal/host/owner"
	"github.com/execbox/execbox/sandbox"
)

// Name is the registered name of this backend.
const Name = "docker"

// Backend runs sandboxes as hardened containers of a Docker engine, driven
// through the Engine API.
type Backend struct {
	cfg      Config
	cli      *client.Client
	host     string // the engine's address, for messages
	instance string
	me       owner.Owner
	defaults sandbox.Limits
	iso      sandbox.Isolation

	mu         sync.Mutex
	closed     bool
	live       map[string]*ctr // every container made and not yet removed, by ID
	pool       map[string]*ctr // idle reused containers, by pool key
	warm       warmPool        // containers started ahead for one-shot sandboxes
	reconciled bool
	pending    int        // retirements in the background (see track)
	drained    *sync.Cond // on mu: pending went to 0
	uid        string     // LabelBackend of this backend's containers

	trace atomic.Pointer[tracer] // set by the benchmarks
}

// New returns the docker backend for settings s. It does not contact the
// engine (Health does).
var New = sandbox.Define(Name, DefaultConfig, func(c Config, s sandbox.Settings) (sandbox.Backend, error) {
	b, err := NewWithConfig(c, s)
	if err != nil {
		return nil, err // not a nil *Backend in a non-nil interface
	}
	return b, nil
})

// NewWithConfig is New with the docker section given directly.
func NewWithConfig(cfg Config, s sandbox.Settings) (*Backend, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cli, host, err := NewClient(cfg.Host)
	if err != nil {
		return nil, err
	}
	d := s.DefaultLimits()
	inst := s.Instance
	if inst == "" {
		inst = "pid-" + strconv.Itoa(os.Getpid())
	}
	b := &Backend{
		cfg: cfg, cli: cli, host: host, instance: inst, me: owner.Self(), defaults: d,
		iso: isolation(cfg.Runtime), live: map[string]*ctr{}, pool: map[string]*ctr{},
		uid: token(),
	}
	b.drained = sync.NewCond(&b.mu)
	b.warm.init(b)
	return b, nil
}

func (b *Backend) Name() string { return Name }

// enforcement says how each limit is enforced; the same for every run.
var enforcement = map[string]string{
	"wall":      "execbox timer (the process tree is killed inside the container)",
	"output":    "execbox capture (stdout and stderr demultiplexed)",
	"memory":    "cgroup memory limit, swap equal to it (docker --memory, --memory-swap)",
	"cpus":      "cgroup CPU quota (docker --cpus)",
	"pids":      "cgroup pids limit (docker --pids-limit: limits.pids plus the 3 processes execbox keeps in the container while a program runs, so the program's own tasks are limits.pids at most)",
	"nofile":    "rlimit RLIMIT_NOFILE (docker --ulimit nofile)",
	"file_size": "rlimit RLIMIT_FSIZE (docker --ulimit fsize)",
	"cpu_time":  "rlimit RLIMIT_CPU (docker --ulimit cpu)",
	"tmp_size":  "tmpfs size (/tmp)",
	"work_size": "tmpfs size (the /work volume)",
	"network":   "network namespace (docker --network none unless policy network is host)",
}

func (b *Backend) Capabilities() sandbox.Capabilities {
	nets := []sandbox.Network{sandbox.NetworkNone, sandbox.NetworkHost}
	if b.iso == sandbox.IsolationKernel {
		nets = nets[:1] // gVisor keeps its own loopback-only stack
	}
	return sandbox.Capabilities{Isolation: b.iso, Sessions: true, Images: true, Networks: nets, Limits: enforcement, Remote: b.remote()}
}

// remote: the engine is not on a unix socket, so it may be on another
// host, whose cores and memory its containers use, not this one's.
func (b *Backend) remote() bool { return !strings.HasPrefix(b.host, "unix://") }

// Capacity is what a remote engine says it has: a run per CPU, fewer when
// its memory does not hold that many sandboxes of the default limits.
// The engine asks it only of a remote engine (Capabilities.Remote); one
// on this host's socket shares the host's lane.
func (b *Backend) Capacity(ctx context.Context) (sandbox.Capacity, error) {
	info, err := b.cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		return sandbox.Capacity{}, b.wrap(err, "asking the engine its CPUs and memory")
	}
	cpus, mem := info.Info.NCPU, info.Info.MemTotal
	c := sandbox.Capacity{Runs: cpus, Source: fmt.Sprintf("the docker engine at %s: %d CPUs", b.host, cpus)}
	if per := b.defaults.Memory; per > 0 && mem/per < int64(cpus) {
		c.Runs = int(mem / per)
		c.Source = fmt.Sprintf("the docker engine at %s: %s of memory, for sandboxes of %s (limits.memory)", b.host, sandbox.HumanSize(mem), sandbox.HumanSize(per))
	}
	return c, nil
}

// Health asks the engine, checks the runtime and the image, and really runs
// a container: ready only when the configured image is present and a
// probe ran in it.
func (b *Backend) Health(ctx context.Context) sandbox.Health {
	h := sandbox.Health{CheckedAt: time.Now(), Details: map[string]string{
		"host": b.host, "image": b.cfg.Image, "isolation": b.iso.String(),
		"runtime": b.cfg.Runtime, "reuse_container": strconv.FormatBool(b.cfg.ReuseContainer),
	}}
	if h.Details["runtime"] == "" {
		h.Details["runtime"] = "engine default"
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	v, err := b.cli.ServerVersion(ctx, client.ServerVersionOptions{})
	if err != nil {
		h.Reason = b.wrap(err, "asking the engine its version").Error()
		return h
	}
	h.Details["engine"] = v.Version
	h.Details["api"] = b.cli.ClientVersion()
	if b.cfg.Runtime != "" {
		info, err := b.cli.Info(ctx, client.InfoOptions{})
		if err != nil {
			h.Reason = b.wrap(err, "asking the engine its runtimes").Error()
			return h
		}
		if _, ok := info.Info.Runtimes[b.cfg.Runtime]; !ok {
			h.Reason = fmt.Sprintf("the docker engine at %s has no runtime %q (configure it: dockerd --add-runtime %s=/usr/bin/%s)", b.host, b.cfg.Runtime, b.cfg.Runtime, b.cfg.Runtime)
			return h
		}
	}
	b.reconcileOnce(ctx)
	if _, err := b.cli.ImageInspect(ctx, b.cfg.Image); err != nil {
		if cerrdefs.IsNotFound(err) {
			h.Available = true
			h.Reason = b.imageMissing(b.cfg.Image).Error()
			return h
		}
		h.Reason = b.wrap(err, "inspecting image "+b.cfg.Image).Error()
		return h
	}
	start := time.Now()
	res, err := sandbox.Run(ctx, b, sandbox.Spec{}, &sandbox.Process{Args: []string{"/bin/true"}})
	switch {
	case err != nil:
		h.Reason = "probe container failed: " + err.Error()
		return h
	case !res.Succeeded():
		h.Reason = fmt.Sprintf("probe /bin/true in %s ended %s (exit %d): %s", b.cfg.Image, res.Reason, res.ExitCode, res.Stderr)
		return h
	}
	took := time.Since(start)
	// Ready only when ordinary programs work in the image under these
	// flags: the smoke check every backend passes.
	h.Available = true
	if ok, why := sandbox.Smoke(ctx, b, sandbox.Spec{}); !ok {
		h.Reason = fmt.Sprintf("not ready: %s (in a hardened %s container)", why, b.cfg.Image)
		return h
	}
	if why := b.seccompHolds(ctx, h.Details); why != "" {
		h.Reason = "not ready: " + why
		return h
	}
	h.Ready = true
	h.Reason = fmt.Sprintf("docker %s at %s (API %s): a hardened %s container ran /bin/true in %v and passed the smoke check",
		v.Version, b.host, b.cli.ClientVersion(), b.cfg.Image, took.Round(time.Millisecond))
	return h
}

// Create gives the sandbox a running container of its own — one started
// ahead (docker.pool_size), or a new one — or leases an idle reused one
// for spec.Scope, so that Exec only has to hand the keeper a line.
func (b *Backend) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	defer b.timed("Create")()
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if spec.Policy.RunAsUser != "" {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "run_as_user_unsupported", "policy run_as_user is for the local backend; docker runs every program as 65534:65534")
	}
	if err := b.checkMounts(spec.Policy.Mounts); err != nil {
		return nil, err
	}
	if spec.Policy.Network == sandbox.NetworkHost && b.iso == sandbox.IsolationKernel {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "network_unsupported", "network host is not available with docker.runtime %s (gVisor runs its own loopback-only network stack)", b.cfg.Runtime)
	}
	spec.Limits = spec.Limits.WithDefaults(b.defaults)
	if spec.Image == "" {
		spec.Image = b.cfg.Image
	}
	b.mu.Lock()
	closed := b.closed
	b.mu.Unlock()
	if closed {
		return nil, sandbox.Errorf(sandbox.ErrUnavailable, "backend_closed", "the docker backend is closed")
	}
	b.reconcileOnce(ctx)
	s := &Sandbox{b: b, spec: spec}
	var err error
	switch {
	case b.cfg.ReuseContainer && spec.Scope != "":
		s.id = sandbox.NewID()
		s.c, err = b.lease(ctx, spec)
	default:
		// A container started ahead, never used, or a new one; either way
		// the sandbox's own, and its ID is the container's run label.
		if s.c = b.warm.take(spec); s.c == nil {
			s.c, err = b.startContainer(ctx, spec, sandbox.NewID(), "")
		}
		if s.c != nil {
			s.id = s.c.run
		}
	}
	if err != nil {
		return nil, err
	}
	s.fresh, s.workEmpty = true, true
	return s, nil
}

// checkMounts validates extra mounts (configured ones, such as the tools
// dirs; a request cannot name any). A bind mount's source is a path on the
// engine's host, so they are refused unless the engine is on this one (a
// unix socket); then they get the checks every backend makes.
func (b *Backend) checkMounts(ms []sandbox.Mount) error {
	if len(ms) == 0 {
		return nil
	}
	if b.remote() {
		return sandbox.Errorf(sandbox.ErrDenied, "mounts_unsupported",
			"policy.mounts has %d host paths, but the engine at %s may be on another host: docker mounts host paths only from an engine on a unix socket", len(ms), b.host)
	}
	for _, m := range ms {
		if _, err := hostview.CheckMount(m, nil); err != nil {
			return err
		}
	}
	return nil
}

// Close removes every container this backend made — idle reused ones,
// those started ahead, and those of sandboxes still open (their next
// operation fails) — and returns once the engine removed them all. It is
// the optional lifecycle method the engine calls when execbox stops.
func (b *Backend) Close() error {
	b.mu.Lock()
	b.closed = true
	b.pool = map[string]*ctr{}
	b.mu.Unlock()
	b.warm.close()
	b.mu.Lock()
	var all []*ctr
	for _, c := range b.live {
		all = append(all, c)
	}
	b.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	errs := make([]error, len(all))
	var wg sync.WaitGroup
	for i, c := range all {
		c.stopIdle()
		wg.Go(func() { errs[i] = b.retire(ctx, c) })
	}
	wg.Wait()
	errs = append(errs, b.settle(ctx))
	b.cli.Close()
	return errors.Join(errs...)
}

// track counts one retirement in the background until the returned func
// is called; settle (and so Close) waits for them.
func (b *Backend) track() (done func()) {
	b.mu.Lock()
	b.pending++
	b.mu.Unlock()
	return sync.OnceFunc(func() {
		b.mu.Lock()
		if b.pending--; b.pending == 0 {
			b.drained.Broadcast()
		}
		b.mu.Unlock()
	})
}

// retireAsync retires c in the background.
func (b *Backend) retireAsync(c *ctr) {
	done := b.track()
	go func() {
		defer done()
		b.retire(context.Background(), c)
	}()
}

// seccompProbe asks for a new user namespace, which execbox's profile
// denies (EPERM), and prints what unshare(2) returned and its errno.
const seccompProbe = `import ctypes
libc = ctypes.CDLL(None, use_errno=True)
print(libc.unshare(0x10000000), ctypes.get_errno())`

// seccompHolds checks that the seccomp profile is in force in a container:
// a runtime can ignore it (runsc without --oci-seccomp does), and then
// every syscall would be open. It says why not, or "" when it holds or
// cannot be checked (no python3 in the image: details say so).
func (b *Backend) seccompHolds(ctx context.Context, details map[string]string) string {
	res, err := sandbox.Run(ctx, b, sandbox.Spec{}, &sandbox.Process{Args: []string{"python3", "-I", "-c", seccompProbe}})
	switch {
	case err != nil:
		return "checking the seccomp profile: " + err.Error()
	case res.Reason == sandbox.ReasonExited && res.ExitCode == 127:
		details["seccomp"] = "not verified: the image has no python3"
		return ""
	case !res.Succeeded():
		return fmt.Sprintf("checking the seccomp profile: the probe ended %s (exit %d): %s", res.Reason, res.ExitCode, strings.TrimSpace(res.Stderr))
	case strings.TrimSpace(res.Stdout) != "-1 1":
		return fmt.Sprintf("the seccomp profile is not in force in runtime %q: unshare(CLONE_NEWUSER) answered %q, want -1 EPERM "+
			"(for runsc, give the runtime --oci-seccomp in the engine's daemon.json)", details["runtime"], strings.TrimSpace(res.Stdout))
	}
	details["seccomp"] = "in force (unshare(CLONE_NEWUSER) denied in a probe container)"
	return ""
}
