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
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/execbox/execbox/internal/image"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
)

// holderEnv makes the test binary a helper that holds a reused container
// until it is killed (see TestNoOrphans).
const holderEnv = "EXECBOX_DOCKER_HOLDER"

func TestMain(m *testing.M) {
	if os.Getenv(holderEnv) != "" {
		os.Exit(holderMain())
	}
	os.Exit(m.Run())
}

// holderMain leases a reused container, says so and waits to be killed.
func holderMain() int {
	b, err := NewWithConfig(Config{Image: testImage(), ReuseContainer: true}, sandbox.Settings{Instance: "test-holder"})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	ctx := context.Background()
	sb, err := b.Create(ctx, sandbox.Spec{Scope: "held"})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	res, err := sb.Exec(ctx, &sandbox.Process{Args: []string{"/bin/sh", "-c", "echo busy > /work/state"}})
	if err != nil || !res.Succeeded() {
		fmt.Println("error", err, describe(res))
		return 1
	}
	fmt.Println("holding", sb.(*Sandbox).c.name)
	time.Sleep(time.Hour)
	return 0
}

// TestNoOrphans: after a run that timed out, a cancelled run, and a kill -9
// of a process holding a reused container followed by a fresh start, the
// engine has no execbox container.
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

	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(500*time.Millisecond, cancel)
	res, err := sandbox.Run(cctx, b, sandbox.Spec{}, &sandbox.Process{Args: []string{"/bin/sh", "-c", "sleep 100"}})
	if err != nil || res.Reason != sandbox.ReasonCanceled {
		t.Errorf("cancelled run: %v %s", err, describe(res))
	}
	if left := execboxContainers(t, b, b.instance); len(left) > 0 {
		t.Errorf("after a cancelled run: %v", left)
	}

	// A child execbox holds a reused container; while it lives, a fresh
	// backend's reconciliation leaves the container alone.
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), holderEnv+"=1")
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
	alive := newBackend(t, Config{})
	if r, err := alive.Reconcile(ctx); err != nil || len(r) > 0 {
		t.Errorf("reconciling while the holder lives removed %v (%v)", r, err)
	}
	if got := execboxContainers(t, b, "test-holder"); !slices.Contains(got, "/"+name) {
		t.Fatalf("the live holder's container was removed: %v", got)
	}

	// kill -9: nothing of the holder runs its cleanup.
	cmd.Process.Kill()
	cmd.Wait()
	if got := execboxContainers(t, b, "test-holder"); !slices.Contains(got, "/"+name) {
		t.Fatalf("the container vanished by itself; the check below proves nothing: %v", got)
	}
	// A fresh start reconciles on its first contact with the engine.
	fresh := newBackend(t, Config{})
	fresh.Health(ctx)
	// Other test packages may run sandboxes on the same engine right now;
	// what must be gone is everything of this test and of any dead owner.
	list, err := b.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", LabelOwner)})
	if err != nil {
		t.Fatal(err)
	}
	mine := []string{"test-holder", b.instance, alive.instance, fresh.instance}
	for _, c := range list.Items {
		o, _ := parseOwner(c.Labels[LabelOwner])
		if slices.Contains(mine, c.Labels[LabelInstance]) || o.dead(b.me) {
			t.Errorf("after a fresh start, container %v (instance %s) is left", c.Names, c.Labels[LabelInstance])
		}
	}
	t.Logf("kill -9'd holder's %s removed by the fresh start; execbox containers on the engine now: %d", name, len(list.Items))
}

// TestReconcileExpiry: a container of an owner execbox cannot check (another
// machine) is removed once expired, and only then.
func TestReconcileExpiry(t *testing.T) {
	b := newBackend(t, Config{})
	ctx := context.Background()
	other := owner{host: "elsewhere", boot: "b", pidns: "p", pid: 1, start: "1"}
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
	b := newBackend(t, Config{ReuseContainer: true, IdleTimeout: 700 * time.Millisecond})
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
	deadline := time.Now().Add(10 * time.Second)
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
