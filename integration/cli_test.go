package integration

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestInterruptExits130: SIGINT to `execbox run` while the program runs
// kills the program's tree and exits 130, like a shell.
func TestInterruptExits130(t *testing.T) {
	requireNative(t)
	marker := fmt.Sprint(time.Now().UnixNano()%90000000 + 10000000)
	cmd := exec.Command(binary, "run", "--backend", "native", "--", "sh", "-c", "sleep "+marker+" & echo ready; wait")
	cmd.Env = append(hermeticEnv(), "EXECBOX_WORK_ROOT="+workRoot(t))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("first line %q %v; stderr %s", line, err, stderr.String())
	}
	cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("execbox did not exit within 30 s of SIGINT")
	}
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Fatalf("exit %d, want 130; stderr %s", code, stderr.String())
	}
	if left := alive("sleep " + marker); len(left) > 0 {
		t.Fatalf("the program's tree outlived the interrupt: %v", left)
	}
}

// TestRunFlagAndLimitExits: the exit code and the message of each way a
// run can end or be refused before it starts.
func TestRunFlagAndLimitExits(t *testing.T) {
	requireNative(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "in.txt")
	writeFile(t, in, "data\n")
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr []string
	}{
		{"output limit kill", []string{"--output-limit", "1k", "--output-limit-kill", "--", "sh", "-c", "while :; do echo xxxxxxxxxxxxxxxx; done"},
			137, []string{"run ended: output_limit", "stdout was truncated"}},
		{"output limit keeps running", []string{"--output-limit", "1k", "--", "sh", "-c", "i=0; while [ $i -lt 1000 ]; do echo xxxxxxxxxxxxxxxx; i=$((i+1)); done; exit 3"},
			3, []string{"stdout was truncated"}},
		{"bad memory flag", []string{"--memory", "lots", "--", "true"}, 125, []string{"--memory", "error code flag_invalid"}},
		{"bad timeout flag", []string{"--timeout", "soon", "--", "true"}, 125, []string{"--timeout", "error code flag_invalid"}},
		{"bad network flag", []string{"--network", "bridge", "--", "true"}, 125, []string{"--network", "error code flag_invalid"}},
		{"unknown flag", []string{"--no-such-flag", "--", "true"}, 125, []string{"unknown flag"}},
		{"missing --file", []string{"--file", filepath.Join(dir, "nope"), "--", "true"}, 125, []string{"error code file_invalid"}},
		{"--file escaping the work dir", []string{"--file", in + ":../x", "--", "true"}, 125, []string{"error code path_invalid"}},
		{"--file read in", []string{"--file", in + ":sub/in.txt", "--", "cat", "sub/in.txt"}, 0, nil},
		{"timeout", []string{"--timeout", "1s", "--", "sleep", "30"}, 124, []string{"run ended: timeout"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := execbox(t, nil, "", append([]string{"run", "--backend", "native"}, tc.args...)...)
			if r.code != tc.code {
				t.Fatalf("exit %d, want %d; stderr %q", r.code, tc.code, r.stderr)
			}
			for _, want := range tc.stderr {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("stderr %q lacks %q", r.stderr, want)
				}
			}
			if tc.name == "--file read in" && r.stdout != "data\n" {
				t.Errorf("stdout %q", r.stdout)
			}
		})
	}
}

// TestArtifactsFlag: --artifacts writes the program's files below the
// directory and never through a symlink planted in it.
func TestArtifactsFlag(t *testing.T) {
	requireNative(t)
	outside := t.TempDir()
	victim := filepath.Join(outside, "victim")
	writeFile(t, victim, "untouched")
	arts := t.TempDir()
	if err := os.Symlink(victim, filepath.Join(arts, "out.txt")); err != nil {
		t.Fatal(err)
	}
	r := execbox(t, nil, "", "run", "--backend", "native", "--artifacts", arts, "--", "sh", "-c", "echo owned > out.txt")
	if r.code != 125 || !strings.Contains(r.stderr, "out.txt") {
		t.Errorf("through a planted symlink: exit %d, stderr %q; want 125 naming the artifact", r.code, r.stderr)
	}
	if b, _ := os.ReadFile(victim); string(b) != "untouched" {
		t.Fatalf("the file outside was changed: %q", b)
	}
	arts = t.TempDir()
	r = execbox(t, nil, "", "run", "--backend", "native", "--artifacts", arts, "--", "sh", "-c", "mkdir -p d && echo hi > d/e.txt")
	if b, err := os.ReadFile(filepath.Join(arts, "d", "e.txt")); r.code != 0 || err != nil || string(b) != "hi\n" {
		t.Fatalf("exit %d (%s): artifact %q %v", r.code, r.stderr, b, err)
	}
}

// hermeticEnv is the test's environment without EXECBOX_* variables.
func hermeticEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "EXECBOX_") {
			env = append(env, kv)
		}
	}
	return env
}
