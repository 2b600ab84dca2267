package workdir

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// required reports whether EXECBOX_REQUIRE names a backend that keeps its
// work root here: then a missing prerequisite fails instead of skipping.
func required() bool {
	for _, f := range strings.FieldsFunc(os.Getenv("EXECBOX_REQUIRE"), func(r rune) bool { return r == ',' || r == ' ' }) {
		if f == "native" || f == "bwrap" || f == "gvisor" || f == "workdir" {
			return true
		}
	}
	return false
}

// needRoot skips (fails when required) unless the test may mount.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if required() {
			t.Fatalf("EXECBOX_REQUIRE=%s but not root: cannot mount", os.Getenv("EXECBOX_REQUIRE"))
		}
		t.Skip("mounting needs root")
	}
}

// lockedEnv makes the test binary act as the child of TestRemoveTreeRefuses.
const lockedEnv = "WORKDIR_TEST_REMOVE_LOCKED"

func TestMain(m *testing.M) {
	if dir := os.Getenv(lockedEnv); dir != "" {
		// In a new user and mount namespace the mounts copied from the
		// parent are locked: unmounting them fails with EINVAL, which
		// UnmountUnder ignores, so they are still there.
		if err := RemoveTree(dir); err != nil {
			fmt.Print("refused: ", err)
			os.Exit(0)
		}
		fmt.Print("removed")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// deadPID is the PID of a child that has exited and been reaped.
func deadPID(t *testing.T) int {
	t.Helper()
	c := exec.Command("sleep", "0")
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	return c.Process.Pid
}

// livePID is the PID of a child that runs until the test ends.
func livePID(t *testing.T) int {
	t.Helper()
	c := exec.Command("sleep", "60")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	return c.Process.Pid
}

func mkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
}

// bindWithFile bind-mounts a fresh directory holding a file "keep" on
// target (writable) and returns the file's source path.
func bindWithFile(t *testing.T, target string) string {
	t.Helper()
	src := t.TempDir()
	keep := filepath.Join(src, "keep")
	if err := os.WriteFile(keep, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	mkdir(t, target)
	if err := unix.Mount(src, target, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(target, unix.MNT_DETACH) })
	return keep
}

// Bases of dead processes (and of this PID with no live Base) are removed,
// their tmpfs and bind detached first and the bind's source kept; bases of
// live processes, the open Base's own, other names, symlinks and what
// another user owns are kept.
func TestReconcile(t *testing.T) {
	needRoot(t)
	root := filepath.Join(t.TempDir(), "work")
	d, err := OpenBase(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	st, err := os.Stat(d.Path)
	if err != nil || st.Mode().Perm() != 0o711 || !st.IsDir() {
		t.Fatalf("own base %s: %v, %v; want a 0711 directory", d.Path, st.Mode(), err)
	}
	if st, _ := os.Stat(root); st.Mode().Perm() != 0o711 {
		t.Fatalf("work root mode %v, want 0711", st.Mode())
	}

	dead := filepath.Join(root, strconv.Itoa(deadPID(t))+".dead")
	tmpfs := filepath.Join(dead, "sb", "work")
	mkdir(t, tmpfs)
	if err := unix.Mount("tmpfs", tmpfs, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { UnmountUnder(dead); os.RemoveAll(dead) })
	if err := os.WriteFile(filepath.Join(tmpfs, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	keep := bindWithFile(t, filepath.Join(dead, "sb", "m0"))
	ownStale := filepath.Join(root, strconv.Itoa(os.Getpid())+".stale")
	mkdir(t, ownStale)
	live := filepath.Join(root, strconv.Itoa(livePID(t))+".live")
	mkdir(t, live)
	other := filepath.Join(root, "notapid")
	mkdir(t, other)
	// A dead process's name on a symlink (to a directory of dead-looking
	// entries) and on a directory another user owns: neither is ours.
	target := t.TempDir()
	mkdir(t, filepath.Join(target, strconv.Itoa(deadPID(t))+".x"))
	link := filepath.Join(root, strconv.Itoa(deadPID(t))+".link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	foreign := filepath.Join(root, strconv.Itoa(deadPID(t))+".foreign")
	mkdir(t, foreign)
	if err := os.Chown(foreign, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if mps, _ := MountsUnder(dead); len(mps) != 2 {
		t.Fatalf("mounts below the dead base: %v, want the tmpfs and the bind", mps)
	}

	removed, err := Reconcile(root)
	if err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	slices.Sort(removed)
	want := []string{dead, ownStale}
	slices.Sort(want)
	if !slices.Equal(removed, want) {
		t.Fatalf("removed %v, want %v", removed, want)
	}
	for _, p := range want {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("%s still there: %v", p, err)
		}
	}
	if mps, _ := MountsUnder(dead); len(mps) != 0 {
		t.Fatalf("mounts left below the dead base: %v", mps)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Fatalf("the bind's source lost its file: %v", err)
	}
	for _, p := range []string{d.Path, live, other, link, foreign, target} {
		if _, err := os.Lstat(p); err != nil {
			t.Fatalf("%s was removed: %v", p, err)
		}
	}
	if ents, _ := os.ReadDir(target); len(ents) != 1 {
		t.Fatalf("reconciling went through the symlink: %v left in its target", ents)
	}
}

// RemoveTree never empties a writable bind it could not detach: in a user
// namespace the bind is locked, and RemoveTree refuses.
func TestRemoveTreeRefusesWhileMounted(t *testing.T) {
	needRoot(t)
	dir := filepath.Join(t.TempDir(), "1.dead")
	keep := bindWithFile(t, filepath.Join(dir, "m0"))

	c := exec.Command(os.Args[0], "-test.run=^$")
	c.Env = append(os.Environ(), lockedEnv+"="+dir)
	c.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}},
	}
	out, err := c.CombinedOutput()
	if err != nil {
		if required() {
			t.Fatalf("running in a user namespace: %v: %s", err, out)
		}
		t.Skipf("no user namespaces: %v: %s", err, out)
	}
	if !strings.HasPrefix(string(out), "refused: ") || !strings.Contains(string(out), "mounts still below") {
		t.Fatalf("RemoveTree with a locked bind below: %q, want a refusal", out)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Fatalf("the bind's source lost its file: %v", err)
	}

	// Here the bind can be detached: RemoveTree removes the tree, and the
	// source keeps its file.
	if err := RemoveTree(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("%s still there: %v", dir, err)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Fatalf("the bind's source lost its file: %v", err)
	}
}

// Close removes the own base (with what is in it) and the work root when
// empty, but not a work root another process still uses.
func TestClose(t *testing.T) {
	parent := t.TempDir()
	root := filepath.Join(parent, "work")
	d, err := OpenBase(root)
	if err != nil {
		t.Fatal(err)
	}
	mkdir(t, filepath.Join(d.Path, "sb"))
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Fatalf("empty work root still there: %v", err)
	}

	d, err = OpenBase(root)
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(root, strconv.Itoa(livePID(t))+".other")
	mkdir(t, other)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(d.Path); !os.IsNotExist(err) {
		t.Fatalf("own base still there: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatalf("the work root in use was removed: %v", err)
	}
}

// CloseEmpty refuses while something is left in the base, and the base
// stays live (Reconcile keeps it); once empty, it is removed.
func TestCloseEmpty(t *testing.T) {
	root := filepath.Join(t.TempDir(), "work")
	d, err := OpenBase(root)
	if err != nil {
		t.Fatal(err)
	}
	sb := filepath.Join(d.Path, "sb")
	mkdir(t, sb)
	if err := d.CloseEmpty(); err == nil {
		t.Fatal("CloseEmpty with a sandbox dir left: no error")
	}
	if removed, err := Reconcile(root); err != nil || len(removed) != 0 {
		t.Fatalf("Reconcile after a refused CloseEmpty: %v, %v; want the base kept", removed, err)
	}
	os.Remove(sb)
	if err := d.CloseEmpty(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Fatalf("empty work root still there: %v", err)
	}
}
