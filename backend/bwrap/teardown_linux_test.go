package bwrap

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/execbox/execbox/internal/host/hostview"
	"github.com/execbox/execbox/internal/host/workdir"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
)

// What a crashed execbox left (a dead process's dir with a work dir tmpfs
// and a writable host bind in it) is removed, mounts first: the bind's
// source keeps its files. A live backend's dir is left alone.
func TestReconcileRemovesLeftovers(t *testing.T) {
	b := newBackend(t)
	base := b.Host().Base
	dead := filepath.Join(b.WorkRoot(), "999999999.deadbeef")
	sbDir := filepath.Join(dead, "sandbox")
	work := filepath.Join(sbDir, "work")
	if err := os.MkdirAll(work, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", work, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "keep"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := hostBind(hostview.Bind{Source: src, Target: "/out", Writable: true}, filepath.Join(sbDir, "m0")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { workdir.UnmountUnder(dead); os.RemoveAll(dead) })
	removed, err := b.Reconcile(t.Context())
	if err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	if !slices.Contains(removed, dead) {
		t.Fatalf("Reconcile removed %v, not %s", removed, dead)
	}
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Fatalf("%s still there: %v", dead, err)
	}
	if mps, _ := workdir.MountsUnder(dead); len(mps) != 0 {
		t.Fatalf("mounts left: %v", mps)
	}
	if _, err := os.Stat(filepath.Join(src, "keep")); err != nil {
		t.Fatalf("the bind's source lost its file: %v", err)
	}
	if _, err := os.Stat(base); err != nil {
		t.Fatalf("the live backend's dir was removed: %v", err)
	}
	// The live backend still works.
	testutil.WantOK(t, testutil.Sh(t, b, sandbox.Spec{}, "true"))
}

// Close removes the sandbox's dir and every mount in it, and leaves the
// sources of its mounts alone.
func TestCloseRemovesMounts(t *testing.T) {
	b := newBackend(t)
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "keep"), []byte("x"), 0o644)
	sb, err := b.Create(t.Context(), sandbox.Spec{Policy: sandbox.Policy{Mounts: []sandbox.Mount{{Source: src, Target: "/out", Writable: true}}}})
	if err != nil {
		t.Fatal(err)
	}
	dir := sb.(*Sandbox).Dir
	if mps, _ := workdir.MountsUnder(dir); len(mps) != 2 {
		t.Fatalf("mounts of an open sandbox: %v, want the work dir and the bind", mps)
	}
	if err := sb.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if mps, _ := workdir.MountsUnder(dir); len(mps) != 0 {
		t.Fatalf("mounts left after Close: %v", mps)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("%s left after Close: %v", dir, err)
	}
	if _, err := os.Stat(filepath.Join(src, "keep")); err != nil {
		t.Fatalf("the mount's source lost its file: %v", err)
	}
}
