package sandboxtest_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/execbox/execbox/backend/local"
	"github.com/execbox/execbox/backend/native"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/internal/testutil/rootimage"
	"github.com/execbox/execbox/sandbox"
	"github.com/execbox/execbox/sandbox/sandboxtest"
)

// The suite's self-test: every subtest of the suite must be able to fail,
// for its own reason. Each entry of brokenTable names a subtest, a broken
// variant of a real backend (native, or local where the defect needs the
// host's file system) that breaks exactly one behaviour, and the text of
// the failure that behaviour causes. TestSuiteCatchesBrokenBackends runs
// the suite once against the unbroken wrapper (everything must pass, and
// every subtest that ran must be in the table) and then, in a child test
// process per entry, the one subtest against its variant: that subtest
// must fail, with the reason's text in its own log, and nothing else may
// fail. It logs the table. The children are this test binary run again
// (TestBroken) with the variant in EXECBOX_SUITETEST_BROKEN; their output
// is read in test2json framing (-test.v=test2json).

const (
	knobEnv   = "EXECBOX_SUITETEST_BROKEN"
	cgroupEnv = "EXECBOX_SUITETEST_CGROUP"
	unified   = "/sys/fs/cgroup/unified"
)

// entry is one row of the table: subtest → variant → reason.
type entry struct {
	subtest, variant, reason string
}

// brokenTable is built by table(): the rows written out below, plus one
// per syscall table row and per path rule.
func table() []entry {
	rows := []entry{
		{"exit/code_0", "exit_code_off_by_one", `want reason "exited" exit 0 signal ""`},
		{"exit/code_3", "exit_code_off_by_one", `want reason "exited" exit 3 signal ""`},
		{"exit/code_255", "exit_code_off_by_one", `want reason "exited" exit 255 signal ""`},
		{"exit/signal_SIGTERM", "signal_as_exit", `want reason "signaled" exit -1 signal "SIGTERM"`},
		{"exit/signal_SIGKILL", "signal_as_exit", `want reason "signaled" exit -1 signal "SIGKILL"`},
		{"exit/not_found_127", "not_startable_as_error", `want a Result with reason "exited" and exit code 127`},
		{"exit/not_found_path_127", "not_startable_as_error", `want a Result with reason "exited" and exit code 127`},
		{"exit/not_executable_126", "not_startable_as_error", `want a Result with reason "exited" and exit code 126`},
		{"exit/directory_126", "not_startable_as_error", `want a Result with reason "exited" and exit code 126`},
		{"stdin/passthrough_100KiB", "stdin_short", `that differ from the 102400 bytes of stdin`},
		{"stdin/nil_is_eof", "nil_stdin_never_ends", `want reason "exited" exit code 0, got reason="timeout"`},
		{"stdin/unread_does_not_block", "stdin_drained_after_exit", `stdin the program never read kept it from returning`},
		{"output/stdout_stderr_apart", "stderr_into_stdout", `want "out\nout2\n" and "err\nerr2\n"`},
		{"output/streaming", "output_held_back", `which they did not while it ran`},
		{"output/burst_100k_lines", "stdout_line_dropped", `a line was lost or reordered`},
		{"output/cap_below", "truncated_always", `999 bytes under a 1000 cap: got 999 bytes, truncated=true`},
		{"output/cap_exact", "output_cap_minus_one", `exactly 1000 bytes under a 1000 cap: got 999 bytes`},
		{"output/cap_over_keeps_running", "output_kill_always", `want reason "exited" exit code 0, got reason="output_limit"`},
		{"output/cap_over_by_one", "output_cap_plus_one", `1001 bytes under a 1000 cap: got 1001 bytes, truncated=false`},
		{"output/cap_stderr", "stderr_uncapped", `stderr: got 100000 bytes truncated=false`},
		{"output/cap_kill", "output_kill_ignored", `want reason "output_limit", got reason="exited"`},
		{"output/cap_kill_at_limit", "output_cap_minus_one", `want reason "exited" exit code 0, got reason="output_limit"`},
		{"env/host_secret_hidden", "env_leak", `leaked into the sandbox`},
		{"env/only_allowlisted_names", "backend_extra_var", `variable EXECBOX_BACKEND_DEBUG reached the program but is not on the allowlist`},
		{"env/default_allowlist", "tz_overridden", `host variable TZ="Etc/UTC" (on the default allowlist) reached the program as "UTC"`},
		{"env/spec_and_process_env", "spec_env_wins", `EXECBOX_SUITE_BOTH = "spec" (set: true), want "process"`},
		{"env/home_tmpdir_private", "shared_tmpdir", `appeared in the host's`},
		{"env/policy_allowlist", "policy_allowlist_ignored", `Policy.EnvAllowlist: EXECBOX_SUITE_LISTED_`},
		{"timeout/within_limit", "timeout_early", `want reason "exited" exit code 0, got reason="timeout"`},
		{"timeout/kills_tree", "tree_survives", `after the timeout: heartbeats continued`},
		{"timeout/process_timeout", "tree_survives", `after the timeout: heartbeats continued`},
		{"timeout/process_timeout", "process_timeout_ignored", `was not applied`},
		{"timeout/cancel_before_start", "done_ctx_ignored", `with a done context: want reason "canceled"`},
		{"timeout/cancel_kills_tree", "tree_survives", `after the cancel: heartbeats continued`},
		// The same defect where the host cannot see the sandbox's
		// processes (the backend says isolation "kernel"): the heartbeats
		// alone catch it.
		{"timeout/kills_tree", "tree_survives_unseen", `after the timeout: heartbeats continued`},
		{"timeout/cancel_kills_tree", "tree_survives_unseen", `after the cancel: heartbeats continued`},
		{"close/during_exec", "tree_survives_unseen", `after Close: heartbeats continued`},
		{"files/write_and_read", "write_files_noop", `cat: in.txt: No such file or directory`},
		{"files/process_dir", "process_dir_ignored", `artifact "dir/sub/here.txt" missing`},
		{"files/artifacts_new_only", "artifacts_include_inputs", `unexpected artifact "in.txt"`},
		{"files/artifacts_changed_input", "artifacts_inputs_dropped", `artifact "in.txt" missing`},
		{"files/artifacts_rewritten_same_size", "artifacts_by_size", `artifact "in.txt" missing`},
		{"files/artifact_files_limit", "artifact_files_plus_one", `returned 3 files`},
		{"files/artifact_files_at_limit", "artifact_files_minus_one", `want 0 skipped`},
		{"files/artifact_bytes_limit", "artifact_bytes_doubled", `bytes, limits 100 files / 1000 bytes`},
		{"files/artifact_bytes_at_limit", "artifact_bytes_minus_one", `want 0 skipped`},
		{"files/run_spec_files", "write_files_noop", `want the Spec.Files contents`},
		{"paths/accepted/long_component_255", "max_name_254", `WriteFiles with a 255-byte component`},
		{"paths/accepted/long_path_4096", "max_path_4095", `WriteFiles with a valid 4096-byte path`},
		{"paths/atomic", "write_files_partial", `a rejected WriteFiles wrote something anyway`},
		{"paths/exec_invalid", "exec_unchecked", `want ErrInvalid, got err=<nil>`},
		{"paths/symlink/dir", "follow_symlinks", `WriteFiles through a symlink with path "dlink/new.txt": want ErrInvalid, got nil`},
		{"paths/symlink/dir_deep", "follow_symlinks", `WriteFiles through a symlink with path "dlink/sub/new.txt": want ErrInvalid, got nil`},
		{"paths/symlink/file", "follow_symlinks", `WriteFiles through a symlink with path "flink": want ErrInvalid, got nil`},
		{"paths/symlink/relative", "follow_symlinks", `WriteFiles through a symlink with path "rlink/x": want ErrInvalid, got nil`},
		{"paths/symlink/etc", "symlink_writes_dropped", `WriteFiles through a symlink with path "elink/passwd": want ErrInvalid, got nil`},
		{"paths/symlink/atomic", "write_files_partial", `a WriteFiles refused for a symlink wrote other files anyway`},
		{"symlink_artifacts/not_followed", "artifacts_follow", `unexpected artifact "leak"`},
		{"symlink_artifacts/special_files", "fifo_unlisted", `the FIFO is not listed in Skipped`},
		{"root_image", "root_image_ignored", `in a sandbox of the image: stdout`},
		{"result/fields", "result_backend_blank", `Result.Backend = ""`},
		{"close/idempotent", "close_twice_errors", `Close #2:`},
		{"close/concurrent", "close_concurrent_errors", `concurrent Close #`},
		{"close/during_exec", "tree_survives", `after Close: heartbeats continued`},
		{"close/use_after_close", "use_after_close_runs", `Exec on a closed sandbox ran the program`},
		{"concurrency/exec_busy", "busy_queues", `the second waited for it instead of being refused`},
		{"concurrency/symlink_race", "toctou_write", `wrote through a symlink into the host`},
		{"concurrency/symlink_race", "toctou_collect", `with the content of the host file`},
		{"limits/pids_fork_bomb", "pids_slack", `live tasks of its own under Limits.Pids = 32`},
		{"limits/pids_thread_bomb", "pids_slack", `live tasks of its own under Limits.Pids = 32`},
		{"limits/cpu_quota", "cpu_quota_dropped", `the quota did not hold`},
		{"fs/ls_la", "deny:statx", `Operation not permitted`},
		{"fs/stat", "deny:statx", `Operation not permitted`},
		{"fs/python_stat_scandir", "deny:getdents64", `PermissionError`},
		{"io/select_poll_pipe", "deny:pselect6", `PermissionError`},
		// As a backend whose program reached the host's /dev/null (a bind
		// left writable, or the host's node as its stdin): its chmod
		// lands on the host.
		{"devices/host_nodes_unchanged", "devices_touched", `was changed from inside the sandbox`},
		{"session/state_persists", "workdir_per_exec", `exec 2:`},
		{"session/files/round_trip_50MiB", "get_file_short", `GetFile:`},
		{"session/files/visible_both_ways", "put_file_empty", `the program read ""`},
		{"session/files/bounds", "files_unbounded", `PutFile of max+1`},
		{"session/files/dirs", "remove_ignored", `Stat after Remove`},
		{"session/files/symlinks_not_followed", "get_file_follows_symlinks", `GetFile through a symlinked dir`},
		// A context's call is interrupted at its timeout by a timer (the
		// kernel's setitimer); a terminal needs ioctls; the agent's output
		// is a protocol that must reach it whole.
		{"agent/contexts", "deny:setitimer", `import math`},
		{"agent/terminal", "deny:ioctl", `waiting for ">>> "`},
		{"agent/exec", "lasting_output_capped", `3 MB of output`},
		// The agent's own duties past its first call: a resize applied, a
		// context's state kept across a timeout, an exec's tree ended.
		{"agent/terminal", "resize_ignored", `waiting for "cols 120 rows 40"`},
		{"agent/contexts", "ctx_timeout_clears", `after the interrupt the context has x`},
		{"agent/exec", "agent_tree_survives", `the programs an exec left in sessions of their own live on`},
		{"leaks/runs", "leak_tmp", `new entries in`},
	}
	for _, r := range []string{"absolute", "dotdot", "dotdot_inner", "nul", "long_component", "long_path", "empty",
		"dot_component", "empty_component", "trailing_slash"} {
		rows = append(rows, entry{"paths/write_files/" + r, "no_path_check", `WriteFiles with path`})
	}
	for _, r := range sandboxtest.SyscallTable() {
		if r.Allowed {
			rows = append(rows, entry{"syscalls/allowed/" + r.Name, "deny:" + r.Syscall, fmt.Sprintf("%s (%s): got", r.Name, r.Syscall)})
		} else {
			rows = append(rows, entry{"syscalls/denied/" + r.Name, "einval:" + r.Syscall, fmt.Sprintf(`%s (%s): got "allowed, failed with EINVAL"`, r.Name, r.Syscall)})
		}
	}
	return rows
}

// requireSelfTest skips (or, when EXECBOX_REQUIRE names "sandboxtest",
// fails) unless the variants can run here: root, the native backend, and
// a cgroup v2 with cgroup.kill that holds the survivors tree_survives
// plants.
func requireSelfTest(t *testing.T) {
	t.Helper()
	testutil.RequiresRoot(t, "sandboxtest")
	probe, err := os.MkdirTemp(cgroupV2Root(), "execbox-sandboxtest-probe-")
	if err == nil {
		_, err = os.Stat(filepath.Join(probe, "cgroup.kill"))
		os.Remove(probe)
	}
	if err != nil {
		testutil.SkipOrFail(t, "sandboxtest", "no cgroup v2 with cgroup.kill to hold the planted survivors: %v", err)
	}
}

// cgroupV2Root is the cgroup v2 mount: the hybrid host's unified one, or
// /sys/fs/cgroup on a pure v2 host.
func cgroupV2Root() string {
	if _, err := os.Stat(filepath.Join(unified, "cgroup.procs")); err == nil {
		return unified
	}
	return "/sys/fs/cgroup"
}

// TestBroken runs the suite against the variant named by
// EXECBOX_SUITETEST_BROKEN ("none": unbroken); it is run only as a child of
// TestSuiteCatchesBrokenBackends.
func TestBroken(t *testing.T) {
	knob := os.Getenv(knobEnv)
	if knob == "" {
		t.Skip("run by TestSuiteCatchesBrokenBackends only")
	}
	requireSelfTest(t)
	b := newBroken(t, knob)
	opts := []sandboxtest.Option{sandboxtest.WithWorkRoot(b.root), sandboxtest.WithOpTimeout(30 * time.Second)}
	// Only the runs that reach root_image pay for unpacking an image (a
	// child runs its row's subtest alone).
	if knob == "none" || knob == "root_image_ignored" {
		opts = append(opts, sandboxtest.WithRootImage(rootimage.Host(t)))
	}
	sandboxtest.Run(t, b, opts...)
}

// TestSuiteCatchesBrokenBackends is the self-test (see the top of the file).
func TestSuiteCatchesBrokenBackends(t *testing.T) {
	requireSelfTest(t)
	start := time.Now()
	// The survivors tree_survives plants live in cgroups below this one;
	// whatever a child leaves there is killed at the end.
	cg := filepath.Join(cgroupV2Root(), fmt.Sprintf("execbox-sandboxtest-%d", os.Getpid()))
	if err := os.Mkdir(cg, 0o755); err != nil {
		t.Fatalf("making the survivors' cgroup: %v", err)
	}
	t.Cleanup(func() { killCgroupTree(cg) })

	rows := table()
	good := runChild(t, cg, "none", "")
	if good.err != nil && !good.exitErr {
		t.Fatalf("running the unbroken suite: %v", good.err)
	}
	var leaves []string
	for name, st := range good.status {
		if good.leaf(name) {
			leaves = append(leaves, name)
			if st == "fail" {
				t.Errorf("the unbroken wrapper fails %s:\n%s", name, good.logs[name])
			}
		}
	}
	if len(leaves) < 100 {
		t.Fatalf("the unbroken run reported only %d subtests:\n%s", len(leaves), tail(good.out, 3000))
	}
	slices.Sort(leaves)
	covered := map[string]bool{}
	for _, r := range rows {
		covered[r.subtest] = true
		if _, ok := good.status[r.subtest]; !ok {
			t.Errorf("the table names %s, which the suite does not have", r.subtest)
		}
	}
	for _, l := range leaves {
		if !covered[l] {
			t.Errorf("subtest %s has no broken variant in the table", l)
		}
	}

	// One child per row, a few at a time: most of them wait on sandboxes.
	results := make([]child, len(rows))
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for i, r := range rows {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			results[i] = runChild(t, cg, r.variant, r.subtest)
		})
	}
	wg.Wait()

	var tab strings.Builder
	fmt.Fprintf(&tab, "%-44s %-26s %6s  %s\n", "subtest", "broken variant", "secs", "the failure it must cause")
	for i, r := range rows {
		c := results[i]
		fmt.Fprintf(&tab, "%-44s %-26s %6.1f  %q\n", r.subtest, r.variant, c.took.Seconds(), r.reason)
		t.Run(r.variant+"/"+r.subtest, func(t *testing.T) {
			if c.err != nil && !c.exitErr {
				t.Fatalf("running the child: %v", c.err)
			}
			switch st := c.status[r.subtest]; st {
			case "fail":
			case "":
				t.Fatalf("the subtest did not run:\n%s", tail(c.out, 3000))
			default:
				t.Fatalf("the suite did not catch variant %s: %s %s\n%s", r.variant, r.subtest, st, c.logs[r.subtest])
			}
			if !strings.Contains(c.logs[r.subtest], r.reason) {
				t.Errorf("%s failed, but not for its own reason: want %q in its log:\n%s", r.subtest, r.reason, c.logs[r.subtest])
			}
			for name, st := range c.status {
				if st == "fail" && c.leaf(name) && name != r.subtest {
					t.Errorf("%s failed too:\n%s", name, c.logs[name])
				}
			}
		})
	}
	t.Logf("every subtest and the broken variant that fails it (%d rows, %d subtests, %v):\n%s",
		len(rows), len(leaves), time.Since(start).Round(time.Second), tab.String())
}

// child is what a child test process reported, in test2json framing.
type child struct {
	out     string
	err     error
	exitErr bool              // the child ran and failed (expected for a variant)
	status  map[string]string // subtest (relative to TestBroken) → pass, fail, skip
	logs    map[string]string // subtest → its output
	parents map[string]bool   // subtests that have subtests
	took    time.Duration
}

func (c child) leaf(name string) bool { return !c.parents[name] }

// runChild runs TestBroken with knob, only subtest when it is set.
func runChild(t *testing.T, cg, knob, subtest string) child {
	pattern := "^TestBroken$"
	if subtest != "" {
		for _, part := range strings.Split(subtest, "/") {
			pattern += "/^" + regexp.QuoteMeta(part) + "$"
		}
	}
	cmd := exec.Command(os.Args[0], "-test.run", pattern, "-test.v=test2json", "-test.short", "-test.count=1", "-test.timeout=10m")
	cmd.Env = append(os.Environ(), knobEnv+"="+knob, cgroupEnv+"="+cg)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	c := child{out: out.String(), err: err, took: time.Since(start),
		status: map[string]string{}, logs: map[string]string{}, parents: map[string]bool{}}
	var ee *exec.ExitError
	c.exitErr = errors.As(err, &ee)
	c.parse()
	return c
}

// parse reads test2json framing: "\x16=== RUN|NAME|CONT   <test>" switches
// the test that the following lines belong to; "\x16--- PASS|FAIL|SKIP:
// <test> (…)" ends one.
func (c *child) parse() {
	const root = "TestBroken/"
	cur := ""
	sc := bufio.NewScanner(strings.NewReader(c.out))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		framed := strings.HasPrefix(line, "\x16")
		l := strings.TrimLeft(strings.TrimPrefix(line, "\x16"), " ")
		switch {
		case framed && (strings.HasPrefix(l, "=== RUN") || strings.HasPrefix(l, "=== NAME") || strings.HasPrefix(l, "=== CONT")):
			name := strings.TrimSpace(l[len("=== NAME"):])
			cur = strings.TrimPrefix(name, root)
			if i := strings.LastIndexByte(cur, '/'); i >= 0 && strings.HasPrefix(name, root) {
				c.parents[cur[:i]] = true
			}
		case framed && strings.HasPrefix(l, "--- "):
			f := strings.Fields(l)
			if len(f) >= 3 && strings.HasPrefix(f[2], root) {
				c.status[strings.TrimPrefix(f[2], root)] = strings.ToLower(strings.TrimSuffix(f[1], ":"))
			}
		default:
			c.logs[cur] += line + "\n"
		}
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// killCgroupTree kills every process below cg and removes its cgroups.
func killCgroupTree(cg string) {
	var dirs []string
	filepath.WalkDir(cg, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		_ = os.WriteFile(filepath.Join(dirs[i], "cgroup.kill"), []byte("1"), 0)
		for range 200 {
			if err := os.Remove(dirs[i]); err == nil || errors.Is(err, os.ErrNotExist) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// ----- the broken variants -----

// broken is a real backend with one defect.
type broken struct {
	sandbox.Backend
	knob string
	root string // the real backend's work root
	t    *testing.T
}

// usesLocal: the variants whose defect needs the program on the host's
// file system.
var usesLocal = []string{"shared_tmpdir"}

func newBroken(t *testing.T, knob string) *broken {
	root := t.TempDir()
	var real sandbox.Backend
	var err error
	if slices.Contains(usesLocal, knob) {
		real, err = local.New(sandbox.Settings{WorkRoot: root})
	} else {
		real, err = native.New(sandbox.Settings{WorkRoot: root})
	}
	if err != nil {
		t.Fatal(err)
	}
	testutil.Available(t, "sandboxtest", real, 30*time.Second)
	return &broken{Backend: real, knob: knob, root: root, t: t}
}

func (b *broken) Capabilities() sandbox.Capabilities {
	c := b.Backend.Capabilities()
	if b.knob == "tree_survives_unseen" {
		// As under a user-space kernel: the suite does not look for the
		// sandbox's processes in the host's /proc.
		c.Isolation = sandbox.IsolationKernel
	}
	return c
}

func (b *broken) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	l := &spec.Limits
	switch b.knob {
	case "root_image_ignored":
		spec.Root = nil
	case "pids_slack":
		if l.Pids > 0 {
			l.Pids += 8
		}
	case "cpu_quota_dropped":
		l.CPUs = 4
	case "output_cap_plus_one":
		if l.Output > 0 {
			l.Output++
		}
	case "output_cap_minus_one":
		if l.Output > 0 {
			l.Output--
		}
	case "output_kill_ignored":
		l.OutputLimitKill = false
	case "output_kill_always":
		l.OutputLimitKill = true
	case "stderr_uncapped":
		// the real cap goes; stdout is capped again below, stderr not
	case "artifact_files_plus_one":
		if l.ArtifactFiles > 0 {
			l.ArtifactFiles++
		}
	case "artifact_files_minus_one":
		if l.ArtifactFiles > 0 {
			l.ArtifactFiles--
		}
	case "artifact_bytes_doubled":
		if l.ArtifactBytes > 0 {
			l.ArtifactBytes *= 2
		}
	case "artifact_bytes_minus_one":
		if l.ArtifactBytes > 0 {
			l.ArtifactBytes--
		}
	case "policy_allowlist_ignored":
		spec.Policy.EnvAllowlist, spec.Policy.EnvAllowPrefix = nil, nil
	case "leak_tmp":
		_, _ = os.MkdirTemp("", "execbox-leak-")
	}
	limitOut := spec.Limits.Output
	if b.knob == "stderr_uncapped" {
		spec.Limits.Output = 1 << 30
	}
	sb, err := b.Backend.Create(ctx, spec)
	if err != nil {
		return nil, err
	}
	return &brokenSandbox{Sandbox: sb, b: b, spec: spec, limitOut: limitOut}, nil
}

type brokenSandbox struct {
	sandbox.Sandbox
	b        *broken
	spec     sandbox.Spec
	limitOut int64

	mu       sync.Mutex
	inputs   map[string][]byte // the last WriteFiles
	closes   int
	closing  chan struct{} // close_concurrent_errors: the first Close waits here for a second
	closed   bool
	execMu   sync.Mutex      // busy_queues
	fresh    sandbox.Sandbox // use_after_close_runs
	freshErr error
}

// workDir is the host path of the real sandbox's work dir.
func (s *brokenSandbox) workDir() string {
	switch sb := s.Sandbox.(type) {
	case *native.Sandbox:
		return sb.Work.Path
	case *local.Sandbox:
		return sb.Work.Path
	}
	panic(fmt.Sprintf("no work dir for %T", s.Sandbox))
}

func (s *brokenSandbox) WriteFiles(ctx context.Context, files map[string][]byte) error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed && s.b.knob == "use_after_close_runs" {
		fresh, err := s.freshSandbox(ctx)
		if err != nil {
			return err
		}
		return fresh.WriteFiles(ctx, files)
	}
	s.mu.Lock()
	s.inputs = maps.Clone(files)
	s.mu.Unlock()
	switch s.b.knob {
	case "write_files_noop":
		return nil
	case "no_path_check":
		for p, data := range files {
			if sandbox.CheckPath(p) != nil {
				if err := writeByPath(s.workDir(), p, data); err != nil {
					return err
				}
				delete(files, p)
			}
		}
	case "max_name_254", "max_path_4095":
		for p := range files {
			long := len(p) >= sandbox.MaxPathLen
			if s.b.knob == "max_name_254" {
				long = slices.ContainsFunc(strings.Split(p, "/"), func(c string) bool { return len(c) >= sandbox.MaxNameLen })
			}
			if long {
				return sandbox.Errorf(sandbox.ErrInvalid, "path_invalid", "path %q: too long", p)
			}
		}
	case "write_files_partial":
		// One file at a time: the valid ones are written, the first
		// refusal is returned at the end.
		var first error
		for _, p := range slices.Sorted(maps.Keys(files)) {
			if err := s.Sandbox.WriteFiles(ctx, map[string][]byte{p: files[p]}); err != nil && first == nil {
				first = err
			}
		}
		return first
	case "follow_symlinks", "symlink_writes_dropped", "toctou_write":
		for p, data := range files {
			if err := sandbox.CheckPath(p); err != nil {
				return err
			}
			if throughSymlink(s.workDir(), p) {
				if s.b.knob == "symlink_writes_dropped" {
					continue
				}
				if s.b.knob == "toctou_write" {
					return sandbox.Errorf(sandbox.ErrInvalid, "path_invalid", "path %q passes through a symlink", p)
				}
			}
			// By path: the check above (toctou_write) and this write are
			// apart; the write follows a symlink swapped in meanwhile.
			if err := writeByPath(s.workDir(), p, data); err != nil {
				return err
			}
		}
		return nil
	}
	return s.Sandbox.WriteFiles(ctx, files)
}

// writeByPath writes p below dir by path, following symlinks, as a broken
// backend would, and gives what it makes to dir's owner, as the real ones
// do: a directory left owned by root is one the sandbox's program cannot
// rename or write into (the symlink race's swapper stalled on one in CI,
// so its toctou variant went uncaught).
func writeByPath(dir, p string, data []byte) error {
	st, err := os.Stat(dir)
	if err != nil {
		return err
	}
	uid, gid := int(st.Sys().(*syscall.Stat_t).Uid), int(st.Sys().(*syscall.Stat_t).Gid)
	cur := dir
	comps := strings.Split(p, "/")
	for _, c := range comps[:len(comps)-1] {
		cur = filepath.Join(cur, c)
		if err := os.Mkdir(cur, 0o755); err == nil {
			if err := os.Lchown(cur, uid, gid); err != nil {
				return err
			}
		} else if !errors.Is(err, fs.ErrExist) {
			return err
		}
	}
	full := filepath.Join(dir, p)
	if err := os.WriteFile(full, data, 0o644); err != nil {
		return err
	}
	return os.Lchown(full, uid, gid)
}

// throughSymlink reports whether p, below dir, passes through or names a
// symlink right now.
func throughSymlink(dir, p string) bool {
	cur := dir
	for _, c := range strings.Split(p, "/") {
		cur = filepath.Join(cur, c)
		if st, err := os.Lstat(cur); err == nil && st.Mode()&os.ModeSymlink != 0 {
			return true
		}
	}
	return false
}

func (s *brokenSandbox) Artifacts(ctx context.Context) (sandbox.Artifacts, error) {
	if s.b.knob == "toctou_collect" {
		return s.collectByPath(), nil
	}
	a, err := s.Sandbox.Artifacts(ctx)
	if err != nil {
		return a, err
	}
	s.mu.Lock()
	inputs := s.inputs
	s.mu.Unlock()
	switch s.b.knob {
	case "artifacts_include_inputs":
		for p, data := range inputs {
			if !slices.ContainsFunc(a.Files, func(f sandbox.Artifact) bool { return f.Path == p }) {
				a.Files = append(a.Files, sandbox.Artifact{Path: p, Size: int64(len(data)), Mode: 0o644, Data: data})
			}
		}
	case "artifacts_inputs_dropped", "artifacts_by_size":
		a.Files = slices.DeleteFunc(a.Files, func(f sandbox.Artifact) bool {
			in, ok := inputs[f.Path]
			return ok && (s.b.knob == "artifacts_inputs_dropped" || len(in) == len(f.Data))
		})
	case "artifacts_follow":
		for _, sk := range a.Skipped {
			if sk.Reason == "symlink" {
				if data, err := os.ReadFile(filepath.Join(s.workDir(), sk.Path)); err == nil {
					a.Files = append(a.Files, sandbox.Artifact{Path: sk.Path, Size: int64(len(data)), Mode: 0o644, Data: data})
				}
			}
		}
	case "fifo_unlisted":
		a.Skipped = slices.DeleteFunc(a.Skipped, func(sk sandbox.Skipped) bool { return sk.Reason != "symlink" })
	}
	return a, nil
}

// collectByPath is an artifact collector that checks each entry with
// Lstat and then reads it by path (following a symlink swapped in
// meanwhile).
func (s *brokenSandbox) collectByPath() sandbox.Artifacts {
	var a sandbox.Artifacts
	var walk func(rel string)
	walk = func(rel string) {
		ents, _ := os.ReadDir(filepath.Join(s.workDir(), rel))
		for _, e := range ents {
			p := filepath.Join(rel, e.Name())
			st, err := os.Lstat(filepath.Join(s.workDir(), p))
			switch {
			case err != nil:
			case st.IsDir():
				walk(p)
			case st.Mode().IsRegular():
				if data, err := os.ReadFile(filepath.Join(s.workDir(), p)); err == nil {
					a.Files = append(a.Files, sandbox.Artifact{Path: p, Size: int64(len(data)), Data: data})
				}
			}
		}
	}
	walk("")
	return a
}

// agentBreaks are the agent variants: its program with one duty undone
// (each anchor must be in the agent's source, or the variant would break
// nothing).
var agentBreaks = map[string][][2]string{
	"resize_ignored": {{`                    set_size(p.stdin, req["rows"], req["cols"])`, `                    pass`}},
	// The Python kernel's code reaches the agent in its first request;
	// the agent rewrites it so that an interrupted call clears the
	// namespace.
	"ctx_timeout_clears": {{`            kernels.update(req["kernels"])`, `            kernels.update(req["kernels"]); kernels["python"][-1] = kernels["python"][-1].replace('ans = {"ok": False, "error": error_of(e, True), "interrupted": True}', 'namespace.clear(); namespace["__builtins__"] = __builtins__; ans = {"ok": False, "error": error_of(e, True), "interrupted": True}')`}},
	"agent_tree_survives": {
		{"def orphans():\n", "def orphans():\n    return []\n"},
		{"            kill_tree(p)\n            ended.append(p)", "            ended.append(p)"},
	},
}

func brokenAgent(knob, src string) string {
	for _, r := range agentBreaks[knob] {
		if !strings.Contains(src, r[0]) {
			panic(fmt.Sprintf("variant %s: the agent's source has no %q", knob, r[0]))
		}
		src = strings.Replace(src, r[0], r[1], 1)
	}
	return src
}

func (s *brokenSandbox) Exec(ctx context.Context, p *sandbox.Process) (*sandbox.Result, error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed && s.b.knob == "use_after_close_runs" {
		fresh, err := s.freshSandbox(ctx)
		if err != nil {
			return nil, err
		}
		return fresh.Exec(ctx, p)
	}
	if s.b.knob == "workdir_per_exec" {
		fresh, err := s.b.Backend.Create(ctx, s.spec)
		if err != nil {
			return nil, err
		}
		defer fresh.Close(context.WithoutCancel(ctx))
		return fresh.Exec(ctx, p)
	}
	q := *p
	p = &q
	var drain io.Reader
	var heldOut, heldErr *bytes.Buffer
	origOut, origErr := p.Stdout, p.Stderr
	switch s.b.knob {
	case "done_ctx_ignored":
		if ctx.Err() != nil {
			ctx = context.WithoutCancel(ctx)
		}
	case "env_leak":
		p.Env = hostEnvWith(p.Env)
	case "backend_extra_var":
		p.Env = withVar(p.Env, "EXECBOX_BACKEND_DEBUG", "1")
	case "tz_overridden":
		p.Env = withVar(p.Env, "TZ", "UTC")
	case "spec_env_wins":
		p.Env = maps.Clone(p.Env)
		for k := range s.spec.Env {
			delete(p.Env, k)
		}
	case "shared_tmpdir":
		p.Env = withVar(p.Env, "TMPDIR", os.TempDir())
	case "timeout_early":
		p.Timeout = 100 * time.Millisecond
	case "process_timeout_ignored":
		p.Timeout = 0
	case "stdin_short":
		if p.Stdin != nil {
			p.Stdin = io.LimitReader(p.Stdin, 64<<10)
		}
	case "nil_stdin_never_ends":
		if p.Stdin == nil {
			p.Stdin = blockingReader{ctx}
		}
	case "stdin_drained_after_exit":
		drain = p.Stdin
	case "output_held_back":
		heldOut, heldErr = &bytes.Buffer{}, &bytes.Buffer{}
		if p.Stdout != nil {
			p.Stdout = heldOut
		}
		if p.Stderr != nil {
			p.Stderr = heldErr
		}
	case "process_dir_ignored":
		p.Dir = ""
	case "resize_ignored", "ctx_timeout_clears", "agent_tree_survives":
		if p.Lasting {
			p.Args = slices.Clone(p.Args)
			p.Args[len(p.Args)-1] = brokenAgent(s.b.knob, p.Args[len(p.Args)-1])
		}
	case "lasting_output_capped":
		// As a backend that streams only what the Result keeps.
		if p.Lasting && p.Stdout != nil {
			p.Stdout = &cappedWriter{w: p.Stdout, left: 64 << 10}
		}
	case "exec_unchecked":
		if p.Dir != "" && sandbox.CheckPath(p.Dir) != nil {
			p.Dir = ""
		}
		if len(p.Args) == 0 || p.Args[0] == "" {
			p.Args = []string{"true"}
		}
	case "busy_queues":
		s.execMu.Lock()
		defer s.execMu.Unlock()
	case "tree_survives", "tree_survives_unseen":
		if len(p.Args) == 3 && p.Args[0] == "/bin/sh" && strings.Contains(p.Args[2], "T=hb-") {
			if err := s.b.plantSurvivors(s.workDir(), p.Args[2]); err != nil {
				return nil, err
			}
		}
	}
	if name, ok := strings.CutPrefix(s.b.knob, "deny:"); ok {
		p.Args = denyArgs(p.Args, name, syscall.EPERM)
	}
	if name, ok := strings.CutPrefix(s.b.knob, "einval:"); ok {
		p.Args = denyArgs(p.Args, name, syscall.EINVAL)
	}
	res, err := s.Sandbox.Exec(ctx, p)
	if s.b.knob == "devices_touched" && len(p.Args) == 3 && strings.Contains(p.Args[2], "chown 65534:65534 /dev/null") {
		os.Chmod("/dev/null", 0o666) // the program's chmod, had it reached the host's node
	}
	if heldOut != nil {
		if origOut != nil {
			io.Copy(origOut, heldOut)
		}
		if origErr != nil {
			io.Copy(origErr, heldErr)
		}
	}
	if drain != nil {
		_, _ = io.Copy(io.Discard, drain)
	}
	if err != nil || res == nil {
		return res, err
	}
	switch s.b.knob {
	case "exit_code_off_by_one":
		if res.Reason == sandbox.ReasonExited {
			res.ExitCode++
		}
	case "signal_as_exit":
		if res.Reason == sandbox.ReasonSignaled {
			n := map[string]int{"SIGTERM": 15, "SIGKILL": 9}[res.Signal]
			res.Reason, res.ExitCode, res.Signal = sandbox.ReasonExited, 128+n, ""
		}
	case "not_startable_as_error":
		if res.Reason == sandbox.ReasonExited && (res.ExitCode == sandbox.ExitNotFound || res.ExitCode == sandbox.ExitNotExecutable) && res.Message != "" {
			return nil, sandbox.Errorf(sandbox.ErrInvalid, "program_not_found", "%s", res.Message)
		}
	case "stderr_into_stdout":
		res.Stdout, res.Stderr = res.Stdout+res.Stderr, ""
	case "stdout_line_dropped":
		res.Stdout = strings.Replace(res.Stdout, "\n50000\n", "\n", 1)
	case "truncated_always":
		res.StdoutTruncated = true
	case "stderr_uncapped":
		if int64(len(res.Stdout)) > s.limitOut {
			res.Stdout, res.StdoutTruncated = res.Stdout[:s.limitOut], true
		}
	case "result_backend_blank":
		res.Backend = ""
	}
	return res, nil
}

// cappedWriter passes on its first left bytes and drops the rest.
type cappedWriter struct {
	w    io.Writer
	left int
}

func (c *cappedWriter) Write(p []byte) (int, error) {
	n := min(len(p), c.left)
	c.left -= n
	if n > 0 {
		if _, err := c.w.Write(p[:n]); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// freshSandbox is the sandbox use_after_close_runs runs in after Close.
func (s *brokenSandbox) freshSandbox(ctx context.Context) (sandbox.Sandbox, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fresh == nil && s.freshErr == nil {
		s.fresh, s.freshErr = s.b.Backend.Create(ctx, s.spec)
		if s.freshErr == nil {
			fresh := s.fresh
			s.b.t.Cleanup(func() { fresh.Close(context.Background()) })
		}
	}
	return s.fresh, s.freshErr
}

func (s *brokenSandbox) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closes++
	n := s.closes
	s.closed = true
	if s.closing == nil {
		s.closing = make(chan struct{})
	}
	closing := s.closing
	s.mu.Unlock()
	switch s.b.knob {
	case "close_twice_errors":
		if n == 2 {
			return errors.New("sandbox already closed")
		}
	case "close_concurrent_errors":
		if n == 1 {
			// The first Close waits (up to 5 s) for another to arrive,
			// which then fails: a Close that is not safe to overlap.
			select {
			case <-closing:
			case <-time.After(5 * time.Second):
			}
		} else if n == 2 {
			close(closing)
			return errors.New("Close is already running")
		}
	}
	return s.Sandbox.Close(ctx)
}

// blockingReader never gives EOF before ctx ends.
type blockingReader struct{ ctx context.Context }

func (r blockingReader) Read([]byte) (int, error) {
	<-r.ctx.Done()
	return 0, io.EOF
}

func withVar(env map[string]string, k, v string) map[string]string {
	m := maps.Clone(env)
	if m == nil {
		m = map[string]string{}
	}
	m[k] = v
	return m
}

func hostEnvWith(env map[string]string) map[string]string {
	m := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	maps.Copy(m, env)
	return m
}

// plantSurvivors starts the tree script as host processes (root, umask
// 0, so either tree can use what the other makes) in the work dir, in a
// cgroup of their own below the self-test's: they beat into the same files
// as the sandbox's tree and outlive every kill the backend makes, as the
// survivors of a backend that kills only part of a tree would. They are
// killed when the test ends (and by the self-test, whatever is left).
func (b *broken) plantSurvivors(work, script string) error {
	root := os.Getenv(cgroupEnv)
	if root == "" {
		return errors.New("tree_survives needs " + cgroupEnv)
	}
	cg, err := os.MkdirTemp(root, "survivors-")
	if err != nil {
		return fmt.Errorf("tree_survives: %w", err)
	}
	b.t.Cleanup(func() { killCgroupTree(cg) })
	fd, err := syscall.Open(cg, syscall.O_DIRECTORY|syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("tree_survives: %w", err)
	}
	defer syscall.Close(fd)
	cmd := exec.Command("/bin/sh", "-c", "umask 0\n"+script)
	cmd.Dir = work
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd, Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("tree_survives: %w", err)
	}
	go cmd.Wait()
	return nil
}

// denyNumbers are the x86_64 numbers of the syscalls the deny: and
// einval: variants answer.
var denyNumbers = map[string]int{
	"pselect6": 270, "poll": 7, "ppoll": 271, "epoll_wait": 232, "statx": 332, "newfstatat": 262,
	"getdents64": 217, "openat": 257, "rename": 82, "getcwd": 79, "wait4": 61, "clone": 56,
	"futex": 202, "rt_sigaction": 13, "setitimer": 38, "prctl": 157, "sched_yield": 24, "prlimit64": 302,
	"pipe2": 293, "eventfd2": 290, "timerfd_create": 283, "memfd_create": 319, "inotify_init1": 294,
	"socketpair": 53, "bind": 49, "connect": 42, "sendfile": 40, "ioctl": 16, "mprotect": 10,
	"clock_nanosleep": 230, "nanosleep": 35, "getrandom": 318, "uname": 63,
	// The denied table's.
	"unshare": 272, "clone3": 435, "setns": 308, "mount": 165, "umount2": 166, "pivot_root": 155,
	"chroot": 161, "ptrace": 101, "process_vm_readv": 310, "kexec_load": 246, "init_module": 175,
	"delete_module": 176, "keyctl": 250, "add_key": 248, "bpf": 321, "perf_event_open": 298,
	"userfaultfd": 323, "io_uring_setup": 425, "personality": 135, "swapon": 167, "reboot": 169,
}

// denyFilter installs, in Python, a seccomp filter on top of the
// sandbox's that answers syscall nr with errno (the newest filter's errno
// wins): a backend whose policy is stricter than the table allows (EPERM),
// or one that lets a call the policy denies reach the kernel (EINVAL).
// cond narrows it: "futex" answers only the non-private FUTEX_WAIT and
// FUTEX_WAKE the table's row uses (op in args[1] below 2; glibc aborts when
// its own private futexes fail), "newuser" only a clone with CLONE_NEWUSER
// (so fork still works).
const denyFilter = `
def _execbox_deny(nr, err, cond):
    import ctypes, struct
    libc = ctypes.CDLL(None, use_errno=True)
    ret, allow = 0x00050000 | err, 0x7fff0000
    if cond == "futex":
        prog = [(0x20, 0, 0, 0), (0x15, 0, 3, nr), (0x20, 0, 0, 24), (0x35, 1, 0, 2), (0x06, 0, 0, ret), (0x06, 0, 0, allow)]
    elif cond == "newuser":
        prog = [(0x20, 0, 0, 0), (0x15, 0, 3, nr), (0x20, 0, 0, 16), (0x45, 0, 1, 0x10000000), (0x06, 0, 0, ret), (0x06, 0, 0, allow)]
    else:
        prog = [(0x20, 0, 0, 0), (0x15, 0, 1, nr), (0x06, 0, 0, ret), (0x06, 0, 0, allow)]
    buf = ctypes.create_string_buffer(b"".join(struct.pack("=HBBI", *i) for i in prog))
    class FProg(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
    fp = FProg(len(prog), ctypes.addressof(buf))
    libc.prctl(38, 1, 0, 0, 0)
    if libc.prctl(22, 2, ctypes.byref(fp), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "installing the deny filter")
`

// denyArgs makes args run with syscall name answered by errno: a Python
// program of the suite gets the filter at its marker (after its imports);
// anything else runs under a Python launcher that installs it and execs
// args.
func denyArgs(args []string, name string, errno syscall.Errno) []string {
	nr, ok := denyNumbers[name]
	if !ok {
		panic("no number for syscall " + name)
	}
	cond := ""
	switch {
	case name == "futex":
		cond = "futex"
	case name == "clone" && errno == syscall.EINVAL:
		cond = "newuser"
	}
	install := denyFilter + fmt.Sprintf("_execbox_deny(%d, %d, %q)\n", nr, int(errno), cond)
	if len(args) >= 4 && args[0] == "python3" && args[2] == "-c" && strings.Contains(args[3], sandboxtest.SyscallProbesMarker) {
		out := slices.Clone(args)
		out[3] = strings.Replace(args[3], sandboxtest.SyscallProbesMarker, install+sandboxtest.SyscallProbesMarker, 1)
		return out
	}
	return append([]string{"python3", "-I", "-c", install + "import os, sys\nos.execvp(sys.argv[1], sys.argv[1:])\n"}, args...)
}

// The table is sorted by subtest for the log; check the helper functions
// agree with it.
func TestTableIsWellFormed(t *testing.T) {
	rows := table()
	seen := map[string]bool{}
	for _, r := range rows {
		key := r.subtest + " " + r.variant
		if seen[key] {
			t.Errorf("row %s listed twice", key)
		}
		seen[key] = true
		if r.reason == "" {
			t.Errorf("row %s has no reason", key)
		}
		for _, prefix := range []string{"deny:", "einval:"} {
			if name, ok := strings.CutPrefix(r.variant, prefix); ok {
				if _, ok := denyNumbers[name]; !ok {
					t.Errorf("row %s: no syscall number for %s", key, name)
				}
			}
		}
	}
	subs := slices.Collect(maps.Keys(seen))
	sort.Strings(subs)
	if len(subs) < 100 {
		t.Errorf("only %d rows", len(subs))
	}
}
