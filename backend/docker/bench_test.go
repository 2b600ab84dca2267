package docker

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	v1 "github.com/execbox/execbox/api/v1"
	exclient "github.com/execbox/execbox/client"
	"github.com/execbox/execbox/engine"
	"github.com/execbox/execbox/internal/daemon/server"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
)

// The docker benchmarks compare execbox with the docker CLI doing the same,
// side by side in one run: every iteration runs each variant once, in a
// rotating order (testutil.SideBySide), and each variant's median and 90th
// percentile are reported as <variant>-p50-ms and -p90-ms. Run with
// -benchtime=30x or so:
//
//	go test -run '^$' -bench . -benchtime 30x ./backend/docker/
//
// OneShot: a whole one-shot run of /bin/true.
//
//	cli        docker run --rm with the backend's hardening flags
//	raw-api    the same container through the bare Engine API with
//	           /bin/true as its command: create, attach, start, wait,
//	           remove (the Engine API's floor for docker run --rm)
//	lib        sandbox.Run on the backend without a pool: every run
//	           creates, attaches and starts a container
//	lib-pool   the same with docker.pool_size 1 (the default): a run takes
//	           a container started ahead, which is refilled in the background
//	engine     engine.Run (selection, health, policy, limits) on an
//	           engine with a backend like lib's
//	http       POST /v1/runs of the real HTTP handler on loopback, through
//	           the Go client, on an engine with the backend of lib
//	http-pool  the same on an engine with the backend of lib-pool
//
// The backends behind lib, lib-pool, engine, http and http-pool report the
// median of each step they trace (see tracer: the contract's methods, and
// within them every Engine API call and phase: create, attach, start, run,
// stop, stat-artifacts, …; a pool's refills and the background removals
// are traced too) as <variant>/<step>-p50-ms, so that a run is laid out
// call by call; <variant>/outside-p50-ms (and -p90-ms) is, per request,
// the time outside the backend's methods: sandbox.Run, the engine
// (selection, health, policy), the server and the HTTP round trip.
//
// Exec: one run of /bin/true in a running reused container (what a run
// costs once a container is there) against `docker exec`; raw-api is a
// bare Engine API exec (create, attach, inspect), lib the backend's run
// through the container's keeper, lib-exec the backend's run through an
// exec (the path a stdin stream takes), reused-run a whole
// sandbox.Run of a scope (lease, run, artifacts, wipe).
func BenchmarkOneShot(b *testing.B) {
	needCLI(b)
	cold := newBackend(b, Config{})
	warm := newBackend(b, Config{PoolSize: 1})
	eng := newHTTP(b, Config{})
	hcold := newHTTP(b, Config{})
	hwarm := newHTTP(b, Config{PoolSize: 1})
	traces := map[string]*steps{
		"lib": traceSteps(b, cold), "lib-pool": traceSteps(b, warm), "engine": traceSteps(b, eng.db),
		"http": traceSteps(b, hcold.db), "http-pool": traceSteps(b, hwarm.db),
	}
	outs := map[string]*outside{}
	for name, st := range traces {
		outs[name] = &outside{s: st}
	}
	args := cliRunArgs(b, cold)
	n := 0
	oneShot := func(db *Backend) func() error {
		return func() error {
			res, err := sandbox.Run(context.Background(), db, sandbox.Spec{}, &sandbox.Process{Args: []string{"/bin/true"}})
			return check(res, err)
		}
	}
	testutil.SideBySide(b, []testutil.Variant{
		{Name: "cli", Run: func() error {
			n++
			a := slices.Clone(args)
			a[slices.Index(a, "NAME")] = fmt.Sprintf("execbox-bench-%d-%d", os.Getpid(), n)
			out, err := exec.Command("docker", a...).CombinedOutput()
			if err != nil {
				return fmt.Errorf("docker %v: %v: %s", a, err, out)
			}
			return nil
		}},
		{Name: "raw-api", Run: func() error { return rawRun(cold) }},
		{Name: "lib", Run: outs["lib"].wrap(oneShot(cold))},
		{Name: "lib-pool", Run: outs["lib-pool"].wrap(oneShot(warm))},
		{Name: "engine", Run: outs["engine"].wrap(func() error {
			res, err := eng.e.Run(context.Background(), sandbox.Selection{}, sandbox.Spec{}, &sandbox.Process{Args: []string{"/bin/true"}})
			return check(res, err)
		})},
		{Name: "http", Run: outs["http"].wrap(hcold.run)},
		{Name: "http-pool", Run: outs["http-pool"].wrap(hwarm.run)},
	})
	for _, name := range []string{"lib", "lib-pool", "engine", "http", "http-pool"} {
		traces[name].report(name + "/")
		outs[name].report(b, name)
	}
}

func BenchmarkExec(b *testing.B) {
	needCLI(b)
	db := newBackend(b, Config{ReuseContainer: true})
	sb := create(b, db, sandbox.Spec{Scope: "bench"})
	reused := newBackend(b, Config{ReuseContainer: true})
	id := sb.(*Sandbox).c.id
	run := func(p *sandbox.Process) func() error {
		return func() error {
			res, err := sb.Exec(context.Background(), p)
			return check(res, err)
		}
	}
	testutil.SideBySide(b, []testutil.Variant{
		{Name: "cli", Run: func() error {
			out, err := exec.Command("docker", "exec", "-i", "-u", sandboxUser, "-w", workDir, id, "/bin/true").CombinedOutput()
			if err != nil {
				return fmt.Errorf("docker exec: %v: %s", err, out)
			}
			return nil
		}},
		{Name: "raw-api", Run: func() error { return rawExec(db, id, "/bin/true") }},
		{Name: "lib", Run: run(&sandbox.Process{Args: []string{"/bin/true"}})},
		{Name: "lib-exec", Run: func() error {
			return run(&sandbox.Process{Args: []string{"/bin/true"}, Stdin: onlyReader{strings.NewReader("")}})()
		}},
		{Name: "reused-run", Run: func() error {
			res, err := sandbox.Run(context.Background(), reused, sandbox.Spec{Scope: "bench"}, &sandbox.Process{Args: []string{"/bin/true"}})
			return check(res, err)
		}},
	})
}

// httpEnv is the HTTP API over an engine whose one backend is docker.
type httpEnv struct {
	e  *engine.Engine
	c  *exclient.Client
	db *Backend
}

// newHTTP serves the real HTTP handler on loopback over an engine with the
// docker backend of cfg (no audit log, no tokens). Its health is probed
// at the start only, so that no probe runs in the middle of the numbers.
func newHTTP(b *testing.B, cfg Config) *httpEnv {
	b.Helper()
	newBackend(b, Config{}) // gate: skip without an engine
	cfg.Image = testImage()
	e, err := engine.New(engine.Options{
		Backend: Name, Backends: []string{Name}, MaxRuns: 8, ProbeInterval: time.Hour,
		Settings: func(string) sandbox.Settings {
			return sandbox.Settings{Config: &cfg, Instance: "bench-http", Defaults: sandbox.Defaults}
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	e.Start()
	b.Cleanup(e.Close)
	srv, err := server.New(server.Options{Engine: e})
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	b.Cleanup(ts.Close)
	c, err := exclient.New(ts.URL)
	if err != nil {
		b.Fatal(err)
	}
	be, _ := e.Backend(Name)
	return &httpEnv{e: e, c: c, db: be.(*Backend)}
}

func (h *httpEnv) run() error {
	res, err := h.c.Run(context.Background(), &v1.RunRequest{Command: []string{"/bin/true"}})
	return check(res, err)
}

// rawRun is `docker run --rm IMAGE /bin/true` with the backend's hardening,
// through the Engine API.
func rawRun(db *Backend) error {
	ctx := context.Background()
	spec := sandbox.Spec{Image: db.cfg.Image, Limits: sandbox.Limits{}.WithDefaults(db.defaults)}
	labels := db.labels(spec, sandbox.NewID(), "sandbox", "")
	hc, err := db.hostConfig(spec, labels)
	if err != nil {
		return err
	}
	hc.AutoRemove = false // removed below, as docker run --rm's client waits for
	cfg := &container.Config{Image: spec.Image, User: sandboxUser, Cmd: []string{"/bin/true"}, Entrypoint: []string{},
		WorkingDir: workDir, Labels: labels, AttachStdout: true, AttachStderr: true}
	c, err := db.cli.ContainerCreate(ctx, client.ContainerCreateOptions{Config: cfg, HostConfig: hc})
	if err != nil {
		return err
	}
	defer db.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	at, err := db.cli.ContainerAttach(ctx, c.ID, client.ContainerAttachOptions{Stream: true, Stdout: true, Stderr: true})
	if err != nil {
		return err
	}
	defer at.Close()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wait := db.cli.ContainerWait(wctx, c.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	if _, err := db.cli.ContainerStart(ctx, c.ID, client.ContainerStartOptions{}); err != nil {
		return err
	}
	stdcopy.StdCopy(io.Discard, io.Discard, at.Reader)
	select {
	case r := <-wait.Result:
		if r.StatusCode != 0 {
			return fmt.Errorf("exit %d", r.StatusCode)
		}
	case err := <-wait.Error:
		return err
	}
	return nil
}

// rawExec is `docker exec ID ARGS` through the Engine API: create, start
// attached, read to the end, inspect for the exit code.
func rawExec(db *Backend, id string, args ...string) error {
	ctx := context.Background()
	ex, err := db.cli.ExecCreate(ctx, id, client.ExecCreateOptions{Cmd: args, User: sandboxUser, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return err
	}
	hj, err := db.cli.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		return err
	}
	stdcopy.StdCopy(io.Discard, io.Discard, hj.Reader)
	hj.Close()
	for {
		in, err := db.cli.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{})
		if err != nil {
			return err
		}
		if !in.Running {
			if in.ExitCode != 0 {
				return fmt.Errorf("exit %d", in.ExitCode)
			}
			return nil
		}
		time.Sleep(time.Millisecond)
	}
}

func needCLI(b *testing.B) {
	testutil.RequiresBinary(b, Name, "docker") // the CLI to compare with
}

// cliRunArgs is `docker run --rm` with the flags the backend uses for a
// default Spec (seed 004's and execbox's additions), the seccomp profile
// from a file, and "NAME" as a placeholder for the container name.
func cliRunArgs(b *testing.B, db *Backend) []string {
	needCLI(b)
	prof, err := seccompProfile()
	if err != nil {
		b.Fatal(err)
	}
	pf := filepath.Join(b.TempDir(), "seccomp.json")
	if err := os.WriteFile(pf, prof, 0o644); err != nil {
		b.Fatal(err)
	}
	l := sandbox.Limits{}.WithDefaults(db.defaults)
	cpu := strconv.FormatInt(int64(l.CPUTime/time.Second), 10)
	return []string{
		"run", "--rm", "--pull=never", "--name", "NAME", "-i",
		"--network=none", "--read-only", "--cap-drop=ALL",
		"--security-opt=no-new-privileges", "--security-opt=seccomp=" + pf,
		"--pids-limit=" + strconv.Itoa(l.Pids+ownPids),
		"--memory=" + strconv.FormatInt(l.Memory, 10), "--memory-swap=" + strconv.FormatInt(l.Memory, 10),
		"--cpus=" + strconv.FormatFloat(l.CPUs, 'f', -1, 64), "--user=" + sandboxUser,
		"--tmpfs=/tmp:rw,nosuid,nodev,noexec,size=" + strconv.FormatInt(l.TmpSize, 10) + ",mode=1777",
		"--mount=type=volume,dst=/work,volume-driver=local,volume-opt=type=tmpfs,volume-opt=device=tmpfs," +
			`"volume-opt=o=size=` + strconv.FormatInt(l.WorkSize, 10) + `,uid=65534,gid=65534,mode=0700,nosuid,nodev,noexec"`,
		"--shm-size=" + strconv.Itoa(shmSize), "--ipc=private", "--cgroupns=private",
		"--ulimit=nofile=" + strconv.Itoa(l.NoFile) + ":" + strconv.Itoa(l.NoFile),
		"--ulimit=fsize=" + strconv.FormatInt(l.FileSize, 10),
		"--ulimit=cpu=" + cpu + ":" + strconv.FormatInt(int64(l.CPUTime/time.Second)+1, 10),
		"--log-driver=none", "--workdir=/work", "--entrypoint=",
		db.cfg.Image, "/bin/true",
	}
}

func check(res *sandbox.Result, err error) error {
	if err != nil {
		return err
	}
	if !res.Succeeded() {
		return fmt.Errorf("not a success: %s", describe(res))
	}
	return nil
}

// steps collects how long each traced step of a backend took, in order.
type steps struct {
	b   *testing.B
	mu  sync.Mutex
	log []step
}

type step struct {
	name string
	d    time.Duration
}

func traceSteps(b *testing.B, db *Backend) *steps {
	s := &steps{b: b}
	t := tracer(func(name string, d time.Duration) {
		s.mu.Lock()
		s.log = append(s.log, step{name, d})
		s.mu.Unlock()
	})
	db.trace.Store(&t)
	return s
}

// mark is where the log is now.
func (s *steps) mark() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.log)
}

// inside is the time spent in the contract's methods (Create, WriteFiles,
// Exec, Artifacts, Close) since mark: what the backend itself took of a
// request.
func (s *steps) inside(mark int) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var d time.Duration
	for _, st := range s.log[mark:] {
		switch st.name {
		case "Create", "WriteFiles", "Exec", "Artifacts", "Close":
			d += st.d
		}
	}
	return d
}

// report reports each step's median as <prefix><step>-p50-ms.
func (s *steps) report(prefix string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	by := map[string][]time.Duration{}
	for _, st := range s.log {
		by[st.name] = append(by[st.name], st.d)
	}
	for k, ds := range by {
		testutil.ReportP50(s.b, prefix+k+"-", ds)
	}
}

// outside wraps a variant's run so that it also records, per call, the
// time spent outside the backend's contract methods (in sandbox.Run, the
// engine, the server and HTTP), reported by report as
// <name>/outside-p50-ms.
type outside struct {
	s  *steps
	ds []time.Duration
}

func (o *outside) wrap(run func() error) func() error {
	return func() error {
		m := o.s.mark()
		start := time.Now()
		err := run()
		o.ds = append(o.ds, time.Since(start)-o.s.inside(m))
		return err
	}
}

func (o *outside) report(b *testing.B, name string) {
	testutil.ReportP50P90(b, name+"/outside-", o.ds)
}
