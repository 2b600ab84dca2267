package imagestore

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	testregistry "github.com/execbox/execbox/internal/testutil/registry"
	"github.com/execbox/execbox/sandbox"
)

func registry(t *testing.T) string { return testregistry.Start(t) }

// file is one entry of a test layer.
type file struct {
	name, data, link string
	typ              byte
}

func layerOf(t *testing.T, files ...file) v1.Layer {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Typeflag: f.typ, Mode: 0o644, Size: int64(len(f.data)), Linkname: f.link}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Typeflag == tar.TypeDir {
			h.Mode = 0o755
		}
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(f.data))
	}
	tw.Close()
	data := b.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// imageOf makes an image of layers, with an environment and a work dir.
func imageOf(t *testing.T, layers ...v1.Layer) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	cf, _ := img.ConfigFile()
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = platform.OS, platform.Architecture
	cf.Config.Env = []string{"PATH=/usr/bin", "MARKER=from-the-image"}
	cf.Config.WorkingDir = "/app"
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func push(t *testing.T, ref string, img v1.Image) { testregistry.Push(t, ref, img) }

func open(t *testing.T, max int64) (*Store, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir, MaxBytes: max})
	if err != nil {
		t.Fatal(err)
	}
	return s, dir
}

// base is a small image: a marker, an os-release and a file a second
// layer removes.
func base(t *testing.T) v1.Image {
	return imageOf(t,
		layerOf(t, file{name: "etc/", typ: tar.TypeDir}, file{name: "etc/os-release", data: "ID=execbox-test\n"},
			file{name: "marker", data: "from the image"}, file{name: "gone", data: "x"}),
		layerOf(t, file{name: ".wh.gone"}, file{name: "app/", typ: tar.TypeDir}, file{name: "app/main.py", data: "print(1)"}))
}

// pulled is base pushed to a registry of its own and pulled into a store
// of 64 MiB.
type pulled struct {
	reg, ref string
	pushed   v1.Image
	s        *Store
	dir      string
	img      Image
}

func pullBase(t *testing.T) pulled {
	t.Helper()
	p := pulled{reg: registry(t), pushed: base(t)}
	p.ref = p.reg + "/test/base:1"
	push(t, p.ref, p.pushed)
	p.s, p.dir = open(t, 64<<20)
	var err error
	if p.img, err = p.s.Pull(context.Background(), p.ref); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPullUnpacksAnImage: an image pulled from a real registry is
// unpacked with its layers applied in order, described with its config,
// listed, found by reference and by digest, and removed whole.
func TestPullUnpacksAnImage(t *testing.T) {
	p := pullBase(t)
	ref, s, dir, img := p.ref, p.s, p.dir, p.img
	if img.Root == "" || img.Layers != 2 || img.WorkingDir != "/app" || !slices.Contains(img.Env, "MARKER=from-the-image") || img.Refs[0] != ref {
		t.Fatalf("pulled %+v", img)
	}
	for p, want := range map[string]string{"marker": "from the image", "etc/os-release": "ID=execbox-test\n", "app/main.py": "print(1)"} {
		if b, err := os.ReadFile(filepath.Join(img.Root, p)); err != nil || string(b) != want {
			t.Errorf("%s: %q %v, want %q", p, b, err, want)
		}
	}
	if _, err := os.Lstat(filepath.Join(img.Root, "gone")); err == nil {
		t.Error("the second layer's whiteout did not remove gone")
	}
	for _, name := range []string{ref, img.Digest, strings.TrimPrefix(img.Digest, "sha256:")[:12]} {
		got, err := s.Inspect(name)
		if err != nil || got.Digest != img.Digest || got.Root != img.Root {
			t.Errorf("Inspect(%s) = %+v, %v", name, got, err)
		}
	}
	if l, err := s.List(); err != nil || len(l) != 1 {
		t.Fatalf("List = %v, %v", l, err)
	}
	// A second pull of the same image is the same image.
	if again, err := s.Pull(context.Background(), ref); err != nil || again.Digest != img.Digest {
		t.Fatalf("pulling again: %+v %v", again, err)
	}
	if err := s.Remove(ref); err != nil {
		t.Fatal(err)
	}
	_, err := s.Inspect(ref)
	wantCode(t, err, "image_not_found")
	if left := files(t, dir); len(left) != 0 {
		t.Fatalf("after rm the store still holds %v", left)
	}
}

// files lists the store's blobs and roots.
func files(t *testing.T, dir string) []string {
	var out []string
	for _, sub := range []string{"oci/blobs", "roots"} {
		filepath.WalkDir(filepath.Join(dir, sub), func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				out = append(out, strings.TrimPrefix(p, dir))
			}
			return nil
		})
	}
	return out
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if sandbox.CodeOf(err) != code {
		t.Fatalf("error = %v (code %q), want %s", err, sandbox.CodeOf(err), code)
	}
}

// TestAnImageThatLiesLeavesNothing: a config whose diff ID is not its
// layer's, a hostile layer, and a registry that alters a blob in flight
// each fail the pull, and the store holds nothing afterwards.
func TestAnImageThatLiesLeavesNothing(t *testing.T) {
	reg := registry(t)
	lying := base(t)
	cf, _ := lying.ConfigFile()
	cf = cf.DeepCopy()
	cf.RootFS.DiffIDs[1] = cf.RootFS.DiffIDs[0]
	lying, _ = mutate.ConfigFile(lying, cf)
	push(t, reg+"/test/lying:1", lying)
	push(t, reg+"/test/hostile:1", imageOf(t, layerOf(t, file{name: "ok", data: "1"}), layerOf(t, file{name: "../../../escaped", data: "pwned"})))
	push(t, reg+"/test/hostile:2", imageOf(t, layerOf(t, file{name: "s", typ: tar.TypeSymlink, link: "/"}, file{name: "h", typ: tar.TypeLink, link: "/etc/passwd"})))
	tampered := base(t)
	push(t, reg+"/test/tampered:1", tampered)
	ls, _ := tampered.Layers()
	last, _ := ls[len(ls)-1].Digest()

	// A registry whose last layer is altered on its way: the rest of the
	// image arrives whole.
	target, _ := url.Parse("http://" + reg)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(r *http.Response) error {
		if strings.HasSuffix(r.Request.URL.Path, "/blobs/"+last.String()) && r.StatusCode == 200 {
			b, _ := io.ReadAll(r.Body)
			if len(b) > 100 {
				b[len(b)/2] ^= 0xff
			}
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		return nil
	}
	bad := httptest.NewServer(proxy)
	defer bad.Close()
	badHost := strings.TrimPrefix(bad.URL, "http://")

	for ref, code := range map[string]string{
		reg + "/test/lying:1":        "image_digest_mismatch",
		reg + "/test/hostile:1":      "image_layer_invalid",
		reg + "/test/hostile:2":      "image_layer_invalid",
		badHost + "/test/tampered:1": "image_pull_failed",
		reg + "/test/missing:1":      "image_not_found",
	} {
		s, dir := open(t, 64<<20)
		_, err := s.Pull(context.Background(), ref)
		wantCode(t, err, code)
		if left := files(t, dir); len(left) != 0 {
			t.Fatalf("%s: the failed pull left %v", ref, left)
		}
		if l, _ := s.List(); len(l) != 0 {
			t.Fatalf("%s: the failed pull listed %v", ref, l)
		}
	}
}

// TestACorruptedBlobIsNotUnpacked: a layer blob changed in the store
// after the pull fails the unpack of the image's root.
func TestACorruptedBlobIsNotUnpacked(t *testing.T) {
	p := pullBase(t)
	ref, s, dir, got := p.ref, p.s, p.dir, p.img
	ls, _ := p.pushed.Layers()
	d, _ := ls[0].Digest()
	blob := filepath.Join(dir, "oci", "blobs", "sha256", d.Hex)
	b, _ := os.ReadFile(blob)
	b[9] ^= 0x01 // gzip's header names another OS: the same tar inflates
	if err := os.WriteFile(blob, b, 0o644); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(got.Root)
	_, err := s.Root(ref)
	wantCode(t, err, "image_digest_mismatch")
	if _, err := os.Lstat(got.Root); err == nil {
		t.Fatal("a root was unpacked from a corrupted blob")
	}
}

// TestQuota: an image is pulled when the store has room for it and
// refused, leaving nothing, when it has a byte less; whether the blobs or
// the unpacked root do not fit.
func TestQuota(t *testing.T) {
	p := pullBase(t)
	reg, s, img := p.reg, p.s, p.img
	need := img.Size + img.Unpacked
	// Blobs fetched, counted on their way.
	var fetched atomic.Int64
	target, _ := url.Parse("http://" + reg)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(r *http.Response) error {
		if strings.Contains(r.Request.URL.Path, "/blobs/") {
			fetched.Add(1)
		}
		return nil
	}
	counting := httptest.NewServer(proxy)
	defer counting.Close()
	via := strings.TrimPrefix(counting.URL, "http://")
	var blobs int64
	for _, f := range files(t, s.o.Dir) {
		if strings.HasPrefix(f, "/oci/blobs/") {
			fi, _ := os.Stat(filepath.Join(s.o.Dir, f))
			blobs += fi.Size()
		}
	}
	for _, c := range []struct {
		max  int64
		code string
	}{{blobs + img.Unpacked, ""}, {blobs + img.Unpacked - 1, "image_quota"}, {img.Size - 1, "image_quota"}} {
		s, dir := open(t, c.max)
		fetched.Store(0)
		_, err := s.Pull(context.Background(), via+"/test/base:1")
		if c.code == "" {
			if err != nil {
				t.Fatalf("a store of %d bytes (the image needs %d): %v", c.max, need, err)
			}
			continue
		}
		wantCode(t, err, c.code)
		if left := files(t, dir); len(left) != 0 {
			t.Fatalf("quota %d: the refused pull left %v", c.max, left)
		}
		// Blobs that cannot fit are not fetched at all.
		if c.max < img.Size && fetched.Load() != 0 {
			t.Fatalf("quota %d below the image's %d bytes: %d blobs were fetched", c.max, img.Size, fetched.Load())
		}
	}
}

// TestImportADockerSaveTar: a `docker save` tar imports as the same image
// a pull gives, under its tag or the one given.
func TestImportADockerSaveTar(t *testing.T) {
	img := base(t)
	tag, _ := name.NewTag("example.test/base:2")
	f := filepath.Join(t.TempDir(), "base.tar")
	if err := tarball.WriteToFile(f, tag, img); err != nil {
		t.Fatal(err)
	}
	s, _ := open(t, 64<<20)
	got, err := s.Import(f, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Refs[0] != "example.test/base:2" {
		t.Fatalf("imported %+v", got)
	}
	if b, err := os.ReadFile(filepath.Join(got[0].Root, "marker")); err != nil || string(b) != "from the image" {
		t.Fatalf("marker: %q %v", b, err)
	}
	again, err := s.Import(f, "mine:latest")
	if err != nil || again[0].Refs[0] != "index.docker.io/library/mine:latest" {
		t.Fatalf("import --tag: %+v %v", again, err)
	}
	if l, _ := s.List(); len(l) != 1 || len(l[0].Refs) != 2 {
		t.Fatalf("one image under two names, listed as %+v", l)
	}
	_, err = s.Import(filepath.Join(t.TempDir(), "nothing.tar"), "")
	wantCode(t, err, "image_not_found")
	junk := filepath.Join(t.TempDir(), "junk.tar")
	os.WriteFile(junk, []byte("not a tar"), 0o644)
	_, err = s.Import(junk, "x:1")
	wantCode(t, err, "image_invalid")
}

// TestPruneRemovesWhatNoImageUses: an unfinished unpack and a blob no
// image names go; the images, their blobs and roots stay.
func TestPruneRemovesWhatNoImageUses(t *testing.T) {
	p := pullBase(t)
	ref, s, dir, img := p.ref, p.s, p.dir, p.img
	kept := files(t, dir)
	leftover := filepath.Join(dir, "roots", ".unpack-123")
	os.MkdirAll(filepath.Join(leftover, "usr"), 0o755)
	os.WriteFile(filepath.Join(leftover, "usr", "f"), []byte("x"), 0o644)
	orphan := filepath.Join(dir, "oci", "blobs", "sha256", strings.Repeat("a", 64))
	os.WriteFile(orphan, []byte("orphan"), 0o644)
	freed, err := s.Prune()
	if err != nil || freed < int64(len("orphan")) {
		t.Fatalf("Prune = %d, %v", freed, err)
	}
	for _, gone := range []string{leftover, orphan} {
		if _, err := os.Lstat(gone); err == nil {
			t.Errorf("%s is still there", gone)
		}
	}
	if after := files(t, dir); strings.Join(after, " ") != strings.Join(kept, " ") {
		t.Fatalf("prune took what an image uses: %v, then %v", kept, after)
	}
	if got, err := s.Root(ref); err != nil || got.Root != img.Root {
		t.Fatalf("after prune: %+v %v", got, err)
	}
}

// TestPlainHTTPOnlyToThisHost: a registry on a private address is not
// spoken to without TLS (go-containerregistry would fall back to it), one
// on loopback is.
func TestPlainHTTPOnlyToThisHost(t *testing.T) {
	var reached []string
	next := roundTripper(func(r *http.Request) (*http.Response, error) {
		reached = append(reached, r.URL.Host)
		return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
	})
	for url, ok := range map[string]bool{
		"http://10.1.2.3:5000/v2/": false, "http://192.168.1.1/v2/": false, "http://registry.local/v2/": false,
		"http://127.0.0.1:5000/v2/": true, "http://localhost:5000/v2/": true, "http://[::1]:5000/v2/": true,
		"https://10.1.2.3:5000/v2/": true,
	} {
		req, _ := http.NewRequest("GET", url, nil)
		_, err := loopbackHTTP{next}.RoundTrip(req)
		if (err == nil) != ok {
			t.Errorf("%s: %v, want allowed %v", url, err, ok)
		}
	}
	if len(reached) != 4 {
		t.Fatalf("reached %v, want the four allowed", reached)
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestUnpackedCountsWhatTheTarDidNotHold: an image's size on disk, which
// the quota adds up, includes what unpacking wrote beyond the tar's bytes
// (here the directories of one deep name).
func TestUnpackedCountsWhatTheTarDidNotHold(t *testing.T) {
	reg := registry(t)
	ref := reg + "/test/deep:1"
	push(t, ref, imageOf(t, layerOf(t, file{name: strings.Repeat("d/", 50) + "f", data: "x"})))
	s, _ := open(t, 64<<20)
	img, err := s.Pull(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	if img.Unpacked < 50*4096 {
		t.Fatalf("unpacked %d bytes, want at least the 50 directories' %d", img.Unpacked, 50*4096)
	}
}
