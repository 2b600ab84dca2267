package all

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox/agent"
	"github.com/execbox/execbox/backend/kubernetes"
	"github.com/execbox/execbox/function"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
	"github.com/execbox/execbox/tool"
)

// BenchmarkPython runs `python3 -I -S -c pass` to its end, side by side in
// one run: bare fork/exec on the host, then a one-shot sandbox (Create, Exec,
// Close) on every registered backend that is available here. It reports
// the median as p50-ms; a backend that is not available is skipped with
// its reason.
func BenchmarkPython(b *testing.B) {
	// The same interpreter everywhere: the host's, which the sandboxes'
	// read-only views (and the offline docker image) are made of.
	args := []string{"/usr/bin/python3", "-I", "-S", "-c", "pass"}
	b.Run("bare", func(b *testing.B) {
		p50(b, func() error { return exec.Command(args[0], args[1:]...).Run() })
	})
	root := reachableRoot(b)
	eachBackend(b, root, func(b *testing.B, name string, be sandbox.Backend) {
		p50(b, func() error {
			res, err := sandbox.Run(context.Background(), be, sandbox.Spec{}, &sandbox.Process{Args: args})
			if err == nil && !res.Succeeded() {
				b.Fatalf("%s: %s %d %s", name, res.Reason, res.ExitCode, res.Stderr)
			}
			return err
		})
	})
}

// reachableRoot is a temp dir for work roots (and the tool runtime) that
// bwrap, which runs as 65534, can reach.
func reachableRoot(b *testing.B) string {
	root := b.TempDir()
	os.Chmod(root, 0o711)
	for d := filepath.Dir(root); d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		os.Chmod(d, 0o711)
	}
	return root
}

// settings are backend name's for a benchmark: its work root under root;
// for kubernetes, the cluster $KUBECONFIG names (scripts/k8s.sh) with the
// images test.sh loaded, else it is not configured (and skipped).
func settings(name, root string) sandbox.Settings {
	s := sandbox.Settings{WorkRoot: filepath.Join(root, name)}
	if name == kubernetes.Name && os.Getenv("KUBECONFIG") != "" {
		c := kubernetes.DefaultConfig()
		c.Kubeconfig, c.PullPolicy = os.Getenv("KUBECONFIG"), "Never"
		// One warm Pod, as a fixed pool: five calls measure a Pod's
		// start against a warm one, not a pool growing beside them.
		c.WarmMax = c.Warm
		s.Config = c
	}
	return s
}

// eachBackend runs f as a sub-benchmark on every registered backend but
// local that is available and ready here (the others are skipped with
// their reason, or fail when EXECBOX_REQUIRE names them), each with its
// work root under root.
func eachBackend(b *testing.B, root string, f func(b *testing.B, name string, be sandbox.Backend)) {
	for _, name := range sandbox.Names() {
		if name == "local" {
			continue
		}
		b.Run(name, func(b *testing.B) {
			r, _ := sandbox.Lookup(name)
			be, err := r.New(settings(name, root))
			if err != nil {
				testutil.SkipOrFail(b, name, "%s: %v", name, err)
			}
			if c, ok := be.(interface{ Close() error }); ok {
				defer c.Close()
			}
			if h := be.Health(context.Background()); !h.Available || !h.Ready {
				testutil.SkipOrFail(b, name, "%s: %s", name, h.Reason)
			}
			f(b, name, be)
		})
	}
}

// BenchmarkSession compares, side by side in one run on every backend
// available here, a one-shot run of /bin/true (Create, Exec, Close) with
// an Exec of it in a sandbox kept open (a session's exec) and with one
// through the session's agent; and a one-shot Python function call
// (function.Executor: a sandbox per call) with a call in a Python context
// of an open session (the agent's kernel: state kept).
func BenchmarkSession(b *testing.B) {
	root := reachableRoot(b)
	p := &sandbox.Process{Args: []string{"/bin/true"}}
	for _, name := range sandbox.Names() {
		if name == "local" {
			continue
		}
		r, _ := sandbox.Lookup(name)
		be, err := r.New(settings(name, root))
		if err != nil {
			b.Logf("%s: %v", name, err)
			continue
		}
		ctx := context.Background()
		if h := be.Health(ctx); !h.Available || !h.Ready {
			b.Logf("%s: %s", name, h.Reason)
			if c, ok := be.(interface{ Close() error }); ok {
				c.Close()
			}
			continue
		}
		b.Run(name+"/oneshot", func(b *testing.B) {
			p50(b, func() error {
				_, err := sandbox.Run(ctx, be, sandbox.Spec{}, p)
				return err
			})
		})
		b.Run(name+"/session_exec", func(b *testing.B) {
			sb, err := be.Create(ctx, sandbox.Spec{})
			if err != nil {
				b.Fatal(err)
			}
			defer sb.Close(ctx)
			p50(b, func() error {
				res, err := sb.Exec(ctx, p)
				if err == nil && !res.Succeeded() {
					b.Fatalf("%s: %s %d %s", name, res.Reason, res.ExitCode, res.Stderr)
				}
				return err
			})
		})
		// The session's agent: one lasting process in the sandbox.
		sb, err := be.Create(ctx, sandbox.Spec{})
		if err != nil {
			b.Fatal(err)
		}
		a, err := agent.Start(ctx, sb, 10*time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		l := sandbox.Limits{Wall: 10 * time.Second, Output: sandbox.MiB}
		b.Run(name+"/agent_exec", func(b *testing.B) {
			p50(b, func() error {
				res, err := a.Exec(ctx, p, l)
				if err == nil && !res.Succeeded() {
					b.Fatalf("%s: %s %d %s", name, res.Reason, res.ExitCode, res.Stderr)
				}
				return err
			})
		})
		fn, err := function.New(function.EngineFunc(func(ctx context.Context, _ sandbox.Selection, spec sandbox.Spec, p *sandbox.Process) (*sandbox.Result, error) {
			return sandbox.Run(ctx, be, spec, p)
		}), function.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name+"/function_oneshot", func(b *testing.B) {
			p50(b, func() error {
				resp := fn.Execute(ctx, &function.Request{Code: "def f(x):\n    return x + 1", Params: []byte(`{"x": 41}`)})
				if !resp.OK || string(resp.Data) != "42" {
					b.Fatalf("%s: %+v", name, resp)
				}
				return nil
			})
		})
		b.Run(name+"/context_call", func(b *testing.B) {
			if err := a.NewContext(ctx, "bench", "python"); err != nil {
				b.Fatal(err)
			}
			defer a.DropContext("bench")
			// The interpreter's start is the context's creation, not a call.
			if _, err := a.RunCode(ctx, "bench", "pass", 10*time.Second, 1024, nil, nil); err != nil {
				b.Fatal(err)
			}
			p50(b, func() error {
				res, err := a.RunCode(ctx, "bench", "x = 41\nx + 1", 10*time.Second, 64*sandbox.KiB, nil, nil)
				if err == nil && (!res.OK || string(res.Value) != "42") {
					b.Fatalf("%s: %+v", name, res)
				}
				return err
			})
		})
		a.Close()
		sb.Close(ctx)
		if c, ok := be.(interface{ Close() error }); ok {
			c.Close()
		}
	}
}

// p50 times run once per iteration and reports the median and the 99th
// percentile.
func p50(b *testing.B, run func() error) {
	var ds []time.Duration
	for b.Loop() {
		start := time.Now()
		if err := run(); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(start))
	}
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2])/float64(time.Millisecond), "p50-ms")
	b.ReportMetric(float64(ds[len(ds)*99/100])/float64(time.Millisecond), "p99-ms")
}

// BenchmarkTool compares, side by side in one run, a tool call (the python
// built-in with {"code": "6 * 7"}: its arguments checked against the cached
// schema, a one-shot sandbox with the runtime mounted read-only, the
// runtime's start, the answer parsed) on every backend with the same
// runtime run bare on the host.
func BenchmarkTool(b *testing.B) {
	root := reachableRoot(b)
	set, err := tool.New(tool.Options{RuntimeDir: filepath.Join(root, "runtime")})
	if err != nil {
		b.Fatal(err)
	}
	call := tool.Call{Name: "python", Args: []byte(`{"code": "6 * 7"}`)}
	b.Run("bare", func(b *testing.B) {
		// The runtime as the sandbox runs it, from where Set wrote it.
		runtime, err := filepath.Glob(filepath.Join(root, "runtime", "*", "entry.py"))
		if err != nil || len(runtime) != 1 {
			b.Fatalf("the written runtime: %v %v", runtime, err)
		}
		p50(b, func() error {
			cmd := exec.Command("/usr/bin/python3", "-I", "-B", runtime[0])
			cmd.Env = []string{"EXECBOX_TOOL_ACTION=run", "EXECBOX_TOOL_NAME=python", "EXECBOX_TOOL_ARGS=" + string(call.Args)}
			cmd.Dir = b.TempDir()
			out, err := cmd.Output()
			if err == nil && !strings.Contains(string(out), `"value": 42`) && !strings.Contains(string(out), `"value":42`) {
				b.Fatalf("bare: %s", out)
			}
			return err
		})
	})
	// local mounts nothing: tools are refused there, and eachBackend
	// leaves it out. A Pod has no host paths to mount the runtime from.
	eachBackend(b, root, func(b *testing.B, name string, be sandbox.Backend) {
		if name == kubernetes.Name {
			b.Skip("a tool's runtime is mounted from this host, and a sandbox Pod has no host paths")
		}
		ctx := context.Background()
		run := func(ctx context.Context, spec sandbox.Spec, p *sandbox.Process) (*sandbox.Result, error) {
			return sandbox.Run(ctx, be, spec, p)
		}
		if _, err := set.List(ctx, run); err != nil {
			b.Fatal(err)
		}
		p50(b, func() error {
			res, err := set.Run(ctx, run, call)
			if err == nil && !res.OK {
				b.Fatalf("%s: %+v", name, res.Error)
			}
			return err
		})
	})
}
