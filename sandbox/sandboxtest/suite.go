package sandboxtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// Option adjusts the suite for one backend.
type Option func(*config)

type config struct {
	specs     []func(*sandbox.Spec)
	skips     map[string]string
	workRoots []string
	leakRuns  int
	leakHeld  int // fds and goroutines a backend may hold by design (a pool)
	opTimeout time.Duration
	noNode    string // why the sandboxes have no node (WithoutNode)
	rootImage string // an unpacked image (WithRootImage)
}

// WithSpec applies f to every Spec the suite builds, before the suite sets
// the fields a subtest is about (so a backend can set Image, Policy.RootFS,
// …, but cannot weaken what is being tested).
func WithSpec(f func(*sandbox.Spec)) Option {
	return func(c *config) { c.specs = append(c.specs, f) }
}

// Skip skips the named subtests (a name as printed under the suite's test,
// e.g. "timeout/kills_tree", or a prefix of one such as "timeout") and
// reports reason. Every backend is meant to pass everything; a skip is a
// documented, temporary gap.
func Skip(reason string, names ...string) Option {
	return func(c *config) {
		for _, n := range names {
			c.skips[strings.Trim(n, "/")] = reason
		}
	}
}

// WithWorkRoot names directories where the backend keeps per-sandbox state
// (work dirs, rootfs copies). The leak check fails if a run leaves anything
// new in them. The suite always checks os.TempDir().
func WithWorkRoot(dirs ...string) Option {
	return func(c *config) { c.workRoots = append(c.workRoots, dirs...) }
}

// WithLeakRuns sets how many one-shot runs the leak check does (default
// 200; 20 under -short).
func WithLeakRuns(n int) Option {
	return func(c *config) { c.leakRuns = n }
}

// WithLeakHeld lets the leak check allow n more open fds, goroutines,
// child processes and entries in the work roots after the runs than
// before, for a backend that holds resources across sandboxes by design
// (a pool of started containers or booted VMs, each with its connection,
// process and directory). A leak per run still shows: the runs outnumber n.
func WithLeakHeld(n int) Option {
	return func(c *config) { c.leakHeld = n }
}

// WithOpTimeout bounds each Create, WriteFiles, Exec, Artifacts and Close
// the suite makes (default 60 s), so a hanging backend fails instead of
// stalling the test binary.
func WithOpTimeout(d time.Duration) Option {
	return func(c *config) { c.opTimeout = d }
}

// WithoutNode declares that the backend's sandboxes have no node by design
// (reason says why: an image without it): the suite then checks that a
// JavaScript context is refused as language_unavailable instead of checking
// one. Without it, a sandbox without node skips the JavaScript context
// check, or fails it when EXECBOX_REQUIRE names "node".
func WithoutNode(reason string) Option {
	return func(c *config) { c.noNode = reason }
}

type suite struct {
	b    sandbox.Backend
	caps sandbox.Capabilities
	cfg  config
	root string // t.Name() of the suite's test plus "/"
}

// Run runs the conformance suite against b. The subtests (stable names,
// usable with Skip and go test -run):
//
//	exit/{code_0,code_3,code_255,signal_SIGTERM,signal_SIGKILL,
//	      not_found_127,not_found_path_127,not_executable_126,directory_126}
//	stdin/{passthrough_100KiB,nil_is_eof,unread_does_not_block}
//	output/{stdout_stderr_apart,streaming,burst_100k_lines,cap_below,cap_exact,
//	        cap_over_keeps_running,cap_over_by_one,cap_stderr,cap_kill,cap_kill_at_limit}
//	env/{host_secret_hidden,only_allowlisted_names,default_allowlist,
//	     spec_and_process_env,home_tmpdir_private,policy_allowlist}
//	timeout/{within_limit,kills_tree,process_timeout,cancel_kills_tree}
//	files/{write_and_read,process_dir,artifacts_new_only,artifacts_changed_input,
//	       artifacts_rewritten_same_size,artifact_files_limit,artifact_files_at_limit,
//	       artifact_bytes_limit,artifact_bytes_at_limit,run_spec_files}
//	paths/{write_files/<rule>,
//	       accepted/{long_component_255,long_path_4096},atomic,exec_invalid,
//	       symlink/{dir,dir_deep,file,relative,etc,atomic}}
//	symlink_artifacts/{not_followed,special_files}
//	result/fields
//	close/{idempotent,concurrent,during_exec,use_after_close}
//	concurrency/{exec_busy,symlink_race}
//	limits/{pids_fork_bomb,pids_thread_bomb,cpu_quota}
//	syscalls/{allowed/<row>,denied/<row>}
//	fs/{ls_la,stat,python_stat_scandir}
//	io/select_poll_pipe
//	session/{state_persists,files/{round_trip_50MiB,visible_both_ways,bounds,
//	         dirs,symlinks_not_followed}}
//	agent/{contexts,terminal,exec}
//	leaks/runs
//
// where <rule> is one of absolute, dotdot, dotdot_inner, nul, long_component,
// long_path, empty, dot_component, empty_component, trailing_slash, and
// <row> a row of the syscall table (SyscallTable).
//
// The backend must be available (Health); probe and skip before calling Run.
func Run(t *testing.T, b sandbox.Backend, opts ...Option) {
	t.Helper()
	cfg := config{skips: map[string]string{}, leakRuns: 200, opTimeout: 60 * time.Second}
	if testing.Short() {
		cfg.leakRuns = 20
	}
	for _, o := range opts {
		o(&cfg)
	}
	s := &suite{b: b, caps: b.Capabilities(), cfg: cfg, root: t.Name() + "/"}

	ctx, cancel := context.WithTimeout(t.Context(), cfg.opTimeout)
	h := b.Health(ctx)
	cancel()
	if !h.Available {
		t.Fatalf("backend %s is not available (%s); gate the test with a probe before calling sandboxtest.Run", b.Name(), h.Reason)
	}
	t.Logf("backend %s: isolation %s, sessions %v, health: %s", b.Name(), s.caps.Isolation, s.caps.Sessions, h.Reason)

	s.run(t, "exit", s.testExit)
	s.run(t, "stdin", s.testStdin)
	s.run(t, "output", s.testOutput)
	s.run(t, "env", s.testEnv)
	s.run(t, "timeout", s.testTimeout)
	s.run(t, "files", s.testFiles)
	s.run(t, "paths", s.testPaths)
	s.run(t, "symlink_artifacts", s.testSymlinkArtifacts)
	s.run(t, "result", s.testResult)
	s.run(t, "close", s.testClose)
	s.run(t, "concurrency", s.testConcurrency)
	s.run(t, "limits", s.testLimits)
	s.run(t, "syscalls", s.testSyscalls)
	s.run(t, "fs", s.testFS)
	s.run(t, "io", s.testIO)
	s.run(t, "devices", s.testDevices)
	s.run(t, "root_image", s.testRootImage)
	s.run(t, "session", s.testSession)
	s.run(t, "agent", s.testAgent)
	s.run(t, "leaks", s.testLeaks)
}

// run is t.Run honouring Skip.
func (s *suite) run(t *testing.T, name string, f func(t *testing.T)) bool {
	return t.Run(name, func(t *testing.T) {
		rel := strings.TrimPrefix(t.Name(), s.root)
		for n, reason := range s.cfg.skips {
			if rel == n || strings.HasPrefix(rel, n+"/") {
				t.Skipf("skipped for backend %s: %s", s.b.Name(), reason)
			}
		}
		f(t)
	})
}

// spec builds a Spec: the backend's WithSpec adjustments, then mod.
func (s *suite) spec(mod func(*sandbox.Spec)) sandbox.Spec {
	var sp sandbox.Spec
	for _, f := range s.cfg.specs {
		f(&sp)
	}
	if mod != nil {
		mod(&sp)
	}
	return sp
}

// ctx is a context for one backend operation.
func (s *suite) ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), s.cfg.opTimeout)
	t.Cleanup(cancel)
	return ctx
}

// create makes a sandbox that is closed when the test ends.
func (s *suite) create(t *testing.T, spec sandbox.Spec) sandbox.Sandbox {
	t.Helper()
	sb, err := s.b.Create(s.ctx(t), spec)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.opTimeout)
		defer cancel()
		if err := sb.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return sb
}

// exec runs p in sb and fails the test when Exec returns an error.
func (s *suite) exec(t *testing.T, sb sandbox.Sandbox, p *sandbox.Process) *sandbox.Result {
	t.Helper()
	res, err := sb.Exec(s.ctx(t), p)
	if err != nil {
		t.Fatalf("Exec %q: %v", p.Args, err)
	}
	if res == nil {
		t.Fatalf("Exec %q: nil Result and nil error", p.Args)
	}
	return res
}

// oneShot is sandbox.Run, failing the test on an error.
func (s *suite) oneShot(t *testing.T, spec sandbox.Spec, p *sandbox.Process) *sandbox.Result {
	t.Helper()
	res, err := sandbox.Run(s.ctx(t), s.b, spec, p)
	if err != nil {
		t.Fatalf("sandbox.Run %q: %v", p.Args, err)
	}
	if res == nil {
		t.Fatalf("sandbox.Run %q: nil Result and nil error", p.Args)
	}
	return res
}

// sh is a process running script with /bin/sh.
func sh(script string) *sandbox.Process {
	return &sandbox.Process{Args: []string{"/bin/sh", "-c", script}}
}

// wantExit fails unless res is a normal exit with code.
func wantExit(t *testing.T, res *sandbox.Result, code int) {
	t.Helper()
	if res.Reason != sandbox.ReasonExited || res.ExitCode != code || res.Signal != "" {
		t.Fatalf("want reason %q exit code %d, got %s", sandbox.ReasonExited, code, describe(res))
	}
}

// describe summarises a Result for failure messages.
func describe(res *sandbox.Result) string {
	if res == nil {
		return "<nil result>"
	}
	return fmt.Sprintf("reason=%q exit=%d signal=%q stdout=%s stderr=%s message=%q",
		res.Reason, res.ExitCode, res.Signal, clip(res.Stdout), clip(res.Stderr), res.Message)
}

// clip quotes s, keeping its head and tail when it is long.
func clip(s string) string {
	const n = 150
	if len(s) > 2*n {
		return fmt.Sprintf("%q…%q (%d bytes)", s[:n], s[len(s)-n:], len(s))
	}
	return fmt.Sprintf("%q", s)
}

// token is a unique word for names and secrets.
func token() string {
	return fmt.Sprintf("%016x", rand.Uint64())
}

// shQuote quotes s for /bin/sh.
func shQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
