package docker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/execbox/execbox/internal/host/image"
	"github.com/execbox/execbox/internal/host/owner"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
)

// holderEnv makes the test binary a helper that holds sandboxes until it
// is killed (see TestBackstop): its value says what it holds.
const holderEnv = "EXECBOX_DOCKER_HOLDER"

func TestMain(m *testing.M) {
	if what := os.Getenv(holderEnv); what != "" {
		os.Exit(holderMain(what))
	}
	os.Exit(testutil.RunKeepingDevNull(m)) // runtime runsc (TestRuntimeSeccomp) chowns what it is handed
}

// holderMain holds, as instance test-holder, either a reused container
// that is idle between two sandboxes ("idle"), or a one-shot sandbox whose
// program runs (a shell loop that survives SIGTERM and SIGHUP), or one
// with a program that forked a child into its own session and made it
// ignore everything it can ("running"). It prints "holding NAME" and waits
// to be killed.
func holderMain(what string) int {
	b, err := NewWithConfig(Config{Image: testImage(), ReuseContainer: true}, sandbox.Settings{Instance: "test-holder"})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	ctx := context.Background()
	spec := sandbox.Spec{Limits: sandbox.Limits{Wall: time.Hour}}
	if what == "idle" {
		spec.Scope = "held"
	}
	sb, err := b.Create(ctx, spec)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	res, err := sb.Exec(ctx, &sandbox.Process{Args: []string{"/bin/sh", "-c", "echo busy > /work/state"}})
	if err != nil || !res.Succeeded() {
		fmt.Println("error", err, describe(res))
		return 1
	}
	if what == "idle" {
		sb.Close(ctx) // back to the scope's pool: idle, not removed
		sb, err = b.Create(ctx, spec)
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		fmt.Println("holding", sb.(*Sandbox).c.name)
		time.Sleep(time.Hour)
		return 0
	}
	go sb.Exec(ctx, &sandbox.Process{Args: []string{"/bin/sh", "-c",
		`trap '' HUP TERM INT; setsid sh -c 'trap "" HUP TERM INT; while :; do sleep 1; done' & while :; do sleep 1; done`}})
	time.Sleep(500 * time.Millisecond)
	fmt.Println("holding", sb.(*Sandbox).c.name)
	time.Sleep(time.Hour)
	return 0
}

// TestNoOrphans: after a run that timed out, a cancelled run and a run
// whose program left a child in its own session, the engine has none of
// their containers.
func TestNoOrphans(t *testing.T) {
	b := newBackend(t, Config{})
	ctx := context.Background()

	res := testutil.Sh(t, b, sandbox.Spec{Limits: sandbox.Limits{Wall: time.Second}}, "sleep 100 & setsid sleep 100 & echo started; wait")
	if res.Reason != sandbox.ReasonTimeout {
		t.Errorf("timed-out run: %s", describe(res))
	}
	if left := execboxContainers(t, b, b.instance); len(left) > 0 {
		t.Errorf("after a timed-out run: %v", left)
	}

	// Cancelled once the program runs (a cancel during Create is an error).
	cctx, cancel := context.WithCancel(ctx)
	res, err := sandbox.Run(cctx, b, sandbox.Spec{}, &sandbox.Process{Args: []string{"/bin/sh", "-c", "echo started; sleep 100"},
		Stdout: writerFunc(func(p []byte) (int, error) { cancel(); return len(p), nil })})
	if err != nil || res.Reason != sandbox.ReasonCanceled {
		t.Errorf("cancelled run: %v %s", err, describe(res))
	}
	if left := execboxContainers(t, b, b.instance); len(left) > 0 {
		t.Errorf("after a cancelled run: %v", left)
	}

	res = testutil.Sh(t, b, sandbox.Spec{}, "setsid sleep 100 & echo left")
	if !res.Succeeded() || res.Stdout != "left\n" {
		t.Errorf("run that leaves a child: %s", describe(res))
	}
	if left := execboxContainers(t, b, b.instance); len(left) > 0 {
		t.Errorf("after a run that left a child: %v", left)
	}
}

// TestBackstop kills -9 a process that holds sandboxes — one idle reused
// container, one one-shot container whose program runs (and ignores
// SIGTERM and SIGHUP, with a child in its own session) — and checks that
// the containers go away by themselves: no execbox is left to remove them
// and none starts, so only the keeper's end of file (the engine closes a
// container's stdin when the attach that held it ends) and the engine's
// AutoRemove can. A container that outlives the kill is listed first, so
// the check proves something.
func TestBackstop(t *testing.T) {
	b := newBackend(t, Config{})
	for _, what := range []string{"idle", "running"} {
		t.Run(what, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), holderEnv+"="+what)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
			line, _ := bufio.NewReader(out).ReadString('\n')
			name, ok := strings.CutPrefix(strings.TrimSpace(line), "holding ")
			if !ok {
				t.Fatalf("holder: %q", line)
			}
			if got := execboxContainers(t, b, "test-holder"); !slices.Contains(got, "/"+name) {
				t.Fatalf("the holder's container %s is not listed: %v", name, got)
			}
			if what == "running" {
				procs := top(t, b, name)
				if !slices.ContainsFunc(procs, func(p string) bool { return strings.Contains(p, "sleep") }) {
					t.Fatalf("the holder's program is not running in %s: %q", name, procs)
				}
			}
			killed := time.Now()
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
			deadline := killed.Add(30 * time.Second)
			for slices.Contains(execboxContainers(t, b, "test-holder"), "/"+name) {
				if time.Now().After(deadline) {
					t.Fatalf("container %s still there %v after its execbox was killed", name, time.Since(killed).Round(time.Millisecond))
				}
				time.Sleep(20 * time.Millisecond)
			}
			t.Logf("container %s (%s) gone %v after its execbox was killed -9", name, what, time.Since(killed).Round(time.Millisecond))
		})
	}
}

// top lists the command lines of the processes in container name, as the
// engine sees them.
func top(t *testing.T, b *Backend, name string) []string {
	t.Helper()
	res, err := b.cli.ContainerTop(context.Background(), name, client.ContainerTopOptions{})
	if err != nil {
		t.Fatalf("top %s: %v", name, err)
	}
	var out []string
	for _, p := range res.Processes {
		out = append(out, strings.Join(p, " "))
	}
	return out
}

// TestReconcileDeadOwner: a container of an execbox that died on this
// machine (its keeper could not end it: here one made without a keeper)
// is removed by the next backend's first contact with the engine; one of
// a live owner is left alone.
func TestReconcileDeadOwner(t *testing.T) {
	b := newBackend(t, Config{})
	ctx := context.Background()
	dead := b.me
	dead.Start = "1" // this PID, but started at another time: another process
	mk := func(o owner.Owner) string {
		labels := map[string]string{LabelOwner: o.String(), LabelInstance: "test-dead-owner",
			LabelExpires: time.Now().Add(time.Hour).UTC().Format(time.RFC3339), LabelRun: sandbox.NewID()}
		r, err := b.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
			Name: "execbox-" + labels[LabelRun], Image: b.cfg.Image,
			Config:     &container.Config{Labels: labels, Cmd: []string{"/bin/sleep", "1000"}, User: sandboxUser},
			HostConfig: &container.HostConfig{NetworkMode: "none"},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.cli.ContainerRemove(ctx, r.ID, client.ContainerRemoveOptions{Force: true}) })
		if _, err := b.cli.ContainerStart(ctx, r.ID, client.ContainerStartOptions{}); err != nil {
			t.Fatal(err)
		}
		return "/execbox-" + labels[LabelRun]
	}
	orphan, alive := mk(dead), mk(b.me)
	fresh := newBackend(t, Config{})
	fresh.Health(ctx) // its first contact: reconciles
	got := execboxContainers(t, b, "test-dead-owner")
	if slices.Contains(got, orphan) || !slices.Contains(got, alive) {
		t.Errorf("after a fresh start: %v; want %s (dead owner) removed and %s (live owner) kept", got, orphan, alive)
	}
}

// TestReconcileExpiry: a container of an owner execbox cannot check (another
// machine) is removed once expired, and only then.
func TestReconcileExpiry(t *testing.T) {
	b := newBackend(t, Config{})
	ctx := context.Background()
	other := owner.Owner{Host: "elsewhere", Boot: "b", PIDNS: "p", PID: 1, Start: "1"}
	mk := func(expires time.Time) string {
		labels := map[string]string{LabelOwner: other.String(), LabelInstance: "test-expiry",
			LabelExpires: expires.UTC().Format(time.RFC3339), LabelRun: sandbox.NewID()}
		r, err := b.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
			Name: "execbox-" + labels[LabelRun], Image: b.cfg.Image,
			Config:     &container.Config{Labels: labels, Cmd: []string{"/bin/true"}},
			HostConfig: &container.HostConfig{NetworkMode: "none"},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.cli.ContainerRemove(ctx, r.ID, client.ContainerRemoveOptions{Force: true}) })
		return "/execbox-" + labels[LabelRun]
	}
	live := mk(time.Now().Add(time.Hour))
	expired := mk(time.Now().Add(-time.Minute))
	r, err := b.Reconcile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := execboxContainers(t, b, "test-expiry")
	if slices.Contains(got, expired) || !slices.Contains(got, live) {
		t.Errorf("after reconcile: %v (removed %v); want %s kept and %s removed", got, r, live, expired)
	}
}

// TestReuse: a scope's sandboxes share one container, wiped in between;
// other scopes and concurrent sandboxes get their own; idle ones are reaped.
func TestReuse(t *testing.T) {
	// The idle timeout is long enough for the closes and the listing below
	// on a loaded host (at 700 ms the kept container was once reaped before
	// it was counted, beside the black-box tests), short enough to wait for.
	const idle = 5 * time.Second
	b := newBackend(t, Config{ReuseContainer: true, IdleTimeout: idle})
	ctx := context.Background()
	first := create(t, b, sandbox.Spec{Scope: "s"})
	if err := first.WriteFiles(ctx, map[string][]byte{"in.txt": []byte("mine")}); err != nil {
		t.Fatal(err)
	}
	res, err := first.Exec(ctx, &sandbox.Process{Args: []string{"/bin/sh", "-c",
		"echo secret > /work/left; mkdir -p /work/d && chmod 000 /work/d; echo t > /tmp/left; echo s > /dev/shm/left; (setsid sleep 1000 >/dev/null 2>&1 &); echo ok"}})
	if err != nil || !res.Succeeded() {
		t.Fatalf("%v %s", err, describe(res))
	}
	id := first.(*Sandbox).c.id
	if err := first.Close(ctx); err != nil {
		t.Fatal(err)
	}
	second := create(t, b, sandbox.Spec{Scope: "s"})
	if got := second.(*Sandbox).c.id; got != id {
		t.Errorf("a second sandbox of the scope got container %s, want the reused %s", got, id)
	}
	res, err = second.Exec(ctx, &sandbox.Process{Args: []string{"/bin/sh", "-c",
		`ls -A /work /tmp /dev/shm; for p in /proc/[0-9]*; do tr '\000' ' ' < $p/cmdline; echo; done`}})
	if err != nil || !res.Succeeded() {
		t.Fatalf("%v %s", err, describe(res))
	}
	if strings.Contains(res.Stdout, "left") || strings.Contains(res.Stdout, "in.txt") || strings.Contains(res.Stdout, "sleep 1000") {
		t.Errorf("the previous sandbox's files or processes are visible:\n%s", res.Stdout)
	}
	a, err := second.Artifacts(ctx)
	if err != nil || len(a.Files)+len(a.Skipped) != 0 {
		t.Errorf("artifacts of a fresh lease: %+v %v", a, err)
	}
	other := create(t, b, sandbox.Spec{Scope: "other"})
	if other.(*Sandbox).c.id == id {
		t.Errorf("another scope shares the container")
	}
	// Concurrent sandboxes of one scope: one container each; one is kept.
	third := create(t, b, sandbox.Spec{Scope: "s"})
	if third.(*Sandbox).c.id == id {
		t.Errorf("a concurrent sandbox of the scope shares a container in use")
	}
	for _, sb := range []sandbox.Sandbox{second, third, other} {
		if err := sb.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	byScope := func(scope string) []string {
		if err := b.settle(context.Background()); err != nil {
			t.Errorf("settling: %v", err)
		}
		list, err := b.cli.ContainerList(ctx, client.ContainerListOptions{All: true,
			Filters: make(client.Filters).Add("label", LabelInstance+"="+b.instance, LabelScope+"="+scope)})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, c := range list.Items {
			ids = append(ids, c.ID)
		}
		return ids
	}
	if got := byScope("s"); len(got) != 1 {
		t.Errorf("scope s keeps %d idle containers, want 1", len(got))
	}
	deadline := time.Now().Add(idle + 10*time.Second)
	for len(byScope("s"))+len(byScope("other")) > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if left := execboxContainers(t, b, b.instance); len(left) > 0 {
		t.Errorf("idle containers not reaped after the idle timeout: %v", left)
	}
}

// TestBackendClose: Close removes idle reused containers and those of open
// sandboxes, whose next use then fails.
func TestBackendClose(t *testing.T) {
	b := newBackend(t, Config{ReuseContainer: true})
	ctx := context.Background()
	idle := create(t, b, sandbox.Spec{Scope: "s"})
	idle.Close(ctx)
	open := create(t, b, sandbox.Spec{})
	if len(execboxContainers(t, b, b.instance)) != 2 {
		t.Fatalf("want 2 containers before Close: %v", execboxContainers(t, b, b.instance))
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if left := execboxContainers(t, b, b.instance); len(left) > 0 {
		t.Errorf("after Backend.Close: %v", left)
	}
	if _, err := open.Exec(ctx, &sandbox.Process{Args: []string{"/bin/true"}}); err == nil {
		t.Errorf("Exec in a sandbox of a closed backend succeeded")
	}
	if _, err := b.Create(ctx, sandbox.Spec{}); !errors.Is(err, sandbox.ErrUnavailable) {
		t.Errorf("Create on a closed backend: %v", err)
	}
}

// TestEngineDownAndBack stops and restarts a second private engine (started
// with scripts/dockerd.sh) under a live backend: while the engine is down,
// Health and every run say so clearly; once it is back, runs work again
// without a new backend.
func TestEngineDownAndBack(t *testing.T) {
	newBackend(t, Config{}) // gate: the test engine works here
	if os.Geteuid() != 0 {
		testutil.SkipOrFail(t, Name, "starting a second dockerd needs root")
	}
	script, err := filepath.Abs("../../scripts/dockerd.sh")
	if err != nil {
		t.Fatal(err)
	}
	run, data := "/run/execbox-test-restart", "/var/lib/execbox-test/docker-restart"
	dockerd := func(action string) {
		t.Helper()
		cmd := exec.Command("bash", script, action)
		cmd.Env = append(os.Environ(), "EXECBOX_DOCKERD_RUN="+run, "EXECBOX_DOCKERD_DATA="+data)
		if out, err := cmd.CombinedOutput(); err != nil {
			testutil.SkipOrFail(t, Name, "scripts/dockerd.sh %s: %v\n%s", action, err, out)
		}
	}
	dockerd("start")
	t.Cleanup(func() { dockerd("stop") })
	host := "unix://" + run + "/docker.sock"
	b := newBackend(t, Config{Host: host})
	ctx := context.Background()
	if _, err := b.cli.ImageInspect(ctx, b.cfg.Image); err != nil {
		importImage(t, host, b.cfg.Image)
	}
	if res := testutil.Sh(t, b, sandbox.Spec{}, "echo up"); res.Stdout != "up\n" {
		t.Fatalf("before: %s", describe(res))
	}

	dockerd("stop")
	h := b.Health(ctx)
	if h.Available || !strings.Contains(h.Reason, run) {
		t.Errorf("health with the engine down: %+v", h)
	}
	_, err = sandbox.Run(ctx, b, sandbox.Spec{}, &sandbox.Process{Args: []string{"/bin/true"}})
	if !errors.Is(err, sandbox.ErrUnavailable) || sandbox.CodeOf(err) != "engine_unavailable" || !strings.Contains(err.Error(), run) {
		t.Errorf("run with the engine down: %v", err)
	}
	t.Logf("engine down: health %q; run: %v", h.Reason, err)

	dockerd("start")
	if res := testutil.Sh(t, b, sandbox.Spec{}, "echo back"); res.Stdout != "back\n" {
		t.Errorf("after the engine came back: %s", describe(res))
	}
	if h := b.Health(ctx); !h.Ready {
		t.Errorf("health after the engine came back: %+v", h)
	}
}

var importOnce sync.Mutex

// importImage builds the offline python image into the engine at host.
func importImage(t *testing.T, host, ref string) {
	t.Helper()
	importOnce.Lock()
	defer importOnce.Unlock()
	r, err := image.Lookup("python", "/")
	if err != nil {
		testutil.SkipOrFail(t, Name, "no offline image recipe on this host: %v", err)
	}
	if _, _, err := ImportOffline(context.Background(), host, r, ref, image.Options{}); err != nil {
		t.Fatalf("importing %s into %s: %v", ref, host, err)
	}
}

// TestPool: with docker.pool_size, Create takes a container started ahead
// that has run nothing but its keeper, for one sandbox only; the pool is
// refilled after the sandbox closes; Backend.Close removes what it holds.
func TestPool(t *testing.T) {
	b := newBackend(t, Config{PoolSize: 2, IdleTimeout: 10 * time.Minute})
	ctx := context.Background()
	waitSize := func(want int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for b.warm.size() != want {
			if time.Now().After(deadline) {
				t.Fatalf("pool holds %d containers, want %d", b.warm.size(), want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	first := create(t, b, sandbox.Spec{})
	if err := first.Close(ctx); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{first.(*Sandbox).c.id: true}
	for i := range 3 {
		waitSize(2)
		sb := create(t, b, sandbox.Spec{})
		c := sb.(*Sandbox).c
		if seen[c.id] {
			t.Fatalf("sandbox %d got container %s again", i, c.name)
		}
		seen[c.id] = true
		if sb.ID() != c.run || c.name != "execbox-"+sb.ID() {
			t.Errorf("sandbox %s in container %s (run %s)", sb.ID(), c.name, c.run)
		}
		if time.Since(c.started) < 10*time.Millisecond {
			t.Errorf("container %s started %v ago: not one started ahead", c.name, time.Since(c.started))
		}
		// Fresh: nothing is in its dirs, no process but the keeper and
		// this run's (the wrapper, its substitution and the program).
		res := testutil.Exec(t, sb, "/bin/sh", "-c", `find /work /tmp /dev/shm -mindepth 1 | wc -l; n=0; for p in /proc/[0-9]*; do n=$((n+1)); done; echo $n; echo mark > /work/m; echo mark > /tmp/m`)
		if !res.Succeeded() || res.Stdout != "0\n4\n" {
			t.Errorf("sandbox %d does not start fresh: %s", i, describe(res))
		}
		if err := sb.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	waitSize(2)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if left := execboxContainers(t, b, b.instance); len(left) > 0 {
		t.Errorf("pooled containers left after Backend.Close: %v", left)
	}
}

// TestPoolProfiles: only the most recently used profiles keep containers
// started ahead; and idle ones go after docker.idle_timeout.
func TestPoolProfiles(t *testing.T) {
	b := newBackend(t, Config{PoolSize: 1, IdleTimeout: 10 * time.Minute})
	ctx := context.Background()
	var keys []string
	for i := range maxWarmProfiles + 2 {
		spec := sandbox.Spec{Labels: map[string]string{"profile": strconv.Itoa(i)}}
		sb := create(t, b, spec)
		sb.Close(ctx)
		keys = append(keys, poolKey(sb.(*Sandbox).spec))
	}
	deadline := time.Now().Add(60 * time.Second)
	for b.warm.size() != maxWarmProfiles && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	b.warm.mu.Lock()
	held := map[string]int{}
	for k, q := range b.warm.idle {
		held[k] = len(q)
	}
	b.warm.mu.Unlock()
	for i, k := range keys {
		if want := i >= 2; (held[k] == 1) != want {
			t.Errorf("profile %d holds %d containers; want the %d most recent profiles to hold one each", i, held[k], maxWarmProfiles)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	short := newBackend(t, Config{PoolSize: 1, IdleTimeout: 500 * time.Millisecond})
	sb := create(t, short, sandbox.Spec{})
	sb.Close(ctx)
	deadline = time.Now().Add(60 * time.Second)
	for short.warm.size() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if short.warm.size() != 1 {
		t.Fatalf("the pool was never refilled")
	}
	deadline = time.Now().Add(30 * time.Second)
	for short.warm.size() != 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if left := execboxContainers(t, short, short.instance); len(left) > 0 || short.warm.size() != 0 {
		t.Errorf("idle pooled containers not removed after the idle timeout: %v", left)
	}
}

// writerFunc is a func as an io.Writer.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
