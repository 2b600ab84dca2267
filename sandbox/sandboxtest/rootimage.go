package sandboxtest

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/execbox/execbox/sandbox"
)

// WithRootImage gives the suite an unpacked image (rootimage.Host: a
// shell, coreutils and Python) for its root_image case, which a backend
// with Capabilities.RootImages must pass. The suite adds a marker and an
// os-release of its own to dir.
func WithRootImage(dir string) Option {
	return func(c *config) { c.rootImage = dir }
}

// testRootImage: a sandbox whose Spec.Root is an image sees the image's
// files as its root, not the host's; the root is read-only and the work
// dir and /tmp are writable as always; and nothing the sandbox or the
// backend did changed the image.
func (s *suite) testRootImage(t *testing.T) {
	if !s.caps.RootImages {
		t.Skipf("backend %s does not mount images of the store", s.b.Name())
	}
	dir := s.cfg.rootImage
	if dir == "" {
		t.Fatalf("backend %s has RootImages: give the suite an image with WithRootImage", s.b.Name())
	}
	marker := token()
	if err := os.WriteFile(filepath.Join(dir, "execbox-image-marker"), []byte(marker), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, "etc", "os-release")) // the host's, copied
	if err := os.WriteFile(filepath.Join(dir, "etc", "os-release"), []byte("ID=execbox-image-test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A program of the host's /usr/bin that the image lacks.
	hostOnly := ""
	names, _ := os.ReadDir("/usr/bin")
	for _, n := range names {
		if _, err := os.Lstat(filepath.Join(dir, "usr/bin", n.Name())); err != nil {
			hostOnly = "/usr/bin/" + n.Name()
			break
		}
	}
	if hostOnly == "" {
		t.Fatal("the image has every program of the host's /usr/bin: no way to tell them apart")
	}
	before := tree(t, dir)
	spec := s.spec(func(sp *sandbox.Spec) {
		sp.Root = &sandbox.RootImage{Ref: "execbox-test/root:1", Dir: dir}
	})
	sb := s.create(t, spec)
	res := s.exec(t, sb, sh(fmt.Sprintf(`cat /execbox-image-marker; echo; grep ^ID= /etc/os-release
test -e %s && echo host-visible
touch /usr/x 2>/dev/null && echo root-writable
touch /execbox-image-marker 2>/dev/null && echo marker-writable
echo w > /work/w && echo t > /tmp/t && cat /work/w /tmp/t
python3 -c 'import sys; print("python", sys.version_info[0])'`, shQuote(hostOnly))))
	wantExit(t, res, 0)
	want := marker + "\nID=execbox-image-test\nw\nt\npython 3\n"
	if res.Stdout != want {
		t.Fatalf("in a sandbox of the image: stdout %q, want %q (the image's marker and os-release, no host program, a read-only root, a writable /work and /tmp); %s", res.Stdout, want, describe(res))
	}
	ctx := s.ctx(t)
	if err := sb.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if after := tree(t, dir); after != before {
		t.Fatalf("the image changed under a sandbox:\nbefore %s\nafter  %s", clip(before), clip(after))
	}

	// A hostile image: files the backend generates are symlinks to a host
	// file. The sandbox gets its own; the host file is not written.
	host := filepath.Join(t.TempDir(), "host-file")
	if err := os.WriteFile(host, []byte("the host's file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"etc/hosts", "etc/hostname"} {
		os.Remove(filepath.Join(dir, f))
		if err := os.Symlink(host, filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	res = s.oneShot(t, spec, sh("cat /etc/hostname /etc/hosts"))
	if b, _ := os.ReadFile(host); string(b) != "the host's file\n" {
		t.Fatalf("a host file behind the image's /etc/hosts became %q", b)
	}
	if strings.Contains(res.Stdout, "the host's file") {
		t.Fatalf("the sandbox read a host file through the image's symlinks: %q", res.Stdout)
	}
	wantExit(t, res, 0)
	if !strings.HasPrefix(res.Stdout, "sandbox\n") {
		t.Fatalf("/etc/hostname in a sandbox of the image: %q, want the generated one", res.Stdout)
	}

	// A caller's mount below the image's symlinks to a host directory (as
	// seen from the host, and from bwrap's setup, where the host is
	// /oldroot): whether the sandbox starts or not, nothing is made there.
	// World-writable, as /tmp is: whatever user a runtime's setup runs as
	// could write there.
	hostDir := t.TempDir()
	os.Chmod(filepath.Dir(hostDir), 0o755)
	if err := os.Chmod(hostDir, 0o777); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "src")
	if err := os.WriteFile(src, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i, target := range []string{hostDir, "/oldroot" + hostDir} {
		link := fmt.Sprintf("mnt%d", i)
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
		spec := s.spec(func(sp *sandbox.Spec) {
			sp.Root = &sandbox.RootImage{Ref: "execbox-test/root:1", Dir: dir}
			sp.Policy.Mounts = []sandbox.Mount{{Source: src, Target: "/" + link + "/in/f"}}
		})
		if sb, err := s.b.Create(s.ctx(t), spec); err == nil {
			sb.Exec(s.ctx(t), sh("true"))
			sb.Close(s.ctx(t))
		}
		if names, _ := os.ReadDir(hostDir); len(names) != 0 {
			t.Fatalf("a mount below the image's symlink %s → %s made %v on the host", link, target, names)
		}
	}
}

// tree lists dir's entries with their modes and sizes.
func tree(t *testing.T, dir string) string {
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		size := fi.Size()
		if d.IsDir() {
			size = 0
		}
		fmt.Fprintf(&b, "%s %v %d\n", strings.TrimPrefix(p, dir), fi.Mode(), size)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
