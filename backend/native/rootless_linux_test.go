package native

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
)

// rootlessUID is an unprivileged host user with no passwd entry.
const rootlessUID = 4242

// The backend as an unprivileged user: it works with what it can enforce
// and says what it cannot. The test (root) runs a copy of this test binary
// as uid 4242, which runs a sandbox and reports.
func TestRootless(t *testing.T) {
	if os.Getenv("EXECBOX_NATIVE_ROOTLESS_CHILD") != "" {
		t.Skip("in the child")
	}
	if os.Geteuid() != 0 {
		testutil.SkipOrFail(t, Name, "needs root to start the unprivileged child")
	}
	dir := t.TempDir()
	for d := dir; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		os.Chmod(d, 0o755) // the child must reach its copy of the binary
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "native.test")
	if err := copyFile(exe, bin); err != nil {
		t.Fatal(err)
	}
	// The init is the standalone, uninstrumented execbox-init, as in
	// production: its threads count in the rootless RLIMIT_NPROC the fork
	// bomb meets (a race-instrumented init has more).
	initPath := filepath.Join(dir, "execbox-init")
	if err := copyFile(buildInit(t), initPath); err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(dir, "work")
	os.Mkdir(work, 0o700)
	os.Chown(work, rootlessUID, rootlessUID)
	cmd := exec.Command(bin, "-test.run=^TestRootlessChild$", "-test.count=1")
	cmd.Env = []string{"EXECBOX_NATIVE_ROOTLESS_CHILD=" + work, "EXECBOX_NATIVE_ROOTLESS_INIT=" + initPath, "PATH=/usr/bin:/bin"}
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: rootlessUID, Gid: rootlessUID, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	if strings.Contains(string(out), "ROOTLESS-UNAVAILABLE") {
		testutil.SkipOrFail(t, Name, "unprivileged user namespaces unavailable: %s", out)
	}
	if err != nil {
		t.Fatalf("rootless child: %v\n%s", err, out)
	}
	var rep rootlessReport
	_, js, _ := strings.Cut(string(out), "ROOTLESS-REPORT ")
	js, _, _ = strings.Cut(js, "\n")
	if err := json.Unmarshal([]byte(js), &rep); err != nil {
		t.Fatalf("no report from the child: %v\n%s", err, out)
	}
	t.Logf("rootless: %s; fork bomb: %s; program output %q", rep.Health, rep.NprocReason, rep.Stdout)
	if rep.Stdout != "65534\n0000000000000000\nro\nlo\n" {
		t.Errorf("rootless sandbox: %q %q", rep.Stdout, rep.Stderr)
	}
	if !strings.Contains(rep.Health, "rootless") {
		t.Errorf("health does not say rootless: %q", rep.Health)
	}
	if rep.Enforcement["work_size"] == "" || !strings.Contains(rep.Enforcement["work_size"], "not enforced") {
		t.Errorf("rootless work_size enforcement = %q, want it to say not enforced", rep.Enforcement["work_size"])
	}
	if rep.FileOwner != rootlessUID {
		t.Errorf("a file the rootless program wrote is owned by %d, want %d", rep.FileOwner, rootlessUID)
	}
	// Without a pids controller RLIMIT_NPROC stops the bomb (fork fails,
	// Python exits 1); the reason cannot name the limit then.
	if rep.NprocReason != "exited 1" && rep.NprocReason != "pids_limit -1" {
		t.Errorf("rootless fork bomb ended %q, want stopped by the process limit (%s)", rep.NprocReason, rep.Stderr)
	}
	if !strings.Contains(rep.Enforcement["pids"], "RLIMIT_NPROC") && !strings.Contains(rep.Enforcement["pids"], "cgroup") {
		t.Errorf("rootless pids enforcement = %q", rep.Enforcement["pids"])
	}
}

type rootlessReport struct {
	Health         string
	Stdout, Stderr string
	Enforcement    map[string]string
	FileOwner      int
	NprocReason    string
}

// TestRootlessChild is the unprivileged side of TestRootless.
func TestRootlessChild(t *testing.T) {
	work := os.Getenv("EXECBOX_NATIVE_ROOTLESS_CHILD")
	if work == "" {
		t.Skip("run by TestRootless")
	}
	b := mustBackend(t, sandbox.Settings{WorkRoot: work, Config: testutil.With(DefaultConfig, func(c *Config) { c.InitPath = os.Getenv("EXECBOX_NATIVE_ROOTLESS_INIT") })})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h := b.Health(ctx)
	if !h.Available {
		fmt.Println("ROOTLESS-UNAVAILABLE", h.Reason)
		return
	}
	sb := testutil.Create(t, b, sandbox.Spec{})
	res := testutil.Exec(t, sb, "/bin/sh", "-c", `id -u; grep CapEff /proc/self/status | cut -f2
echo x > /x 2>/dev/null || echo ro; ls /sys/class/net 2>/dev/null || python3 -c 'import socket; print(*[n for _, n in socket.if_nameindex()])'
echo y > /work/f`)
	rep := rootlessReport{Health: h.Reason, Stdout: res.Stdout, Stderr: res.Stderr, Enforcement: res.Enforcement}
	if st, err := os.Stat(filepath.Join(sb.(*Sandbox).Work.Path, "f")); err == nil {
		rep.FileOwner = int(st.Sys().(*syscall.Stat_t).Uid)
	}
	bomb := testutil.Py(t, b, sandbox.Spec{Limits: sandbox.Limits{Pids: 16, Wall: 10 * time.Second}}, "import os\nwhile True: os.fork()")
	rep.NprocReason = fmt.Sprintf("%s %d", bomb.Reason, bomb.ExitCode)
	rep.Stderr += "\nfork bomb: " + bomb.Message + " " + bomb.Stderr
	js, _ := json.Marshal(rep)
	fmt.Println("ROOTLESS-REPORT " + string(js))
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
