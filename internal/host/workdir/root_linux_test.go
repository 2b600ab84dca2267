package workdir

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/execbox/execbox/sandbox"
)

// listing is every path below dir, for checking nothing was touched.
func listing(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		out = append(out, p)
		return nil
	})
	return out
}

// victim is a root-owned directory whose entries look like what
// reconciling removes (a dead process's base) and what it should never
// touch.
func victim(t *testing.T) string {
	t.Helper()
	v := filepath.Join(t.TempDir(), "victim")
	mkdir(t, filepath.Join(v, "4194305.dead", "sb"))
	mkdir(t, filepath.Join(v, "notapid"))
	if err := os.WriteFile(filepath.Join(v, "precious.txt"), []byte("root's"), 0o600); err != nil {
		t.Fatal(err)
	}
	return v
}

func wantUnsafe(t *testing.T, what string, err error, detail string) {
	t.Helper()
	if !errors.Is(err, sandbox.ErrDenied) || sandbox.CodeOf(err) != CodeUnsafe || !strings.Contains(err.Error(), detail) {
		t.Errorf("%s: %v, want %s naming %q", what, err, CodeUnsafe, detail)
	}
}

// TestPlantedWorkRoot is issue 22's attack: in a world-writable sticky
// directory (here a stand-in for /tmp), nobody makes the work root first and
// plants a symlink where a backend's directory goes, pointing into a
// directory root owns. Starting as root must refuse the work root, and
// delete nothing anywhere.
func TestPlantedWorkRoot(t *testing.T) {
	needRoot(t)
	tmp := t.TempDir()
	if err := syscall.Chmod(tmp, 0o1777); err != nil {
		t.Fatal(err)
	}
	v := victim(t)
	before := listing(t, v)

	// As nobody: mkdir $tmp/execbox; ln -s $victim $tmp/execbox/native.
	root := filepath.Join(tmp, "execbox")
	mkdir(t, root)
	os.Chmod(root, 0o755)
	native := filepath.Join(root, "native")
	if err := os.Symlink(v, native); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{root, native} {
		if err := os.Lchown(p, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	_, err := OpenBase(native)
	wantUnsafe(t, "OpenBase of the planted backend dir", err, "owned by uid 65534")
	_, err = Reconcile(native)
	wantUnsafe(t, "Reconcile of the planted backend dir", err, "owned by uid 65534")
	wantUnsafe(t, "MakeRoot of the planted work root", MakeRoot(root), "owned by uid 65534")
	_, err = New(native, 65534, 65534)
	wantUnsafe(t, "a work dir in the planted backend dir", err, "owned by uid 65534")

	// The work root itself a symlink into root's directory.
	link := filepath.Join(tmp, "execbox2")
	if err := os.Symlink(v, link); err != nil {
		t.Fatal(err)
	}
	_, err = OpenBase(filepath.Join(link, "native"))
	wantUnsafe(t, "a symlinked work root", err, link+" is a symlink")
	_, err = Reconcile(link)
	wantUnsafe(t, "Reconcile of a symlinked work root", err, link+" is a symlink")

	// Even in a work root of our own, a symlink where a backend's
	// directory goes is never followed.
	own := filepath.Join(t.TempDir(), "work")
	if err := MakeRoot(own); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(v, filepath.Join(own, "bwrap")); err != nil {
		t.Fatal(err)
	}
	_, err = OpenBase(filepath.Join(own, "bwrap"))
	wantUnsafe(t, "a symlinked backend dir", err, "bwrap is a symlink")
	_, err = Reconcile(filepath.Join(own, "bwrap"))
	wantUnsafe(t, "Reconcile of a symlinked backend dir", err, "bwrap is a symlink")

	if after := listing(t, v); !slices.Equal(before, after) {
		t.Fatalf("the victim changed:\nbefore %v\nafter  %v", before, after)
	}
	if b, err := os.ReadFile(filepath.Join(v, "precious.txt")); err != nil || string(b) != "root's" {
		t.Fatalf("precious.txt: %q %v", b, err)
	}
}

// Directories above the work root may be only root's or ours, and
// writable by others only when sticky; the work root must be ours and
// writable by no one else.
func TestMakeRootChecks(t *testing.T) {
	needRoot(t)
	open := t.TempDir()
	os.Chmod(open, 0o777) // world-writable, not sticky
	wantUnsafe(t, "below a world-writable directory", MakeRoot(filepath.Join(open, "work")), "writable by others without the sticky bit")

	theirs := filepath.Join(t.TempDir(), "theirs")
	mkdir(t, theirs)
	os.Chown(theirs, 65534, 65534)
	wantUnsafe(t, "below a directory another user owns", MakeRoot(filepath.Join(theirs, "work")), "neither root nor execbox's uid")

	for _, tc := range []struct {
		mode os.FileMode
		ok   bool
	}{{0o700, true}, {0o711, true}, {0o755, true}, {0o775, false}, {0o777, false}, {os.ModeSticky | 0o777, false}, {0o500, false}} {
		dir := filepath.Join(t.TempDir(), "work")
		mkdir(t, dir)
		if err := os.Chmod(dir, tc.mode); err != nil {
			t.Fatal(err)
		}
		err := MakeRoot(dir)
		if tc.ok && err != nil || !tc.ok && err == nil {
			t.Errorf("an existing work root of mode %v: %v, want ok %v", tc.mode, err, tc.ok)
		}
	}
	if err := MakeRoot("relative/work"); err == nil {
		t.Errorf("a relative work root was accepted")
	}
	f := filepath.Join(t.TempDir(), "file")
	os.WriteFile(f, nil, 0o600)
	wantUnsafe(t, "a file as the work root", MakeRoot(f), "not a directory")
}

// What MakeRoot makes is 0711 whatever the umask, owned by us; what it
// refuses it leaves as it was.
func TestMakeRootModes(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	dir := filepath.Join(t.TempDir(), "a", "b", "work")
	if err := MakeRoot(dir); err != nil {
		t.Fatal(err)
	}
	for d := dir; d != filepath.Dir(filepath.Dir(filepath.Dir(dir))); d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err != nil || st.Mode().Perm() != RootMode || st.Sys().(*syscall.Stat_t).Uid != uint32(os.Geteuid()) {
			t.Errorf("%s: %v %v, want a 0711 directory of ours", d, st.Mode(), err)
		}
	}
	// Twice is fine.
	if err := MakeRoot(dir); err != nil {
		t.Fatal(err)
	}
	d, err := OpenBase(filepath.Join(dir, "native"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, p := range []string{d.Root, d.Path} {
		if st, err := os.Stat(p); err != nil || st.Mode().Perm() != RootMode {
			t.Errorf("%s: %v %v, want 0711", p, st.Mode(), err)
		}
	}
}
