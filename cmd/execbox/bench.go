package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/backend/docker"
	"github.com/execbox/execbox/client"
	"github.com/execbox/execbox/engine"
	"github.com/execbox/execbox/function"
	"github.com/execbox/execbox/internal/daemon/bench"
	"github.com/execbox/execbox/internal/daemon/config"
	"github.com/execbox/execbox/internal/daemon/server"
	"github.com/execbox/execbox/internal/host/nsinit"
	"github.com/execbox/execbox/internal/host/proc"
)

// The benchmark's call: a small JSON-in, JSON-out Python function.
const (
	benchCode   = "def main(x):\n    return {\"y\": x + 1}\n"
	benchParams = `{"x": 41}`
)

func newBenchCmd(g *globals) *cobra.Command {
	var backends []string
	var concs []int
	var rounds int
	var rateFor time.Duration
	var asJSON bool
	var htmlFile string
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Time one small Python function call every way execbox and its peers can make it, side by side",
		Long: `bench makes the same small function call (JSON in, JSON out) in
interleaved rounds — one call of every subject per round, so that drift
falls on all alike — and reports p50/p90/p99 and the ratio to bare exec:

  bare          the runner started directly on the host (python3 on stdin)
  raw bwrap     the same under a plain bwrap --unshare-all, where bwrap is
  docker run / docker exec   the docker CLI, where a docker engine answers
  B cold        a fresh sandbox of backend B per call (library, HTTP)
  B warm        a call that finds a pooled sandbox ready (library, HTTP)

then calls per second at each --concurrency for bare, and the default
backend cold and warm, and what an idle pooled sandbox holds (RSS of all its
processes, and its cgroup's memory). --json and --html FILE (a page with a
chart) write the report too.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, _, err := g.loadConfig()
			if err != nil {
				return err
			}
			r, err := runBench(cmd.Context(), cfg, backends, rounds, concs, rateFor, !asJSON)
			if err != nil {
				return err
			}
			if htmlFile != "" {
				f, err := os.Create(htmlFile)
				if err != nil {
					return err
				}
				if err := errors.Join(r.HTML(f), f.Close()); err != nil {
					return err
				}
			}
			if asJSON {
				return r.JSON(os.Stdout)
			}
			r.Table(os.Stdout)
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&backends, "backends", nil, "backends to measure (default: every ready isolating one)")
	cmd.Flags().IntVar(&rounds, "rounds", 30, "interleaved rounds: calls per subject")
	cmd.Flags().IntSliceVar(&concs, "concurrency", []int{1, 2, 4, 8}, "callers at once for calls per second (none: skip)")
	durationVar(cmd.Flags(), &rateFor, "rate-time", 3*time.Second, "how long each calls-per-second measure runs")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	cmd.Flags().StringVar(&htmlFile, "html", "", "also write the report as an HTML page with a chart to `FILE`")
	return cmd
}

// runBench builds the subjects and measures them.
func runBench(ctx context.Context, cfg *config.Config, names []string, rounds int, concs []int, rateFor time.Duration, progress bool) (*bench.Report, error) {
	say := func(format string, args ...any) {
		if progress {
			fmt.Fprintf(os.Stderr, format+"\n", args...)
		}
	}
	req := &function.Request{Code: benchCode, Params: []byte(benchParams)}
	in, err := req.Input()
	if err != nil {
		return nil, err
	}
	calls := func(o *engine.Options) { o.MaxRuns = 64 }
	fo := functionOptions(cfg)
	fo.Concurrency, fo.QueueTimeout = 64, time.Minute
	// The warm pools keep Python runners alone.
	c := *cfg
	cfg = &c
	cfg.Pools.Languages = []string{string(function.Python)}
	cold, err := newEngine(cfg, calls, func(o *engine.Options) { o.Pools = engine.PoolOptions{} })
	if err != nil {
		return nil, err
	}
	defer cold.Close()
	cold.Start()
	coldFx, err := function.New(function.EngineFunc(cold.Call), fo)
	if err != nil {
		return nil, err
	}
	rep := cold.Report(ctx)
	if names == nil {
		for _, c := range rep.Candidates {
			if c.Ready && !c.Unisolated {
				names = append(names, c.Name)
			}
		}
	}
	r := &bench.Report{Time: time.Now(), Host: hostLine(), Workload: "a Python function call (JSON in, JSON out)", Rounds: rounds}
	var ready []string
	for _, n := range names {
		c := candidate(rep, n)
		switch {
		case c == nil:
			return nil, fmt.Errorf("--backends: %q is not a backend here", n)
		case !c.Ready:
			r.Skipped = append(r.Skipped, n+": "+c.Reason)
		default:
			ready = append(ready, n)
		}
	}
	warmOpts := engine.PoolOptions{Size: 2, Backends: ready, MaxIdleMemory: 64 << 30, Refill: 2}
	warm, err := newEngine(cfg, calls, func(o *engine.Options) { o.Pools = warmOpts })
	if err != nil {
		return nil, err
	}
	defer warm.Close()
	warm.Start()
	warmFx, err := function.New(function.EngineFunc(warm.Call), fo)
	if err != nil {
		return nil, err
	}
	coldHTTP, stopCold, err := benchServer(ctx, cold, coldFx)
	if err != nil {
		return nil, err
	}
	defer stopCold()
	warmHTTP, stopWarm, err := benchServer(ctx, warm, warmFx)
	if err != nil {
		return nil, err
	}
	defer stopWarm()

	_, args := function.Template(function.Python, fo)
	var subjects []bench.Subject
	bare, why := bareSubject(args, in)
	if bare == nil {
		return nil, fmt.Errorf("bare exec of the runner: %s", why)
	}
	subjects = append(subjects, *bare)
	if s, why := rawBwrapSubject(args, in); s != nil {
		subjects = append(subjects, *s)
	} else {
		r.Skipped = append(r.Skipped, "raw bwrap: "+why)
	}
	if slices.Contains(ready, "docker") {
		ss, stop, why := dockerCLISubjects(ctx, cfg, args, in)
		defer stop()
		if ss == nil {
			r.Skipped = append(r.Skipped, "docker CLI: "+why)
		}
		subjects = append(subjects, ss...)
	}
	for _, b := range ready {
		lib := func(fx *function.Executor) func(context.Context) error {
			return func(ctx context.Context) error {
				req := &function.Request{Code: benchCode, Params: []byte(benchParams), Backend: b}
				return fnErr(fx.Execute(ctx, req))
			}
		}
		http := func(c *client.Client) func(context.Context) error {
			return func(ctx context.Context) error {
				resp, err := c.Execute(ctx, &v1.FunctionRequest{Code: benchCode, Params: []byte(benchParams), Backend: b})
				if err != nil {
					return err
				}
				if !resp.OK {
					return fmt.Errorf("%s: %s", resp.Code, resp.Error)
				}
				return nil
			}
		}
		rate := b == rateBackend(ready)
		subjects = append(subjects,
			bench.Subject{Name: b + " cold", Path: "library", Backend: b, Call: lib(coldFx), Throughput: rate},
			bench.Subject{Name: b + " warm", Path: "library", Backend: b, Call: lib(warmFx), Throughput: rate},
			bench.Subject{Name: b + " cold", Path: "http", Backend: b, Call: http(coldHTTP)},
			bench.Subject{Name: b + " warm", Path: "http", Backend: b, Call: http(warmHTTP)},
		)
	}
	// Every timed call starts with the pools full and nothing being made:
	// a refill would take CPU from the call being timed (the warm ones'
	// refills run between calls).
	quiet := func(ctx context.Context) error { return waitSettled(ctx, warm) }
	for i := range subjects {
		subjects[i].Ready = quiet
	}
	say("waiting for the pools of %s to fill", strings.Join(ready, ", "))
	if err := waitSettled(ctx, warm); err != nil {
		return nil, err
	}
	say("timing %d subjects, %d rounds", len(subjects), rounds)
	r.Latency = bench.Latency(ctx, subjects, rounds)
	for _, s := range subjects {
		if !s.Throughput && s.Path != "host" {
			continue
		}
		for _, c := range concs {
			say("calls per second: %s, %d at once", s.Name, c)
			r.Rates = append(r.Rates, bench.Throughput(ctx, s, c, rateFor))
		}
	}
	// Alone: the other engines' sandboxes gone, so that every process new
	// under this one is the measured pool's.
	stopWarm()
	stopCold()
	warm.Close()
	for _, b := range ready {
		say("measuring an idle pooled %s sandbox", b)
		idle, err := idleSandbox(ctx, cfg, b)
		if err != nil {
			r.Skipped = append(r.Skipped, "idle "+b+": "+err.Error())
			continue
		}
		r.Idle = append(r.Idle, idle)
	}
	return r, nil
}

func candidate(r engine.Report, name string) *engine.Candidate {
	for i := range r.Candidates {
		if r.Candidates[i].Name == name {
			return &r.Candidates[i]
		}
	}
	return nil
}

func fnErr(r *function.Response) error {
	if r.OK {
		return nil
	}
	return fmt.Errorf("%s: %s", r.Code, r.Error)
}

// rateBackend is the backend whose calls per second are measured: native
// where it is ready (the embedded default), else the first.
func rateBackend(ready []string) string {
	if slices.Contains(ready, "native") || len(ready) == 0 {
		return "native"
	}
	return ready[0]
}

// waitSettled waits until every pool of e is full and nothing is being
// made.
func waitSettled(ctx context.Context, e *engine.Engine) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		settled := true
		for _, p := range e.Pools().Pools {
			if p.Filling > 0 || p.Ready < p.Size {
				settled = false
			}
			if p.Error != "" && p.Made == 0 {
				return fmt.Errorf("the %s pool: %s", p.Backend, p.Error)
			}
		}
		if settled {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the pools did not fill within 2 minutes: %+v", e.Pools())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

// benchServer serves e's API, its function calls by fx, on a loopback
// port, for the HTTP subjects.
func benchServer(ctx context.Context, e *engine.Engine, fx *function.Executor) (*client.Client, func(), error) {
	srv, err := server.New(server.Options{Engine: e, Functions: fx})
	if err != nil {
		return nil, nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		srv.Serve(sctx, ln)
		close(done)
	}()
	c, err := client.New("http://" + ln.Addr().String())
	if err != nil {
		cancel()
		return nil, nil, err
	}
	return c, func() { cancel(); <-done }, nil
}

// hostProgram finds a program as the sandboxes do, in their fixed PATH
// (not the caller's, where a shim may stand in front).
func hostProgram(name string) (string, error) {
	return nsinit.LookPath(name, []string{"PATH=/usr/local/bin:/usr/bin:/bin"}, "/")
}

// runnerCall runs argv with in on stdin and checks the runner's answer.
func runnerCall(ctx context.Context, argv []string, in []byte) error {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("%s: %w", argv[0], err)
	}
	if !bytes.Contains(out, []byte(`"ok":true`)) {
		return fmt.Errorf("%s answered %.200q", argv[0], out)
	}
	return nil
}

// bareSubject starts the runner on the host, no sandbox.
func bareSubject(args []string, in []byte) (*bench.Subject, string) {
	prog, err := hostProgram(args[0])
	if err != nil {
		return nil, err.Error()
	}
	argv := append([]string{prog}, args[1:]...)
	return &bench.Subject{Name: "bare", Path: "host", Throughput: true,
		Call: func(ctx context.Context) error { return runnerCall(ctx, argv, in) }}, ""
}

// rawBwrapSubject runs the runner under a plain bwrap with every namespace
// unshared and a read-only view of /usr and /etc: what a hand-rolled
// sandbox costs.
func rawBwrapSubject(args []string, in []byte) (*bench.Subject, string) {
	bw, err := exec.LookPath("bwrap")
	if err != nil {
		return nil, "bwrap is not installed"
	}
	prog, err := hostProgram(args[0])
	if err != nil {
		return nil, err.Error()
	}
	argv := []string{bw, "--unshare-all", "--die-with-parent", "--new-session", "--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc",
		"--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/sbin", "/sbin",
		"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--", prog}
	argv = append(argv, args[1:]...)
	if err := runnerCall(context.Background(), argv, in); err != nil {
		return nil, "it does not run here: " + err.Error()
	}
	return &bench.Subject{Name: "raw bwrap", Path: "cli", Call: func(ctx context.Context) error { return runnerCall(ctx, argv, in) }}, ""
}

// dockerCLISubjects are `docker run --rm -i` and `docker exec -i` into a
// running container, of the configured image, with the docker CLI.
func dockerCLISubjects(ctx context.Context, cfg *config.Config, args []string, in []byte) ([]bench.Subject, func(), string) {
	nop := func() {}
	cli, err := exec.LookPath("docker")
	if err != nil {
		return nil, nop, "the docker CLI is not installed"
	}
	image := docker.DefaultImage
	if c, ok := cfg.BackendConfig("docker").(*docker.Config); ok && c.Image != "" {
		image = c.Image
	}
	run := append([]string{cli, "run", "--rm", "-i", "--network", "none", image}, args...)
	if err := runnerCall(ctx, run, in); err != nil {
		return nil, nop, "docker run: " + err.Error()
	}
	name := "execbox-bench-" + strconv.Itoa(os.Getpid())
	if out, err := exec.CommandContext(ctx, cli, "run", "-d", "--rm", "--network", "none", "--name", name, image, "sleep", "3600").CombinedOutput(); err != nil {
		return nil, nop, fmt.Sprintf("docker run -d: %v: %s", err, out)
	}
	stop := func() { exec.Command(cli, "rm", "-f", name).Run() }
	execArgv := append([]string{cli, "exec", "-i", name}, args...)
	return []bench.Subject{
		{Name: "docker run", Path: "cli", Call: func(ctx context.Context) error { return runnerCall(ctx, run, in) }},
		{Name: "docker exec", Path: "cli", Call: func(ctx context.Context) error { return runnerCall(ctx, execArgv, in) }},
	}, stop, ""
}

// idleSandbox fills a pool of 2 on backend alone in an engine of its own
// and measures what its sandboxes hold: the RSS of every process that is
// new under this one, and the pool's cgroup figure.
func idleSandbox(ctx context.Context, cfg *config.Config, backend string) (bench.Idle, error) {
	before := descendants(os.Getpid())
	const n = 2
	e, err := newEngine(cfg, func(o *engine.Options) {
		// That backend alone: the others' health probes start sandboxes too.
		o.Backends, o.Backend = []string{backend}, backend
		o.Pools = engine.PoolOptions{Size: n, Backends: []string{backend}, MaxIdleMemory: 64 << 30}
	})
	if err != nil {
		return bench.Idle{}, err
	}
	defer e.Close()
	e.Start()
	if err := waitSettled(ctx, e); err != nil {
		return bench.Idle{}, err
	}
	// The runners are ready once their processes stop growing.
	time.Sleep(time.Second)
	var m memory
	for pid := range descendants(os.Getpid()) {
		if !before[pid] {
			m.add(memoryOf(pid))
		}
	}
	idle := bench.Idle{Backend: backend, Sandboxes: n, RSS: m.rss / n, PSS: m.pss / n, Private: m.private / n}
	for _, p := range e.Pools().Pools {
		idle.Cgroup = p.IdleMemory / n
	}
	return idle, nil
}

// descendants are the processes under pid, by their parent links.
func descendants(pid int) map[int]bool {
	parent := proc.Parents()
	out := map[int]bool{}
	for p := range parent {
		for q := parent[p]; q > 1; q = parent[q] {
			if q == pid {
				out[p] = true
				break
			}
		}
	}
	return out
}

// memory is a process's memory from smaps_rollup, in bytes: resident,
// proportional (shared pages split among their users) and private.
type memory struct{ rss, pss, private int64 }

func (m *memory) add(o memory) {
	m.rss, m.pss, m.private = m.rss+o.rss, m.pss+o.pss, m.private+o.private
}

// memoryOf is pid's memory, zero when it is gone.
func memoryOf(pid int) memory {
	var m memory
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
	if err != nil {
		return m
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || f[2] != "kB" {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "Rss:":
			m.rss = kb << 10
		case "Pss:":
			m.pss = kb << 10
		case "Private_Clean:", "Private_Dirty:":
			m.private += kb << 10
		}
	}
	return m
}

// hostLine names the host: kernel, CPUs.
func hostLine() string {
	var u unix.Utsname
	unix.Uname(&u)
	return fmt.Sprintf("Linux %s, %d CPUs", unix.ByteSliceToString(u.Release[:]), runtime.NumCPU())
}
