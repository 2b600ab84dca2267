package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/execbox/execbox/internal/testutil"
)

// requireNative skips unless the native backend can run here with its
// full isolation (root), and fails instead when EXECBOX_REQUIRE names it.
func requireNative(t *testing.T) {
	t.Helper()
	testutil.RequiresRoot(t, "native")
}

func TestMainJobOnDefaultBackend(t *testing.T) {
	requireNative(t)
	r := execbox(t, nil, "", "run", "--", "python3", "-c", `print("hello from a sandbox")`)
	if r.code != 0 || r.stdout != "hello from a sandbox\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	// With no flags the run goes where auto says: native on a fresh host,
	// a stronger backend (gvisor) where one is ready; never weaker.
	var rep struct{ Backend string }
	if err := json.Unmarshal([]byte(execbox(t, nil, "", "doctor", "--json").stdout), &rep); err != nil {
		t.Fatal(err)
	}
	r = execbox(t, nil, "", "run", "--json", "--", "id", "-u")
	var res struct {
		Backend, Isolation, Stdout string
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.Backend != rep.Backend || res.Isolation == "none" || res.Stdout != "65534\n" {
		t.Fatalf("result %+v (%v), auto picks %q: %s", res, err, rep.Backend, r.stderr)
	}
	r = execbox(t, nil, "", "run", "--backend", "native", "--json", "--", "id", "-u")
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.Backend != "native" || res.Isolation != "process" || res.Stdout != "65534\n" {
		t.Fatalf("native: result %+v (%v): %s", res, err, r.stderr)
	}
}

func TestNativeTimeoutKillsTree(t *testing.T) {
	requireNative(t)
	marker := fmt.Sprint(time.Now().UnixNano()%90000000 + 10000000)
	script := fmt.Sprintf("sleep %s & setsid sleep %s & wait", marker, marker)
	r := execbox(t, nil, "", "run", "--backend", "native", "--timeout", "1s", "--", "sh", "-c", script)
	if r.code != 124 || r.took > 4*time.Second {
		t.Fatalf("exit %d after %v, want 124 after about a second; stderr %q", r.code, r.took, r.stderr)
	}
	if left := alive("sleep " + marker); len(left) > 0 {
		t.Fatalf("still alive after the run: %v", left)
	}
}

type fnResponse struct {
	OK              bool            `json:"ok"`
	Data            json.RawMessage `json:"data"`
	Error           string          `json:"error"`
	Code            string          `json:"code"`
	Type            string          `json:"type"`
	Stdout          string          `json:"stdout"`
	StdoutTruncated bool            `json:"stdout_truncated"`
	Backend         string          `json:"backend"`
}

// fn calls `execbox fn` on the native backend.
func fn(t *testing.T, request string) fnResponse {
	t.Helper()
	r := execbox(t, []string{"EXECBOX_BACKEND=native"}, request, "fn")
	var resp fnResponse
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &resp) != nil {
		t.Fatalf("execbox fn: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	return resp
}

func TestFnSeedExampleOnNative(t *testing.T) {
	requireNative(t)
	resp := fn(t, `{"code": "def main(a, b):\n    return a + b", "params": {"a": 2, "b": 40}}`)
	if !resp.OK || string(resp.Data) != "42" || resp.Backend != "native" {
		t.Fatalf("response %+v", resp)
	}
	resp = fn(t, `{"code": "def main():\n    print('x' * 102400)\n    return 1"}`)
	if !resp.OK || string(resp.Data) != "1" || len(resp.Stdout) != 8192 || !resp.StdoutTruncated {
		t.Fatalf("100 KiB print: ok=%v data=%s stdout=%d truncated=%v", resp.OK, resp.Data, len(resp.Stdout), resp.StdoutTruncated)
	}
	resp = fn(t, `{"code": "def main():\n    return 1/0"}`)
	if resp.OK || resp.Error != "division by zero" || resp.Type != "ZeroDivisionError" || resp.Code != "user_error" {
		t.Fatalf("1/0: %+v", resp)
	}
	resp = fn(t, `{"code": "function main(a, b) { return a * b }", "params": {"a": 6, "b": 7}, "language": "javascript"}`)
	if !resp.OK || string(resp.Data) != "42" {
		t.Fatalf("javascript: %+v", resp)
	}
}

func TestFnCodeFileAndLint(t *testing.T) {
	requireNative(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "f.py")
	writeFile(t, good, "def main(a, b):\n    return a + b\n")
	r := execbox(t, []string{"EXECBOX_BACKEND=native"}, "", "fn", "--code-file", good, "--params", `{"a":2,"b":40}`)
	if r.code != 0 || !strings.HasPrefix(r.stdout, `{"ok":true,"data":42`) {
		t.Fatalf("exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	bad := filepath.Join(dir, "bad.py")
	marker := filepath.Join(dir, "ran")
	writeFile(t, bad, "open("+fmt.Sprintf("%q", marker)+", 'w')\ndef f(:\n")
	r = execbox(t, nil, "", "lint", bad)
	if r.code != 1 || !strings.Contains(r.stdout, bad+":2:7: error:") {
		t.Fatalf("lint: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	r = execbox(t, nil, "", "lint", good)
	if r.code != 0 || r.stdout != "" {
		t.Fatalf("lint of valid code: exit %d, %q", r.code, r.stdout)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatal("lint ran the code")
	}
}

// requireGVisor skips unless runsc can run here, and fails instead when
// EXECBOX_REQUIRE names gvisor.
func requireGVisor(t *testing.T) {
	t.Helper()
	requireNative(t)
	var rep struct {
		Candidates []struct {
			Name   string
			Ready  bool
			Reason string
		}
	}
	json.Unmarshal([]byte(execbox(t, nil, "", "doctor", "--json").stdout), &rep)
	for _, c := range rep.Candidates {
		if c.Name == "gvisor" {
			if !c.Ready {
				testutil.SkipOrFail(t, "gvisor", "gvisor is not ready: %s", c.Reason)
			}
			return
		}
	}
	t.Fatal("gvisor is not registered")
}

// The strict tier runs under gVisor: its kernel is not the host's.
func TestTierStrictRunsOnGVisor(t *testing.T) {
	requireGVisor(t)
	var host unix.Utsname
	unix.Uname(&host)
	hostRelease := unix.ByteSliceToString(host.Release[:])
	r := execbox(t, nil, "", "run", "--tier", "strict", "--json", "--", "python3", "-c", "import os; print(os.uname().release)")
	var res struct{ Backend, Isolation, Stdout string }
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.Backend != "gvisor" || res.Isolation != "kernel" {
		t.Fatalf("result %+v (%v): %s", res, err, r.stderr)
	}
	if got := strings.TrimSpace(res.Stdout); got == "" || got == hostRelease {
		t.Fatalf("kernel release inside %q, host %q", got, hostRelease)
	}
	// A tier never lowers what is configured, and never names a backend.
	r = execbox(t, []string{"EXECBOX_BACKEND=gvisor"}, "", "run", "--tier", "fast", "--json", "--", "true")
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.Backend != "gvisor" {
		t.Fatalf("tier fast under a configured gvisor ran on %q (%v): %s", res.Backend, err, r.stderr)
	}
	r = execbox(t, []string{"EXECBOX_ALLOW_UNISOLATED=true"}, "", "run", "--tier", "local", "--", "true")
	if r.code != 125 || !strings.Contains(r.stderr, "never names a backend") {
		t.Fatalf("tier local: exit %d, %q", r.code, r.stderr)
	}
	r = execbox(t, []string{"EXECBOX_BACKEND=off"}, "", "run", "--tier", "strict", "--", "true")
	if r.code != 125 || !strings.Contains(r.stderr, "turned off") {
		t.Fatalf("off with tier strict: exit %d, %q", r.code, r.stderr)
	}
}
