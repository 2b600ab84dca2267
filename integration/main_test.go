package integration

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// binary is the execbox binary built for this test run.
var binary string

func TestMain(m *testing.M) {
	// EXECBOX_TEST_BINARY runs the tests against a binary built elsewhere
	// (an older tree's, to see a test fail there).
	if b := os.Getenv("EXECBOX_TEST_BINARY"); b != "" {
		binary = b
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "execbox-integration-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "execbox")
	build := exec.Command("go", "build", "-o", binary, "../cmd/execbox")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building execbox: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type result struct {
	stdout, stderr string
	code           int
	took           time.Duration
}

// execbox runs the binary with args, extra environment and stdin.
func execbox(t *testing.T, env []string, stdin string, args ...string) result {
	t.Helper()
	cmd := exec.Command(binary, args...)
	// Hermetic: no EXECBOX_* from the test's own environment.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "EXECBOX_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	cmd.Env = append(cmd.Env, "EXECBOX_WORK_ROOT="+workRoot(t))
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String(), took: time.Since(start)}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running execbox: %v", err)
	}
	return r
}

func workRoot(t *testing.T) string {
	t.Helper()
	d := filepath.Join(t.TempDir(), "work")
	return d
}

// alive lists processes whose command line contains marker.
func alive(marker string) []string {
	var found []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.Contains(string(bytes.ReplaceAll(b, []byte{0}, []byte{' '})), marker) {
			found = append(found, e.Name()+": "+string(bytes.ReplaceAll(b, []byte{0}, []byte{' '})))
		}
	}
	return found
}
