package native

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
)

var (
	initBinOnce sync.Once
	initBinDir  string // removed by TestMain
	initBin     string
	initBinErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if initBinDir != "" {
		os.RemoveAll(initBinDir)
	}
	os.Exit(code)
}

// buildInit builds cmd/execbox-init (static, CGO_ENABLED=0) once per test
// binary and returns its path.
func buildInit(t testing.TB) string {
	t.Helper()
	initBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "execbox-init-test-")
		if err != nil {
			initBinErr = err
			return
		}
		initBinDir = dir
		initBin = filepath.Join(dir, "execbox-init")
		cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", initBin, "github.com/execbox/execbox/cmd/execbox-init")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if _, file, _, ok := runtime.Caller(0); ok {
			cmd.Dir = filepath.Dir(file) // inside the module, wherever the test binary runs
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			initBinErr = err
			initBin = string(out)
		}
	})
	if initBinErr != nil {
		testutil.SkipOrFail(t, Name, "building execbox-init: %v %s", initBinErr, initBin)
	}
	return initBin
}

// withInit is a backend using the standalone init at path.
func withInit(t testing.TB, path string) *Backend {
	t.Helper()
	b := mustBackend(t, sandbox.Settings{WorkRoot: t.TempDir(), Config: testutil.With(DefaultConfig, func(c *Config) { c.InitPath = path })})
	return b
}

// The standalone cmd/execbox-init runs sandboxes like the re-executed
// binary does; a configured path that is not executable makes the backend
// unavailable, and a missing standalone init falls back to re-exec.
func TestStandaloneInit(t *testing.T) {
	newBackend(t) // gates on root and a working backend
	path := buildInit(t)
	b := withInit(t, path)
	if got := initCmdline(t, b); got != "execbox-init" {
		t.Fatalf("with the standalone init the init runs %q", got)
	}
	if h := b.Health(t.Context()); !h.Available || h.Details["init"] != path {
		t.Fatalf("health with the standalone init: %+v", h)
	}

	bad := withInit(t, filepath.Join(t.TempDir(), "missing"))
	if h := bad.Health(t.Context()); h.Available || !strings.Contains(h.Reason, "init_path") {
		t.Fatalf("health with a missing init_path: %+v", h)
	}
	if _, err := bad.Create(t.Context(), sandbox.Spec{}); sandbox.CodeOf(err) != "native_unavailable" {
		t.Fatalf("Create with a missing init_path: %v", err)
	}

	reexec := withInit(t, "reexec")
	if got := initCmdline(t, reexec); got != "execbox-reexec:nsinit" {
		t.Fatalf("init_path=reexec: the init runs %q", got)
	}
}

// initCmdline runs a sandbox of b and returns its init's command line as
// the host sees it (the program cannot see PID 1).
func initCmdline(t *testing.T, b *Backend) string {
	t.Helper()
	sb := testutil.Create(t, b, sandbox.Spec{})
	done := make(chan *sandbox.Result, 1)
	go func() { done <- testutil.Exec(t, sb, "/bin/sleep", "2") }()
	defer func() { testutil.WantOK(t, <-done) }()
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for _, pid := range initPIDs(t) {
			if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); err == nil {
				return strings.TrimRight(string(b), "\x00")
			}
		}
	}
	t.Fatal("found no running init")
	return ""
}
