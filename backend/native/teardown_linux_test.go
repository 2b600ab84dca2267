package native

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox/internal/host/proc"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
)

// 500 sandboxes in a row, then nothing is left: no cgroup, no mount under
// the work root, no work dir, no child process, no goroutine.
func Test500RunsLeaveNothing(t *testing.T) {
	b := newBackend(t)
	n := 500
	switch {
	case testing.Short():
		n = 50
	case raceEnabled:
		n = 100
	}
	testutil.Run(t, b, sandbox.Spec{}, "/bin/true") // warm-up: the base dir is made on first use
	e := b.Host()
	if e.Cgroups != nil {
		// The cgroup probe below must see a live sandbox's leaf before its
		// "nothing left" means anything.
		sb, err := b.Create(context.Background(), sandbox.Spec{})
		if err != nil {
			t.Fatal(err)
		}
		if len(e.Cgroups.Leaves(os.Getpid())) == 0 {
			t.Errorf("the cgroup probe does not see a live sandbox's leaf in %s", e.Cgroups.Version())
		}
		if err := sb.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	goroutines := runtime.NumGoroutine()
	start := time.Now()
	for i := range n {
		res, err := sandbox.Run(context.Background(), b, sandbox.Spec{}, &sandbox.Process{Args: []string{"/bin/true"}})
		if err != nil || !res.Succeeded() {
			t.Fatalf("run %d: %v %+v", i, err, res)
		}
	}
	t.Logf("%d runs in %v (%v each)", n, time.Since(start).Round(time.Millisecond), (time.Since(start) / time.Duration(n)).Round(time.Microsecond))

	// Work dirs: only the root mount point is left in this process's dir.
	ents, err := os.ReadDir(e.Base)
	if err != nil {
		t.Fatal(err)
	}
	for _, ent := range ents {
		if ent.Name() != ".root" {
			t.Errorf("left in the work root: %s", ent.Name())
		}
	}
	// Mounts: none under the work root (the inits' mounts were in their
	// own namespaces; the work dir tmpfs is unmounted by Close).
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(mi)) {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], b.WorkRoot()) {
			t.Errorf("mount left under the work root: %s", strings.TrimSpace(line))
		}
	}
	// Cgroups: no leaf of this process in any hierarchy.
	if e.Cgroups != nil {
		for _, l := range e.Cgroups.Leaves(os.Getpid()) {
			t.Errorf("cgroup left: %s", l)
		}
	}
	// Processes: no child of this process.
	if kids := initPIDs(t); len(kids) > 0 {
		t.Errorf("sandbox inits left: %v", kids)
	}
	for pid, ppid := range proc.Parents() {
		if ppid == os.Getpid() {
			comm, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
			t.Errorf("child process left: %d (%s)", pid, strings.TrimSpace(string(comm)))
		}
	}
	// Goroutines: back where they were (give exiting ones a moment).
	for deadline := time.Now().Add(2 * time.Second); runtime.NumGoroutine() > goroutines+1 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > goroutines+1 {
		t.Errorf("goroutines grew from %d to %d", goroutines, g)
	}
}

// What a crashed execbox left — a work dir with its tmpfs still mounted,
// under a dead PID's directory — is removed on the next start.
func TestReconcileRemovesLeftovers(t *testing.T) {
	if os.Geteuid() != 0 {
		testutil.SkipOrFail(t, Name, "needs root to mount")
	}
	root := t.TempDir()
	workRoot := filepath.Join(root, "native")
	// PID 2^22+1 is above the kernel's pid_max limit: never alive.
	dead := filepath.Join(workRoot, "4194305.deadbeef")
	work := filepath.Join(dead, "execbox-123")
	if err := os.MkdirAll(work, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := mountTmpfs(work); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "file"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	live := filepath.Join(workRoot, "1.cafe") // PID 1 lives: kept
	if err := os.MkdirAll(live, 0o700); err != nil {
		t.Fatal(err)
	}
	b := mustBackend(t, sandbox.Settings{WorkRoot: root})
	if e := b.Host(); e.Err != nil {
		t.Fatal(e.Err)
	}
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("the dead process's dir is still there: %v", err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("a live process's dir was removed: %v", err)
	}
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mi), work) {
		t.Errorf("the leftover mount is still there")
	}
	removed, err := b.Reconcile(context.Background())
	if err != nil || len(removed) != 0 {
		t.Errorf("second Reconcile: %v %v, want nothing to do", removed, err)
	}
}
