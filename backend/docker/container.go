package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
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
	LabelBackend  = "execbox.backend"  // the Backend value that made it (random)
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
	// shmSize bounds /dev/shm: big enough for POSIX semaphores and small
	// shared buffers, not a second /tmp outside its budget.
	shmSize = 1 * sandbox.MiB
)

// ctr is one container this backend made.
type ctr struct {
	id, name string
	run      string // the run label: the sandbox ID of a one-shot container
	key      string // pool key of a reused or warm container
	reused   bool
	ch       *channel  // the keeper's attach connection
	started  time.Time // when it was started, on our clock

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
	l[LabelBackend] = b.uid
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
	pids := int64(l.Pids + ownPids)
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
	hc := &container.HostConfig{
		NetworkMode:    network,
		ReadonlyRootfs: true,
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges:true", "seccomp=" + string(profile)},
		LogConfig:      container.LogConfig{Type: "none"},
		// Removed by the engine when it stops: after Close, and when the
		// keeper sees execbox's attach end (the backstop).
		AutoRemove:   true,
		IpcMode:      "private",
		CgroupnsMode: "private",
		ShmSize:      min(shmSize, l.TmpSize),
		Runtime:      b.cfg.Runtime,
		Init:         &f,
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
	}
	// Extra mounts (checked in Create): read-only unless asked, never
	// propagating mounts back to the host.
	for _, m := range spec.Policy.Mounts {
		hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeBind, Source: m.Source, Target: m.Target, ReadOnly: !m.Writable,
			BindOptions: &mount.BindOptions{Propagation: mount.PropagationRPrivate}})
	}
	return hc, nil
}

// startContainer creates a hardened container for spec named
// execbox-<run>, attaches to its stdin, stdout and stderr (held for its
// whole life: the keeper's channel) and starts it. A reused container
// (scope != "") gets the scope label.
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
		Cmd:        []string{"/bin/sh", "-c", keeper, "execbox-keeper", wrapper},
		Entrypoint: []string{},
		WorkingDir: workDir,
		Env:        []string{"PATH=" + sandboxPATH, "HOME=" + workDir, "TMPDIR=" + tmpDir},
		Labels:     labels,
		Hostname:   "sandbox",
		// docker stop (and the engine's shutdown) kills at once: the
		// keeper, PID 1, has no handler for SIGTERM.
		StopSignal: "SIGKILL",
		// The keeper's channel: stdin stays open while execbox's attach
		// holds it, and closes when that attach ends.
		OpenStdin: true, StdinOnce: true,
		AttachStdin: true, AttachStdout: true, AttachStderr: true,
	}
	c := &ctr{name: "execbox-" + run, run: run, reused: scope != ""}
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	// The create is not cancelled with ctx: a create cancelled in flight
	// may still make the container, under an ID never learnt. Once the ID
	// is known, every failure below removes it.
	done := b.timed("create")
	mctx, mcancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
	cr, err := b.cli.ContainerCreate(mctx, client.ContainerCreateOptions{Name: c.name, Config: cfg, HostConfig: hc})
	mcancel()
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
	fail := func(err error) (*ctr, error) {
		b.removeNow(context.WithoutCancel(ctx), c)
		return nil, err
	}
	if closed {
		return fail(sandbox.Errorf(sandbox.ErrUnavailable, "backend_closed", "the docker backend is closed"))
	}
	if err := ctx.Err(); err != nil {
		return fail(b.wrap(err, "creating container "+c.name))
	}
	done = b.timed("attach")
	at, err := b.cli.ContainerAttach(cctx, c.id, client.ContainerAttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true})
	done()
	if err != nil {
		return fail(b.wrap(err, "attaching to container "+c.name))
	}
	c.ch = newChannel(at.HijackedResponse)
	done = b.timed("start")
	_, err = b.cli.ContainerStart(cctx, c.id, client.ContainerStartOptions{})
	done()
	if err != nil {
		return fail(b.wrap(err, fmt.Sprintf("starting container %s from image %s (execbox images need /bin/sh, /usr/bin/env, head and setsid)", c.name, spec.Image)))
	}
	c.started = time.Now()
	return c, nil
}

// retire ends c: its keeper kills every process and exits, so the
// container stops, and the engine removes it and its volume (AutoRemove).
// retire returns once the keeper said it killed them (nothing of c runs
// any more); it leaves no goroutine behind. A keeper that does not answer
// is killed with its container. Close (and the tests) wait for the
// engine's removals with settle.
func (b *Backend) retire(ctx context.Context, c *ctr) error {
	c.kill("removed")
	var err error
	if c.ch != nil {
		stopped := b.timed("stop")
		if !c.ch.gone() && !b.quit(c) {
			err = b.killContainerOnly(ctx, c)
		}
		stopped()
		c.ch.close()
	} else {
		err = b.removeNow(ctx, c)
	}
	b.forget(c)
	return err
}

// quit tells c's keeper to kill everything and exit, and reports whether
// it confirmed the kill.
func (b *Backend) quit(c *ctr) bool {
	tok := token()
	r := newKeeperRun(tok, io.Discard, io.Discard)
	c.ch.attach(r)
	defer c.ch.detach(r)
	if c.ch.send("q "+tok+"\n", nil) != nil {
		return false
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	for !r.killed() {
		select {
		case <-r.changed:
		case <-c.ch.done:
			return true // the keeper is gone, and with it the container's processes
		case <-t.C:
			return false
		}
	}
	return true
}

// killContainerOnly kills c's container (not waiting for anything else).
func (b *Backend) killContainerOnly(ctx context.Context, c *ctr) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if _, err := b.cli.ContainerKill(ctx, c.id, client.ContainerKillOptions{Signal: "KILL"}); err != nil && !cerrdefs.IsNotFound(err) && !cerrdefs.IsConflict(err) {
		return b.wrap(err, "killing container "+c.name)
	}
	return nil
}

// settle waits until the engine removed every container this backend made
// and no longer uses (they carry its LabelBackend), removing itself those
// the engine did not remove within removalWait. Backend.Close calls it.
func (b *Backend) settle(ctx context.Context) error {
	b.mu.Lock()
	for b.pending > 0 {
		b.drained.Wait()
	}
	b.mu.Unlock()
	defer b.timed("settle")()
	var errs []error
	// A second look: a wait for a removal may end while the engine still
	// lists the container.
	for pass := 0; pass < 3; pass++ {
		left, err := b.unused(ctx)
		if err != nil || len(left) == 0 {
			return err
		}
		var mu sync.Mutex
		var wg sync.WaitGroup
		sem := make(chan struct{}, 8)
		errs = errs[:0]
		for _, c := range left {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				if err := b.awaitRemoval(ctx, c, pass > 0); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
	}
	return errors.Join(errs...)
}

// unused lists the containers of this backend that it does not use.
func (b *Backend) unused(ctx context.Context) ([]*ctr, error) {
	list, err := b.cli.ContainerList(ctx, client.ContainerListOptions{
		All: true, Filters: make(client.Filters).Add("label", LabelBackend+"="+b.uid),
	})
	if err != nil {
		return nil, b.wrap(err, "listing this backend's containers")
	}
	var out []*ctr
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, it := range list.Items {
		if _, live := b.live[it.ID]; live {
			continue
		}
		c := &ctr{id: it.ID, name: it.ID[:min(12, len(it.ID))]}
		if len(it.Names) > 0 {
			c.name = strings.TrimPrefix(it.Names[0], "/")
		}
		out = append(out, c)
	}
	return out, nil
}

// removalWait is how long settle waits for the engine to remove a stopped
// container before it removes it itself.
const removalWait = 20 * time.Second

// awaitRemoval waits until the engine removed c; if that does not happen
// in removalWait (or at once, when now), it removes c itself.
func (b *Backend) awaitRemoval(ctx context.Context, c *ctr, now bool) error {
	if !now {
		wctx, cancel := context.WithTimeout(ctx, removalWait)
		defer cancel()
		w := b.cli.ContainerWait(wctx, c.id, client.ContainerWaitOptions{Condition: container.WaitConditionRemoved})
		select {
		case <-w.Result:
			return nil
		case err := <-w.Error:
			if cerrdefs.IsNotFound(err) {
				return nil
			}
		case <-wctx.Done():
		}
		b.timed("removal-fallback")()
	}
	return b.removeNow(ctx, c)
}

// removeNow force-removes c and its volume (killing whatever runs in it)
// and forgets it. A container that is already gone is not an error.
func (b *Backend) removeNow(ctx context.Context, c *ctr) error {
	c.kill("removed")
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
	defer cancel()
	done := b.timed("remove")
	_, err := b.cli.ContainerRemove(ctx, c.id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	done()
	if err != nil && !cerrdefs.IsNotFound(err) {
		if !cerrdefs.IsConflict(err) {
			return b.wrap(err, "removing container "+c.name)
		}
		// "removal already in progress": wait for it.
		wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
		defer wcancel()
		w := b.cli.ContainerWait(wctx, c.id, client.ContainerWaitOptions{Condition: container.WaitConditionRemoved})
		select {
		case <-w.Result:
		case err := <-w.Error:
			if !cerrdefs.IsNotFound(err) {
				return b.wrap(err, "waiting for the removal of container "+c.name)
			}
		}
	}
	if c.ch != nil {
		c.ch.close()
	}
	b.forget(c)
	return nil
}

func (b *Backend) forget(c *ctr) {
	b.mu.Lock()
	delete(b.live, c.id)
	b.mu.Unlock()
}

// poolKey says which reused containers can serve spec: the same scope,
// image and everything that is fixed when a container is created.
func poolKey(spec sandbox.Spec) string {
	l := spec.Limits
	return fmt.Sprintf("%q|%q|%s|%v|%d|%g|%d|%d|%d|%d|%d|%d|%v|%v",
		spec.Scope, spec.Image, spec.Policy.Network, spec.Policy.TmpExec,
		l.Memory, l.CPUs, l.Pids, l.NoFile, l.FileSize, l.TmpSize, l.WorkSize, l.CPUTime, spec.Labels, spec.Policy.Mounts)
}
