package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "github.com/execbox/execbox/api/v1"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
)

// TestDockerHabits: flags end at the command, so the command's own flags
// are its own; -m, -e, -w, -i and --rm as Docker users type them; -c runs
// code; --version.
func TestDockerHabits(t *testing.T) {
	requireNative(t)
	for _, tc := range []struct {
		name string
		args []string
		out  string
	}{
		{"command flags are the command's", []string{"python3", "-c", "print(1)"}, "1\n"},
		{"-- still works", []string{"--", "python3", "-c", "print(2)"}, "2\n"},
		{"short flags", []string{"-m", "64m", "-e", "GREETING=hi", "--rm", "-i", "sh", "-c", "echo $GREETING"}, "hi\n"},
		{"-c code", []string{"-c", "print(6*7)"}, "42\n"},
		{"-c code in sh", []string{"--language", "sh", "-c", "echo from sh"}, "from sh\n"},
		{"--language js", []string{"--language", "js", "-c", "console.log(6 * 7)"}, "42\n"},
		{"--language py", []string{"--language", "py", "-c", "print(6 * 7)"}, "42\n"},
		{"-w", []string{"--file", "/etc/hostname:/work/d/h", "-w", "/work/d", "ls"}, "h\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := execbox(t, nil, "", append([]string{"run", "--backend", "native"}, tc.args...)...)
			if r.code != 0 || r.stdout != tc.out {
				t.Fatalf("exit %d, stdout %q, want %q; stderr %q", r.code, r.stdout, tc.out, r.stderr)
			}
		})
	}
	r := execbox(t, nil, "", "run", "--backend", "native", "-c", "print(1)", "python3")
	if r.code != 125 || !strings.Contains(r.stderr, "not both") {
		t.Errorf("-c with a command: exit %d, %q", r.code, r.stderr)
	}
	r = execbox(t, nil, "", "--version")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "execbox ") {
		t.Errorf("--version: exit %d, %q", r.code, r.stdout)
	}
}

// TestFilesIn: --file takes a path inside /work as well as a relative
// one, copies directory trees entry by entry, and says what it skipped.
func TestFilesIn(t *testing.T) {
	requireNative(t)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "tree", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "tree", "a.txt"), "a")
	writeFile(t, filepath.Join(dir, "tree", "sub", "b.txt"), "b")
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "tree", "link")); err != nil {
		t.Fatal(err)
	}
	r := execbox(t, nil, "", "run", "--backend", "native", "--file", filepath.Join(dir, "tree", "a.txt")+":/work/s.txt",
		"--file", filepath.Join(dir, "tree")+":in", "sh", "-c", "cat s.txt; find in | sort")
	if r.code != 0 || r.stdout != "ain\nin/a.txt\nin/sub\nin/sub/b.txt\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "link skipped: not a regular file") {
		t.Errorf("the skipped symlink was not reported: %q", r.stderr)
	}
	for _, bad := range []string{"/etc/x", "/workx/y", "../up"} {
		r := execbox(t, nil, "", "run", "--backend", "native", "--file", filepath.Join(dir, "tree", "a.txt")+":"+bad, "true")
		if r.code != 125 || !strings.Contains(r.stderr, "path_invalid") {
			t.Errorf("--file ...:%s: exit %d, %q", bad, r.code, r.stderr)
		}
	}
}

// TestNoSilentLoss: skipped artifacts are said on stderr; a limit flag
// that means nothing (zero, more CPUs than the host has) is refused.
func TestNoSilentLoss(t *testing.T) {
	requireNative(t)
	arts := t.TempDir()
	r := execbox(t, nil, "", "run", "--backend", "native", "--artifacts", arts, "sh", "-c", "echo x > kept.txt; ln -s kept.txt link")
	if r.code != 0 || !strings.Contains(r.stderr, "artifact link not written: symlink") {
		t.Errorf("exit %d, stderr %q; want the skipped symlink named", r.code, r.stderr)
	}
	for _, args := range [][]string{{"--memory", "0"}, {"--pids", "0"}, {"--cpus", "1000"}, {"--cpus", "-1"}, {"--timeout", "0s"}, {"--output-limit", "0"}} {
		r := execbox(t, nil, "", append(append([]string{"run", "--backend", "native"}, args...), "true")...)
		if r.code != 125 || !strings.Contains(r.stderr, "flag_invalid") || !strings.Contains(r.stderr, args[0]) {
			t.Errorf("%v: exit %d, %q", args, r.code, r.stderr)
		}
	}
}

// TestJSONRefusal: with --json a refusal is a JSON document on stdout too.
func TestJSONRefusal(t *testing.T) {
	r := execbox(t, nil, "", "run", "--json", "--backend", "nope", "true")
	var doc struct {
		Error struct{ Code, Message string }
	}
	if r.code != 125 || json.Unmarshal([]byte(r.stdout), &doc) != nil || doc.Error.Code != "backend_unknown" || doc.Error.Message == "" {
		t.Fatalf("exit %d, stdout %q", r.code, r.stdout)
	}
}

// TestFnAndLintInput: fn exits 125 when its own input is wrong; lint reads
// stdin with "-", names no flag it lacks, and counts columns from 1.
func TestFnAndLintInput(t *testing.T) {
	requireNative(t)
	r := execbox(t, nil, "", "fn", "--code-file", "/nonexistent.py")
	if r.code != 125 || !strings.Contains(r.stdout, `"ok":false`) {
		t.Errorf("fn with a missing code file: exit %d, stdout %q", r.code, r.stdout)
	}
	r = execbox(t, nil, "def f(:\n  pass\n", "lint", "-")
	if r.code != 1 || !strings.HasPrefix(r.stdout, "-:1:7: error:") {
		t.Errorf("lint -: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = execbox(t, nil, "", "lint", "nope.py")
	if r.code != 125 || strings.Contains(r.stderr, "--code-file") || !strings.Contains(r.stderr, "nope.py") {
		t.Errorf("lint nope.py: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestProductWords: the help speaks of the product, not of the documents
// it was specified from.
func TestProductWords(t *testing.T) {
	for _, cmd := range []string{"run", "fn", "lint", "serve", "doctor", "audit", "image", "config"} {
		r := execbox(t, nil, "", cmd, "--help")
		if strings.Contains(strings.ToLower(r.stdout), "seed") {
			t.Errorf("%s --help mentions a seed:\n%s", cmd, r.stdout)
		}
	}
}

// TestDoctorSaysHostFactsOnce: a line per backend, and the cgroup
// explanation the backends share once, below the table; while it probes,
// a progress line on stderr per backend as its answer comes in.
func TestDoctorSaysHostFactsOnce(t *testing.T) {
	requireNative(t)
	r := execbox(t, nil, "", "doctor")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	table, rest, _ := strings.Cut(r.stdout, "\n\n")
	lines := strings.Split(table, "\n")
	if len(lines) < 6 || !strings.HasPrefix(lines[0], "BACKEND") {
		t.Fatalf("table:\n%s", table)
	}
	for _, l := range lines[1:] {
		if len([]rune(l)) > 200 {
			t.Errorf("a table line is %d characters: %s", len([]rune(l)), l)
		}
		name := strings.Fields(l)[0]
		if !regexp.MustCompile(`(?m)^execbox:   ` + name + ` +(ready|available, not ready|unavailable) +[0-9.]+ s$`).MatchString(r.stderr) {
			t.Errorf("no progress line for %s on stderr:\n%s", name, r.stderr)
		}
	}
	if n := strings.Count(r.stdout, "hierarchies /sys/fs/cgroup"); n > 1 {
		t.Errorf("the cgroup explanation appears %d times", n)
	}
	if !strings.HasPrefix(rest, "host:\n  cgroups") {
		t.Errorf("no host section after the table:\n%s", rest)
	}
}

// TestMisspeltVariableIsAnError: an EXECBOX_ variable that names no key
// stops the command, as an unknown key in the file does.
func TestMisspeltVariableIsAnError(t *testing.T) {
	r := execbox(t, []string{"EXECBOX_LIMITS_MEMROY=1g"}, "", "run", "--backend", "native", "true")
	if r.code != 125 || !strings.Contains(r.stderr, "EXECBOX_LIMITS_MEMROY") || !strings.Contains(r.stderr, "did you mean EXECBOX_LIMITS_MEMORY?") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestRemoteCodesAreTheServers: `fn --remote` without a token reports
// the server's own code (unauthenticated), not a kind's (denied).
func TestRemoteCodesAreTheServers(t *testing.T) {
	s := startServer(t, append(localServe, "EXECBOX_TOKEN=remote-secret"))
	r := execbox(t, nil, `{"code":"def main(): pass"}`, "fn", "--remote", s.url)
	if !strings.Contains(r.stdout, `"code":"unauthenticated"`) {
		t.Fatalf("exit %d, stdout %q", r.code, r.stdout)
	}
}

// TestBurstIsQueuedNotRefused: 40 clients sending 6 runs each at a server
// with two run slots are all served: the admission queue holds the burst.
// The latencies are logged (a measurement, not a bound): the queue's wait
// is long enough for a starved host (at a load of 17, 29 of 240 waited
// past the default 10 s), since what is tested is its depth.
func TestBurstIsQueuedNotRefused(t *testing.T) {
	s := startServer(t, append(localServe, "EXECBOX_SERVER_MAX_RUNS=2", "EXECBOX_SERVER_QUEUE_WAIT=2m"))
	c := s.client("")
	var mu sync.Mutex
	var took []time.Duration
	codes := map[string]int{}
	var wg sync.WaitGroup
	for range 40 {
		wg.Go(func() {
			for range 6 {
				start := time.Now()
				_, err := c.Run(context.Background(), &v1.RunRequest{Command: []string{"true"}})
				mu.Lock()
				took = append(took, time.Since(start))
				codes[sandbox.CodeOf(err)]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.Sort(took)
	t.Logf("240 runs: %v; p50 %v, p99 %v", codes, took[len(took)/2].Round(time.Millisecond), took[len(took)*99/100].Round(time.Millisecond))
	if codes[""] != 240 {
		t.Fatalf("not every run was served: %v", codes)
	}
	if m := s.metric(`execbox_admission_wait_seconds_count{outcome="admitted"}`); m < 240 {
		t.Errorf("admission waits recorded: %v, want 240", m)
	}
}

// TestRootlessRefusesWeakLimits: as an unprivileged user, on a host with
// no cgroup delegated to that user, native cannot bound memory, pids and
// CPU for the sandbox as a whole: a run is refused, saying why and how to
// allow weaker bounds; allowed, it runs; doctor shows what is enforced.
func TestRootlessRefusesWeakLimits(t *testing.T) {
	testutil.RequiresRoot(t, "root")
	// The binary must be reachable by nobody.
	if err := os.Chmod(filepath.Dir(binary), 0o755); err != nil {
		t.Fatal(err)
	}
	// A home nobody reaches: t.TempDir's parent is root's alone.
	home, err := os.MkdirTemp("", "execbox-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	if err := os.Chown(home, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	asNobody := func(env []string, args ...string) result {
		t.Helper()
		cmd := exec.Command(binary, args...)
		cmd.Env = append([]string{"PATH=/usr/bin:/bin", "HOME=" + home, "XDG_RUNTIME_DIR=" + home}, env...)
		cmd.Dir = home
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		r := result{stdout: out.String(), stderr: errb.String()}
		if ee, ok := err.(*exec.ExitError); ok {
			r.code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return r
	}
	r := asNobody(nil, "run", "--backend", "native", "--", "true")
	if r.code != 125 || !strings.Contains(r.stderr, "limits_unenforceable") {
		t.Fatalf("rootless run without allow_weak_limits: exit %d, stderr %q", r.code, r.stderr)
	}
	// The fix on a line of its own; the cgroup diagnosis said once.
	if !regexp.MustCompile(`(?m)^to run with these weaker limits: EXECBOX_ALLOW_WEAK_LIMITS=true`).MatchString(r.stderr) ||
		strings.Count(r.stderr, "no usable cgroup") != 1 {
		t.Errorf("the refusal does not give the fix on its own line, or repeats why:\n%s", r.stderr)
	}
	r = asNobody([]string{"EXECBOX_ALLOW_WEAK_LIMITS=true"}, "run", "--backend", "native", "--", "id", "-u")
	if r.code != 0 || r.stdout != "65534\n" {
		t.Fatalf("rootless run with allow_weak_limits: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	// Allowed, the run says in one line that its limits are weaker.
	if w := regexp.MustCompile(`(?m)^execbox: warning: limits weaker than asked .*memory per process only.*$`).FindAllString(r.stderr, -1); len(w) != 1 {
		t.Errorf("no one-line warning of the weaker limits: %q", r.stderr)
	}
	r = asNobody(nil, "doctor")
	if !strings.Contains(r.stdout, "native enforces:") || !strings.Contains(r.stdout, "RLIMIT_AS") {
		t.Errorf("doctor as nobody does not show native's per-process bounds:\n%s\n%s", r.stdout, r.stderr)
	}
	// Consistent with what it selects: native is not ready for a run here.
	if !regexp.MustCompile(`(?m)^native +process +yes +no +backend native cannot enforce the limits`).MatchString(r.stdout) ||
		!strings.Contains(r.stdout, "selected:   none") {
		t.Errorf("doctor as nobody: native ready while nothing is selected:\n%s", r.stdout)
	}
}

// TestPidsLimitKeepsTheExitCode: a program that meets the pids limit
// exits with its own code, not execbox's 125, and the limit is named on
// stderr (and as the reason in --json) — when it coped and exited 0 too.
func TestPidsLimitKeepsTheExitCode(t *testing.T) {
	requireNative(t)
	for _, code := range []int{2, 0} {
		prog := fmt.Sprintf(testutil.CopesWithPids, code)
		r := execbox(t, nil, "", "run", "--backend", "native", "--pids", "16", "--", "python3", "-c", prog)
		if r.code != code || !strings.Contains(r.stderr, "limit of 16 processes was reached") {
			t.Errorf("exits %d after a refused fork: execbox exit %d, stderr %q; want %d and the limit named", code, r.code, r.stderr, code)
		}
		r = execbox(t, nil, "", "run", "--backend", "native", "--pids", "16", "--json", "--", "python3", "-c", prog)
		var res sandbox.Result
		if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || r.code != code || res.ExitCode != code {
			t.Fatalf("--json: exit %d, %v, %q", r.code, err, r.stdout)
		}
		if want := map[int]sandbox.Reason{2: sandbox.ReasonPidsLimit, 0: sandbox.ReasonExited}[code]; res.Reason != want {
			t.Errorf("--json, exits %d: reason %s, want %s", code, res.Reason, want)
		}
	}
}
