package docker

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/execbox/execbox/sandbox"
)

// Labels on every container and volume this backend makes.
const (
	LabelInstance = "execbox.instance" // Settings.Instance of the owning execbox
	LabelOwner    = "execbox.owner"    // host|boot|pidns|pid|start of the owning process
	LabelRun      = "execbox.run"      // the sandbox (or reused container) ID
	LabelExpires  = "execbox.expires"  // RFC 3339; after it, any execbox may remove it
	LabelKind     = "execbox.kind"     // "sandbox" or "reused"
	LabelScope    = "execbox.scope"    // Spec.Scope of a reused container
)

// MaxAge is how long after its creation a container is certainly unwanted:
// the expiry that lets an execbox remove containers whose owner it cannot
// check (one on another machine).
const MaxAge = 24 * time.Hour

// The paths every sandbox has.
const (
	workDir = "/work"
	tmpDir  = "/tmp"
	// sandboxUser runs the keeper and every program.
	sandboxUser = "65534:65534"
	// sandboxPATH is every program's PATH, as on the native backend.
	sandboxPATH = "/usr/local/bin:/usr/bin:/bin"
	// keeperPids are the processes execbox itself keeps in a container (the
	// keeper shell, its sleep, the exec wrapper); the pids limit adds them
	// so the program gets Limits.Pids for itself.
	keeperPids = 3
	// shmSize bounds /dev/shm: big enough for POSIX semaphores and small
	// shared buffers, not a second /tmp outside its budget.
	shmSize = 1 * sandbox.MiB
)

// keeper is the container's PID 1: it sleeps and reaps the orphans that
// execs leave behind. It needs only /bin/sh and sleep. It has no signal
// handler, so nothing inside the container can kill it (the kernel drops
// signals to a PID namespace's init that it does not handle).
var keeper = []string{"/bin/sh", "-c", "while :; do sleep 2147483647 & wait $!; done"}

// ctr is one container this backend made.
type ctr struct {
	id, name string
	key      string // pool key of a reused container
	reused   bool
	started  time.Time // when it was started, on our clock
	// emptyWork is the size the engine reports for /work while it is
	// empty (tmpfs counts directory entries in a directory's size).
	emptyWork int64

	mu   sync.Mutex
	dead string // why it cannot be used any more ("" = usable)
	idle *time.Timer
}

func (c *ctr) kill(why string) {
	c.mu.Lock()
	if c.dead == "" {
		c.dead = why
	}
	c.mu.Unlock()
}

func (c *ctr) deadReason() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dead
}

func (c *ctr) stopIdle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.idle != nil {
		c.idle.Stop()
		c.idle = nil
	}
}

// labels are the labels of a container (and its volume) for spec.
func (b *Backend) labels(spec sandbox.Spec, run, kind, scope string) map[string]string {
	l := map[string]string{}
	for k, v := range spec.Labels {
		if !strings.HasPrefix(k, "execbox.") {
			l[k] = v
		}
	}
	l[LabelInstance] = b.instance
	l[LabelOwner] = b.me.String()
	l[LabelRun] = run
	l[LabelExpires] = time.Now().Add(MaxAge).UTC().Format(time.RFC3339)
	l[LabelKind] = kind
	if scope != "" {
		l[LabelScope] = scope
	}
	return l
}

// hostConfig is the hardening every container gets: seed 004's flags plus
// the holes Docker's own defaults leave open (io_uring, a huge nofile
// limit, a 64 MiB /dev/shm, a /tmp that uid 65534 cannot write).
func (b *Backend) hostConfig(spec sandbox.Spec, labels map[string]string) (*container.HostConfig, error) {
	profile, err := seccompProfile()
	if err != nil {
		return nil, sandbox.Errorf(sandbox.ErrUnavailable, "seccomp_unavailable", "building the seccomp profile: %w", err)
	}
	l := spec.Limits
	pids := int64(l.Pids + keeperPids)
	noexec := ",noexec"
	if spec.Policy.TmpExec {
		noexec = ""
	}
	network := container.NetworkMode("none")
	if spec.Policy.Network == sandbox.NetworkHost {
		network = "host"
	}
	cpuSecs := int64(max(l.CPUTime/time.Second, 1))
	f := false
	return &container.HostConfig{
		NetworkMode:    network,
		ReadonlyRootfs: true,
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges:true", "seccomp=" + string(profile)},
		LogConfig:      container.LogConfig{Type: "none"},
		IpcMode:        "private",
		CgroupnsMode:   "private",
		ShmSize:        min(shmSize, l.TmpSize),
		Runtime:        b.cfg.Runtime,
		Init:           &f,
		Tmpfs: map[string]string{
			tmpDir: "rw,nosuid,nodev" + noexec + ",size=" + strconv.FormatInt(l.TmpSize, 10) + ",mode=1777",
		},
		// The work dir is a tmpfs volume, not a --tmpfs mount: the Engine
		// API copies files into and out of a volume of a running
		// container, while a --tmpfs mount is invisible to it.
		Mounts: []mount.Mount{{
			Type:   mount.TypeVolume,
			Target: workDir,
			VolumeOptions: &mount.VolumeOptions{
				Labels: labels,
				DriverConfig: &mount.Driver{Name: "local", Options: map[string]string{
					"type": "tmpfs", "device": "tmpfs",
					"o": "size=" + strconv.FormatInt(l.WorkSize, 10) + ",uid=65534,gid=65534,mode=0700,nosuid,nodev" + noexec,
				}},
			},
		}},
		Resources: container.Resources{
			Memory:     l.Memory,
			MemorySwap: l.Memory,
			NanoCPUs:   int64(l.CPUs * 1e9),
			PidsLimit:  &pids,
			Ulimits: []*container.Ulimit{
				{Name: "nofile", Soft: int64(l.NoFile), Hard: int64(l.NoFile)},
				{Name: "fsize", Soft: l.FileSize, Hard: l.FileSize},
				// SIGXCPU at the soft limit, SIGKILL a second later.
				{Name: "cpu", Soft: cpuSecs, Hard: cpuSecs + 1},
			},
		},
	}, nil
}

// startContainer creates and starts a hardened container for spec named
// execbox-<run>. A reused container (scope != "") gets the scope label.
func (b *Backend) startContainer(ctx context.Context, spec sandbox.Spec, run, scope string) (*ctr, error) {
	kind := "sandbox"
	if scope != "" {
		kind = "reused"
	}
	labels := b.labels(spec, run, kind, scope)
	hc, err := b.hostConfig(spec, labels)
	if err != nil {
		return nil, err
	}
	cfg := &container.Config{
		Image:      spec.Image,
		User:       sandboxUser,
		Cmd:        keeper,
		Entrypoint: []string{},
		WorkingDir: workDir,
		Env:        []string{"PATH=" + sandboxPATH, "HOME=" + workDir, "TMPDIR=" + tmpDir},
		Labels:     labels,
		Hostname:   "sandbox",
	}
	c := &ctr{name: "execbox-" + run, reused: scope != ""}
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	done := b.timed("create")
	cr, err := b.cli.ContainerCreate(cctx, client.ContainerCreateOptions{Name: c.name, Config: cfg, HostConfig: hc})
	done()
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return nil, b.imageMissing(spec.Image)
		}
		return nil, b.wrap(err, "creating container "+c.name)
	}
	c.id = cr.ID
	b.mu.Lock()
	closed := b.closed
	b.live[c.id] = c
	b.mu.Unlock()
	if closed {
		b.remove(context.WithoutCancel(ctx), c)
		return nil, sandbox.Errorf(sandbox.ErrUnavailable, "backend_closed", "the docker backend is closed")
	}
	done = b.timed("start")
	_, err = b.cli.ContainerStart(cctx, c.id, client.ContainerStartOptions{})
	done()
	if err != nil {
		b.remove(context.WithoutCancel(ctx), c)
		return nil, b.wrap(err, fmt.Sprintf("starting container %s from image %s (execbox images need /bin/sh, sleep and /usr/bin/env)", c.name, spec.Image))
	}
	c.started = time.Now()
	c.emptyWork = -1
	done = b.timed("stat-work")
	st, err := b.cli.ContainerStatPath(cctx, c.id, client.ContainerStatPathOptions{Path: workDir})
	done()
	if err == nil {
		c.emptyWork = st.Stat.Size
	}
	return c, nil
}

// remove force-removes c and its volume (killing whatever runs in it) and
// forgets it. A container that is already gone is not an error.
func (b *Backend) remove(ctx context.Context, c *ctr) error {
	c.kill("removed")
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
	defer cancel()
	done := b.timed("remove")
	_, err := b.cli.ContainerRemove(ctx, c.id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	done()
	if err != nil && !cerrdefs.IsNotFound(err) {
		return b.wrap(err, "removing container "+c.name)
	}
	b.mu.Lock()
	delete(b.live, c.id)
	b.mu.Unlock()
	return nil
}

// poolKey says which reused containers can serve spec: the same scope,
// image and everything that is fixed when a container is created.
func poolKey(spec sandbox.Spec) string {
	l := spec.Limits
	return fmt.Sprintf("%q|%q|%s|%v|%d|%g|%d|%d|%d|%d|%d|%d|%v",
		spec.Scope, spec.Image, spec.Policy.Network, spec.Policy.TmpExec,
		l.Memory, l.CPUs, l.Pids, l.NoFile, l.FileSize, l.TmpSize, l.WorkSize, l.CPUTime, spec.Labels)
}
