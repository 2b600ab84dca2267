package native

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox/internal/host/proc"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/internal/testutil/rootimage"
	"github.com/execbox/execbox/sandbox"
)

// Seed 004's four checks: uid 65534, read-only root, no network, host
// secrets invisible.
func TestSeed004Checks(t *testing.T) {
	b := newBackend(t)
	testutil.Seed004(t, b, testutil.Seed004Opts{
		WorkDir:     func(sb sandbox.Sandbox) string { return sb.(*Sandbox).Work.Path },
		WritePaths:  []string{"/x", "/etc/x", "/usr/x", "/bin/x", "/dev/x", "/proc/x"},
		AppendPaths: []string{"/usr/bin/true", "/etc/passwd"},
		SecretEnv:   "EXECBOX_NATIVE_SECRET",
		ProcFiles:   []string{"/proc/self/environ", "/proc/1/environ"},
		InitRoot:    true,
	})
}

// The init's own environment is empty, so /proc/1/environ (which a program
// could read if it could reach it) holds nothing; seen from the host too.
func TestInitEnvironEmpty(t *testing.T) {
	b := newBackend(t)
	t.Setenv("EXECBOX_NATIVE_INIT_SECRET", "should-not-leak")
	res := testutil.Sh(t, b, sandbox.Spec{}, `if env=$(cat /proc/1/environ 2>&1); then printf 'read:%s' "$env"; else echo denied; fi
test -e /proc/1 && echo "init visible"; true`)
	testutil.WantOK(t, res)
	if res.Stdout != "read:" && res.Stdout != "denied\n" {
		t.Fatalf("/proc/1/environ inside = %q, want empty or unreadable", res.Stdout)
	}
	// Stronger: the init is not visible at all (proc's hidepid=2).
	if strings.Contains(res.Stdout, "init visible") {
		t.Errorf("the init is visible in the sandbox's /proc")
	}

	// From the host: find the running init and read its environ.
	sb := testutil.Create(t, b, sandbox.Spec{})
	done := make(chan *sandbox.Result, 1)
	go func() { done <- testutil.Exec(t, sb, "/bin/sleep", "3") }()
	var found bool
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline) && !found; time.Sleep(20 * time.Millisecond) {
		for _, pid := range initPIDs(t) {
			env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
			if err != nil {
				continue
			}
			found = true
			if len(env) != 0 {
				t.Fatalf("the init's /proc/%d/environ holds %q", pid, env)
			}
		}
	}
	if !found {
		t.Fatal("found no running init to check")
	}
	<-done
}

// initPIDs lists this process's children that are sandbox inits.
func initPIDs(t *testing.T) []int {
	t.Helper()
	var out []int
	for pid, ppid := range proc.Parents() {
		if ppid != os.Getpid() {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if strings.Contains(string(cmd), "nsinit") || strings.Contains(string(cmd), "execbox-init") {
			out = append(out, pid)
		}
	}
	return out
}

// TestHostileImageWorkDir: an image whose /work is a symlink fails the
// sandbox's start instead of mounting the work dir where the link leads
// (the conformance suite's root_image case shows the same for the files
// the backend generates).
func TestHostileImageWorkDir(t *testing.T) {
	b := newBackend(t)
	img := rootimage.Host(t)
	spec := sandbox.Spec{Root: &sandbox.RootImage{Ref: "hostile", Dir: img}}
	// /usr is a directory both of the host (where the mount would follow
	// the link before the root moves) and of the image.
	os.RemoveAll(filepath.Join(img, "work"))
	if err := os.Symlink("/usr", filepath.Join(img, "work")); err != nil {
		t.Fatal(err)
	}
	res, err := sandbox.Run(context.Background(), b, spec, &sandbox.Process{Args: []string{"/bin/sh", "-c", "pwd"}})
	if err != nil || res.Reason != sandbox.ReasonSandboxError || !strings.Contains(res.Message, "mount point /work") {
		t.Fatalf("a sandbox started with /work a symlink (the work dir mounted through it): %v %+v", err, res)
	}
}
