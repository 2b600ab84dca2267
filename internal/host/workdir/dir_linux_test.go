package workdir

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
)

func newWD(t *testing.T) *Dir {
	t.Helper()
	w, err := New(t.TempDir(), os.Getuid(), os.Getgid())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Remove() })
	return w
}

func TestWriteAndCollect(t *testing.T) {
	w := newWD(t)
	if err := w.Write(map[string][]byte{"in.txt": []byte("in"), "d/sub/b.txt": []byte("b")}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(w.Path, "d/sub/b.txt")); string(b) != "b" {
		t.Fatalf("input not written: %q", b)
	}
	// The "program": a new file, a changed input, an untouched input, a symlink, a fifo.
	os.WriteFile(filepath.Join(w.Path, "out.txt"), []byte("out"), 0o644)
	os.WriteFile(filepath.Join(w.Path, "in.txt"), []byte("changed!"), 0o644)
	os.Symlink("/etc/passwd", filepath.Join(w.Path, "leak"))
	os.Symlink("/etc", filepath.Join(w.Path, "d/dirlink"))
	arts, err := w.Collect(10, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range arts.Files {
		got = append(got, a.Path+"="+string(a.Data))
	}
	if strings.Join(got, ",") != "in.txt=changed!,out.txt=out" {
		t.Fatalf("artifacts = %v", got)
	}
	var skipped []string
	for _, s := range arts.Skipped {
		skipped = append(skipped, s.Path+":"+s.Reason)
	}
	if strings.Join(skipped, ",") != "d/dirlink:symlink,leak:symlink" {
		t.Fatalf("skipped = %v", skipped)
	}
}

func TestCollectBounds(t *testing.T) {
	w := newWD(t)
	for _, n := range []string{"a", "b", "c"} {
		os.WriteFile(filepath.Join(w.Path, n), []byte("12345"), 0o644)
	}
	arts, err := w.Collect(2, 1<<20)
	if err != nil || len(arts.Files) != 2 || len(arts.Skipped) != 1 || arts.Skipped[0].Reason != "file count limit" {
		t.Fatalf("count bound: %+v %v", arts, err)
	}
	arts, _ = w.Collect(10, 10) // two files fit exactly, the third does not
	if len(arts.Files) != 2 || len(arts.Skipped) != 1 || arts.Skipped[0].Reason != "byte limit" {
		t.Fatalf("byte bound: %+v", arts)
	}
	arts, _ = w.Collect(3, 15)
	if len(arts.Files) != 3 || len(arts.Skipped) != 0 {
		t.Fatalf("at the bounds: %+v", arts)
	}
}

func TestWriteRejects(t *testing.T) {
	w := newWD(t)
	// The link leads to a victim of the test's, never to a host place: a
	// broken Write would write through it (once /etc/passwd was "x" after
	// a deliberate break of RESOLVE_NO_SYMLINKS and O_NOFOLLOW).
	victim := t.TempDir()
	if err := os.WriteFile(filepath.Join(victim, "passwd"), []byte("victim"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Symlink(victim, filepath.Join(w.Path, "link"))
	os.Symlink("/tmp/nonexistent-execbox", filepath.Join(w.Path, "dangling"))
	for _, p := range []string{"/etc/x", "../x", "a/../../x", "a\x00b", strings.Repeat("a", 256), strings.Repeat("a/", 2049), "", "link/passwd", "dangling", "link"} {
		err := w.Write(map[string][]byte{p: []byte("x")})
		if !errors.Is(err, sandbox.ErrInvalid) {
			t.Errorf("Write(%q) = %v, want ErrInvalid", p, err)
			continue
		}
		if !strings.Contains(err.Error(), strings.ReplaceAll(p, "\x00", `\x00`)[:min(len(p), 20)]) && p != "" {
			t.Errorf("Write(%q) error %q does not name the path", p, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(victim, "passwd")); err != nil || string(b) != "victim" {
		t.Errorf("a write through the link changed the file it leads to: %q, %v", b, err)
	}
	// A valid file next to a bad one: nothing is written.
	err := w.Write(map[string][]byte{"ok.txt": []byte("x"), "../bad": []byte("x")})
	if !errors.Is(err, sandbox.ErrInvalid) {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(w.Path, "ok.txt")); !os.IsNotExist(err) {
		t.Fatal("a valid file was written although the batch was rejected")
	}
}

func TestRemoveUnreadable(t *testing.T) {
	w := newWD(t)
	os.MkdirAll(filepath.Join(w.Path, "x/y"), 0o755)
	os.Chmod(filepath.Join(w.Path, "x"), 0)
	if err := w.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(w.Path); !os.IsNotExist(err) {
		t.Fatal("work dir still there")
	}
}

func TestWriteNeverCreatesThroughSymlink(t *testing.T) {
	w := newWD(t)
	outside := t.TempDir()
	os.Symlink(outside, filepath.Join(w.Path, "dlink"))
	err := w.Write(map[string][]byte{"aaa.txt": []byte("x"), "dlink/sub/new.txt": []byte("x")})
	if !errors.Is(err, sandbox.ErrInvalid) {
		t.Fatalf("Write through a dir symlink = %v", err)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("created %v outside the work dir", ents[0].Name())
	}
	if _, err := os.Stat(filepath.Join(w.Path, "aaa.txt")); !os.IsNotExist(err) {
		t.Fatal("a valid file of a rejected batch was written")
	}
}

func TestWriteLongPath(t *testing.T) {
	w := newWD(t)
	// 4096 bytes: 20 components of 200 bytes joined by '/', plus a tail.
	p := strings.TrimSuffix(strings.Repeat(strings.Repeat("d", 200)+"/", 20), "/")
	p += "/" + strings.Repeat("f", 4096-len(p)-1)
	if len(p) != 4096 {
		t.Fatalf("test path is %d bytes", len(p))
	}
	if err := w.Write(map[string][]byte{p: []byte("x")}); err != nil {
		t.Fatalf("a 4096-byte path: %v", err)
	}
	if err := w.Write(map[string][]byte{p + "x": []byte("x")}); !errors.Is(err, sandbox.ErrInvalid) {
		t.Fatalf("a 4097-byte path: %v", err)
	}
}

// A FIFO the program left where an input goes is refused at once, never
// opened (which would wait for a reader forever).
func TestWriteRefusesFIFO(t *testing.T) {
	w := newWD(t)
	if err := unix.Mkfifo(filepath.Join(w.Path, "x"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Write(map[string][]byte{"x": []byte("data")}) }()
	select {
	case err := <-done:
		if !errors.Is(err, sandbox.ErrInvalid) || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("Write over a FIFO = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Write over a FIFO hangs")
	}
}

// A full work dir is a limit (ErrLimit, work_size_exceeded), not an
// internal error.
func TestWriteFullWorkDir(t *testing.T) {
	testutil.RequiresRoot(t, "root")
	w := newWD(t)
	if err := unix.Mount("tmpfs", w.Path, "tmpfs", 0, "size=64k"); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(w.Path, unix.MNT_DETACH)
	if err := w.Write(map[string][]byte{"small": make([]byte, 16<<10)}); err != nil {
		t.Fatalf("Write within the size: %v", err)
	}
	err := w.Write(map[string][]byte{"big": make([]byte, 128<<10)})
	if !errors.Is(err, sandbox.ErrLimit) || sandbox.CodeOf(err) != "work_size_exceeded" {
		t.Fatalf("Write past a full work dir = %v (code %s)", err, sandbox.CodeOf(err))
	}
}

// CheckDir finds directories below the work dir and nothing else: not a
// file, not a missing one, not one reached through a symlink.
func TestCheckDir(t *testing.T) {
	w := newWD(t)
	if err := w.Write(map[string][]byte{"sub/deeper/f": []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(w.Path, "sub"), filepath.Join(w.Path, "link")); err != nil {
		t.Fatal(err)
	}
	for _, ok := range []string{"", "sub", "sub/deeper"} {
		if err := w.CheckDir(ok); err != nil {
			t.Errorf("CheckDir(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"missing", "sub/deeper/f", "link", "link/deeper", "../" + filepath.Base(w.Path)} {
		if err := w.CheckDir(bad); !errors.Is(err, sandbox.ErrInvalid) || sandbox.CodeOf(err) != "dir_not_found" {
			t.Errorf("CheckDir(%q) = %v, want ErrInvalid dir_not_found", bad, err)
		}
	}
}
