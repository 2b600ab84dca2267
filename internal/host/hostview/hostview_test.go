package hostview

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/execbox/execbox/sandbox"
)

// The default view: read-only binds of what exists, merged-/usr links as
// symlinks, the generated /etc files, the five devices, /dev/shm into /tmp.
func TestPlanDefault(t *testing.T) {
	v, err := Plan(sandbox.Spec{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(v.Binds, func(b Bind) bool { return b.Source == "/usr" && b.Target == "/usr" && !b.Writable && b.Exec }) {
		t.Errorf("no read-only /usr bind: %+v", v.Binds)
	}
	for _, b := range v.Binds {
		if b.Writable || b.Source != b.Target {
			t.Errorf("root bind %+v is writable or moved", b)
		}
		if _, err := os.Stat(b.Source); err != nil {
			t.Errorf("bind of a missing path %s", b.Source)
		}
	}
	if st, err := os.Lstat("/bin"); err == nil && st.Mode()&os.ModeSymlink != 0 {
		if !slices.Contains(v.Symlinks, Symlink{Path: "/bin", Target: mustReadlink(t, "/bin")}) {
			t.Errorf("/bin is a host symlink but not recreated: %+v", v.Symlinks)
		}
	}
	var names []string
	for _, f := range v.Files {
		names = append(names, f.Path)
	}
	if !slices.Equal(names, []string{"/etc/passwd", "/etc/group", "/etc/hosts", "/etc/hostname"}) {
		t.Errorf("generated files %v", names)
	}
	if !slices.Equal(v.Devices, []string{"null", "zero", "full", "random", "urandom"}) {
		t.Errorf("devices %v", v.Devices)
	}
	if !slices.Contains(v.DevLinks, Symlink{Path: "/dev/shm", Target: "/tmp"}) {
		t.Errorf("/dev/shm is not bounded by /tmp: %v", v.DevLinks)
	}
	if !slices.Equal(v.Writable, []string{"/tmp", "/work", "/dev"}) || v.Exec || len(v.Mounts) != 0 {
		t.Errorf("writable %v exec %v mounts %v", v.Writable, v.Exec, v.Mounts)
	}
}

// Options.RootFS replaces the default, Policy.RootFS replaces both; an
// explicit list is strict, the default one skips what the host lacks.
func TestPlanRootFSPrecedence(t *testing.T) {
	v, err := Plan(sandbox.Spec{}, Options{RootFS: []string{"/usr"}})
	if err != nil || len(v.Binds) != 1 || v.Binds[0].Source != "/usr" {
		t.Fatalf("configured list: %+v %v", v, err)
	}
	v, err = Plan(sandbox.Spec{Policy: sandbox.Policy{RootFS: []string{"/etc"}}}, Options{RootFS: []string{"/usr"}})
	if err != nil || len(v.Binds) != 1 || v.Binds[0].Source != "/etc" {
		t.Fatalf("policy list: %+v %v", v, err)
	}
	// /etc bound whole: nothing is generated over the host's files.
	if len(v.Files) != 0 {
		t.Errorf("generated files under a bound /etc: %v", v.Files)
	}
	if _, err := Plan(sandbox.Spec{}, Options{RootFS: []string{"/does/not/exist"}}); sandbox.CodeOf(err) != "rootfs_invalid" {
		t.Errorf("a missing configured entry: %v", err)
	}
	// Both sides of Hidden: the default list skips an entry that is the
	// work root, an explicit one refuses it.
	old := DefaultRootFS
	t.Cleanup(func() { DefaultRootFS = old })
	DefaultRootFS = []string{"/usr", "/does/not/exist", "/etc"}
	v, err = Plan(sandbox.Spec{}, Options{Hidden: []string{"/etc"}})
	if err != nil || len(v.Binds) != 1 || v.Binds[0].Source != "/usr" {
		t.Fatalf("default list with a missing and a hidden entry: %+v %v", v, err)
	}
	if _, err := Plan(sandbox.Spec{Policy: sandbox.Policy{RootFS: []string{"/etc/ssl"}}}, Options{Hidden: []string{"/etc"}}); sandbox.CodeOf(err) != "rootfs_invalid" {
		t.Errorf("an explicit entry inside a hidden dir: %v", err)
	}
}

// Every refusal, and the accepted neighbour of each.
func TestPlanValidation(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "link")
	os.Symlink("/etc", link)
	os.MkdirAll(filepath.Join(dir, "real", "sub"), 0o755)
	lp := filepath.Join(dir, "lp")
	os.Symlink(filepath.Join(dir, "real"), lp)
	hidden := filepath.Join(dir, "workroot")
	os.Mkdir(hidden, 0o755)
	m := func(src, dst string) sandbox.Policy {
		return sandbox.Policy{Mounts: []sandbox.Mount{{Source: src, Target: dst}}}
	}
	bad := []struct {
		name string
		pol  sandbox.Policy
		code string
	}{
		{"mount_missing", m(filepath.Join(dir, "nope"), "/x"), "mount_invalid"},
		{"mount_symlink", m(link, "/x"), "mount_invalid"},
		{"mount_through_symlink", m(lp+"/sub", "/x"), "mount_invalid"},
		{"mount_unclean", m(dir+"/real/../real", "/x"), "mount_invalid"},
		{"mount_target_proc", m(dir, "/proc/x"), "mount_invalid"},
		{"mount_target_dev", m(dir, "/dev/x"), "mount_invalid"},
		{"mount_target_work", m(dir, "/work/x"), "mount_invalid"},
		{"mount_target_tmp", m(dir, "/tmp"), "mount_invalid"},
		{"mount_target_root", m(dir, "/"), "mount_invalid"},
		{"mount_source_run", m("/run", "/x"), "mount_invalid"},
		{"mount_source_dev", m("/dev/null", "/x"), "mount_invalid"},
		{"mount_source_hidden", m(hidden, "/x"), "mount_invalid"},
		{"mount_source_above_hidden", m(dir, "/x"), "mount_invalid"},
		{"rootfs_slash", sandbox.Policy{RootFS: []string{"/usr", "/"}}, "rootfs_invalid"},
		{"rootfs_proc", sandbox.Policy{RootFS: []string{"/proc"}}, "rootfs_invalid"},
		{"rootfs_sys", sandbox.Policy{RootFS: []string{"/sys/kernel"}}, "rootfs_invalid"},
		{"rootfs_relative", sandbox.Policy{RootFS: []string{"usr"}}, "rootfs_invalid"},
		{"rootfs_symlink_parent", sandbox.Policy{RootFS: []string{lp + "/sub"}}, "rootfs_invalid"},
		{"rootfs_device", sandbox.Policy{RootFS: []string{"/dev/null"}}, "rootfs_invalid"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			_, err := Plan(sandbox.Spec{Policy: c.pol}, Options{Hidden: []string{hidden}})
			if !errors.Is(err, sandbox.ErrInvalid) || sandbox.CodeOf(err) != c.code {
				t.Fatalf("Plan: %v (code %q), want ErrInvalid %s", err, sandbox.CodeOf(err), c.code)
			}
		})
	}
	// The accepted side: a real dir (read-only, exec), a writable one
	// (noexec, in the writable list), a file, a target below /tmp.
	real := filepath.Join(dir, "real")
	v, err := Plan(sandbox.Spec{Policy: sandbox.Policy{Mounts: []sandbox.Mount{
		{Source: real, Target: "/data"},
		{Source: real + "/sub", Target: "/tmp/out", Writable: true},
	}}}, Options{Hidden: []string{hidden}})
	if err != nil {
		t.Fatal(err)
	}
	want := []Bind{{Source: real, Target: "/data", Exec: true}, {Source: real + "/sub", Target: "/tmp/out", Writable: true}}
	if !slices.Equal(v.Mounts, want) || !slices.Contains(v.Writable, "/tmp/out") || slices.Contains(v.Writable, "/data") {
		t.Fatalf("mounts %+v writable %v", v.Mounts, v.Writable)
	}
	// TmpExec (either source) makes writable mounts exec too.
	for _, o := range []struct {
		spec sandbox.Spec
		opt  Options
	}{
		{sandbox.Spec{Policy: sandbox.Policy{TmpExec: true, Mounts: []sandbox.Mount{{Source: real, Target: "/o", Writable: true}}}}, Options{}},
		{sandbox.Spec{Policy: sandbox.Policy{Mounts: []sandbox.Mount{{Source: real, Target: "/o", Writable: true}}}}, Options{TmpExec: true}},
	} {
		v, err := Plan(o.spec, o.opt)
		if err != nil || !v.Exec || !v.Mounts[0].Exec {
			t.Errorf("tmp exec: %+v %v", v, err)
		}
	}
}

func TestWithin(t *testing.T) {
	for _, c := range []struct {
		p, dir string
		want   bool
	}{
		{"/tmp", "/tmp", true}, {"/tmp/x", "/tmp", true}, {"/tmpx", "/tmp", false},
		{"/", "/tmp", false}, {"/x", "/", true},
	} {
		if got := Within(c.p, c.dir); got != c.want {
			t.Errorf("Within(%q, %q) = %v", c.p, c.dir, got)
		}
	}
}

func mustReadlink(t *testing.T, p string) string {
	t.Helper()
	s, err := os.Readlink(p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestPlanImage: an image is the root instead of host paths; it keeps its
// own users and groups, gets the generated hosts and hostname, and
// cannot be combined with a rootfs list.
func TestPlanImage(t *testing.T) {
	img := t.TempDir()
	os.MkdirAll(filepath.Join(img, "etc"), 0o755)
	os.WriteFile(filepath.Join(img, "etc/passwd"), []byte("app:x:1000:1000::/app:/bin/sh\n"), 0o644)
	v, err := Plan(sandbox.Spec{Root: &sandbox.RootImage{Ref: "i", Dir: img}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, f := range v.Files {
		files = append(files, f.Path)
	}
	if v.Image != img || len(v.Binds) != 0 || len(v.Symlinks) != 0 || strings.Join(files, " ") != "/etc/group /etc/hosts /etc/hostname" {
		t.Fatalf("view of an image: image %q, %d binds, %d symlinks, files %v", v.Image, len(v.Binds), len(v.Symlinks), files)
	}
	_, err = Plan(sandbox.Spec{Root: &sandbox.RootImage{Ref: "i", Dir: img}, Policy: sandbox.Policy{RootFS: []string{"/usr"}}}, Options{})
	if sandbox.CodeOf(err) != "rootfs_invalid" {
		t.Fatalf("an image with a rootfs list: %v", err)
	}
}
