package layer

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/execbox/execbox/sandbox"
)

// e is one tar entry of a test layer.
type e struct {
	name, link, data string
	typ              byte
	mode             int64
	pax              map[string]string
	size             int64 // when data is not the body (a header that lies)
}

func tarOf(t *testing.T, entries ...e) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, x := range entries {
		h := &tar.Header{Name: x.name, Linkname: x.link, Typeflag: x.typ, Mode: x.mode, Size: int64(len(x.data)), PAXRecords: x.pax, Format: tar.FormatPAX}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
		}
		if h.Typeflag == tar.TypeChar || h.Typeflag == tar.TypeBlock {
			h.Devmajor, h.Devminor = 1, 3
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write([]byte(x.data))
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// world is a root to unpack into beside a directory outside it that holds
// a secret: what a hostile layer aims at.
type world struct {
	root, outside, secret string
}

func newWorld(t *testing.T) world {
	base := t.TempDir()
	w := world{root: filepath.Join(base, "root"), outside: filepath.Join(base, "outside")}
	w.secret = filepath.Join(w.outside, "secret")
	for _, d := range []string{w.root, w.outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(w.secret, []byte("untouched"), 0o644); err != nil {
		t.Fatal(err)
	}
	return w
}

// intact fails unless the outside directory holds the secret alone,
// unchanged and with one link.
func (w world) intact(t *testing.T) {
	t.Helper()
	names, err := os.ReadDir(w.outside)
	if err != nil || len(names) != 1 {
		t.Fatalf("outside the root: %v %v, want the secret alone", names, err)
	}
	data, err := os.ReadFile(w.secret)
	var st unix.Stat_t
	unix.Lstat(w.secret, &st)
	if err != nil || string(data) != "untouched" || st.Nlink != 1 || st.Mode&0o7777 != 0o644 {
		t.Fatalf("the secret outside the root: %q %v, %d links, mode %o", data, err, st.Nlink, st.Mode&0o7777)
	}
	base := filepath.Dir(w.root)
	all, _ := os.ReadDir(base)
	if len(all) != 2 {
		t.Fatalf("beside the root: %v, want root and outside", all)
	}
}

var roomy = Limits{MaxBytes: 64 << 20, MaxEntries: 1000}

func apply(t *testing.T, root string, lim Limits, layers ...[]byte) (*Root, error) {
	t.Helper()
	r, err := Open(root, lim)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	for _, l := range layers {
		if err := r.Apply(bytes.NewReader(l)); err != nil {
			return r, err
		}
	}
	return r, nil
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if sandbox.CodeOf(err) != code {
		t.Fatalf("error = %v (code %q), want code %s", err, sandbox.CodeOf(err), code)
	}
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestTraversalIsRefused: a name that climbs out with .. fails the layer
// and writes nothing outside.
func TestTraversalIsRefused(t *testing.T) {
	for _, name := range []string{"../outside/secret", "a/../../outside/secret", "./../x", "a/b/../../../y"} {
		w := newWorld(t)
		_, err := apply(t, w.root, roomy, tarOf(t, e{name: name, data: "pwned"}))
		wantCode(t, err, "image_layer_invalid")
		w.intact(t)
		// A hard link's target too.
		w = newWorld(t)
		_, err = apply(t, w.root, roomy, tarOf(t, e{name: "h", typ: tar.TypeLink, link: name}))
		wantCode(t, err, "image_layer_invalid")
		w.intact(t)
	}
}

// TestAbsoluteNamesStayInside: "/x" is the root's x.
func TestAbsoluteNamesStayInside(t *testing.T) {
	w := newWorld(t)
	if _, err := apply(t, w.root, roomy, tarOf(t, e{name: w.secret, data: "pwned"}, e{name: "/etc/motd", data: "hi"})); err != nil {
		t.Fatal(err)
	}
	w.intact(t)
	if read(t, filepath.Join(w.root, w.secret)) != "pwned" || read(t, filepath.Join(w.root, "etc/motd")) != "hi" {
		t.Fatal("absolute names did not land inside the root")
	}
}

// TestSymlinksAreNeverWrittenThrough: a symlink that points out of the
// root (absolutely, relatively, in the same layer or a lower one) is
// resolved inside it when a later entry goes through it, and a symlink
// replaced by a file is replaced, not followed.
func TestSymlinksAreNeverWrittenThrough(t *testing.T) {
	w := newWorld(t)
	rel, _ := filepath.Rel(w.root, w.outside) // ../outside
	layers := [][]byte{
		tarOf(t,
			e{name: w.outside, typ: tar.TypeDir, mode: 0o755}, // the image's own directories of those names
			e{name: "outside", typ: tar.TypeDir, mode: 0o755},
			e{name: "abs", typ: tar.TypeSymlink, link: w.outside},
			e{name: "rel", typ: tar.TypeSymlink, link: rel},
			e{name: "deep/up", typ: tar.TypeSymlink, link: "../../../../../../../../../../.." + w.outside},
			e{name: "file", typ: tar.TypeSymlink, link: w.secret},
			e{name: "abs/secret", data: "pwned 1"},
			e{name: "rel/secret", data: "pwned 2"},
		),
		tarOf(t,
			e{name: "deep/up/secret", data: "pwned 3"},
			e{name: "abs/new/dir/f", data: "pwned 4"},
			e{name: "linked", typ: tar.TypeLink, link: "deep/up/secret"},
			e{name: "file", data: "replaced"},
			e{name: "abs/secret", typ: tar.TypeDir, mode: 0o755},
			e{name: "rel/.wh.secret"},
			e{name: "abs/.wh..wh..opq"},
		),
	}
	if _, err := apply(t, w.root, roomy, layers...); err != nil {
		t.Fatal(err)
	}
	w.intact(t)
	if read(t, filepath.Join(w.root, "file")) != "replaced" {
		t.Fatal("a file over a symlink did not replace it")
	}
	// What went through the symlinks landed inside the root.
	if read(t, filepath.Join(w.root, w.outside, "new/dir/f")) != "pwned 4" {
		t.Fatal("a path through an absolute symlink did not land inside the root")
	}
	if read(t, filepath.Join(w.root, "linked")) != "pwned 3" {
		t.Fatal("a hard link through a symlink did not name the root's file")
	}
}

// TestHardLinksStayInside: a hard link's target is a regular file of the
// root; one that names a host file (absolutely or through a symlink), a
// directory or nothing is refused.
func TestHardLinksStayInside(t *testing.T) {
	for _, c := range []struct {
		name   string
		layer  func(w world) []byte
		refuse bool
	}{
		{"host file", func(w world) []byte { return tarOf(t, e{name: "h", typ: tar.TypeLink, link: w.secret}) }, true},
		{"through a symlink", func(w world) []byte {
			return tarOf(t, e{name: "s", typ: tar.TypeSymlink, link: w.outside}, e{name: "h", typ: tar.TypeLink, link: "s/secret"})
		}, true},
		{"to a symlink", func(w world) []byte {
			return tarOf(t, e{name: "s", typ: tar.TypeSymlink, link: w.secret}, e{name: "h", typ: tar.TypeLink, link: "s"})
		}, true},
		{"a directory", func(w world) []byte {
			return tarOf(t, e{name: "d", typ: tar.TypeDir, mode: 0o755}, e{name: "h", typ: tar.TypeLink, link: "d"})
		}, true},
		{"a file of the layer", func(w world) []byte {
			return tarOf(t, e{name: "f", data: "mine"}, e{name: "h", typ: tar.TypeLink, link: "/f"})
		}, false},
	} {
		w := newWorld(t)
		_, err := apply(t, w.root, roomy, c.layer(w))
		if c.refuse {
			wantCode(t, err, "image_layer_invalid")
		} else if err != nil || read(t, filepath.Join(w.root, "h")) != "mine" {
			t.Fatalf("%s: %v", c.name, err)
		}
		w.intact(t)
	}
}

// TestSpecialFilesAndPrivilegesAreDropped: no device node, FIFO, setuid or
// setgid bit or file capability comes out of a layer.
func TestSpecialFilesAndPrivilegesAreDropped(t *testing.T) {
	w := newWorld(t)
	r, err := apply(t, w.root, roomy, tarOf(t,
		e{name: "dev/mem", typ: tar.TypeChar},
		e{name: "dev/sda", typ: tar.TypeBlock},
		e{name: "fifo", typ: tar.TypeFifo},
		e{name: "suid", data: "x", mode: 0o4755},
		e{name: "sgid", typ: tar.TypeDir, mode: 0o2775},
		e{name: "sticky", typ: tar.TypeDir, mode: 0o1777},
		e{name: "cap", data: "x", mode: 0o755, pax: map[string]string{"SCHILY.xattr.security.capability": "\x01\x00\x00\x02\xff\xff\xff\xff\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00", "SCHILY.xattr.user.x": "y"}},
	))
	if err != nil {
		t.Fatal(err)
	}
	w.intact(t)
	for _, n := range []string{"dev/mem", "dev/sda", "fifo"} {
		if _, err := os.Lstat(filepath.Join(w.root, n)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s was made: %v", n, err)
		}
	}
	if r.Dropped != 3 || r.Cleared != 2 {
		t.Errorf("Dropped %d, Cleared %d; want 3, 2", r.Dropped, r.Cleared)
	}
	for n, want := range map[string]uint32{"suid": 0o755, "sgid": 0o775, "sticky": 0o1777, "cap": 0o755} {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(w.root, n), &st); err != nil || st.Mode&0o7777 != want {
			t.Errorf("%s: mode %o (%v), want %o", n, st.Mode&0o7777, err, want)
		}
	}
	for _, x := range []string{"security.capability", "user.x"} {
		if _, err := unix.Getxattr(filepath.Join(w.root, "cap"), x, make([]byte, 64)); !errors.Is(err, unix.ENODATA) {
			t.Errorf("xattr %s: %v, want none", x, err)
		}
	}
}

// TestWhiteouts: .wh.NAME removes a lower layer's NAME; an opaque marker
// empties its directory of lower layers' entries and keeps its own layer's
// (whichever comes first in the tar).
func TestWhiteouts(t *testing.T) {
	w := newWorld(t)
	_, err := apply(t, w.root, roomy,
		tarOf(t, e{name: "a/x", data: "1"}, e{name: "a/y", data: "2"}, e{name: "b/z", data: "3"}, e{name: "b/sub/deep", data: "4"}, e{name: "c/z", data: "5"}, e{name: "top", data: "8"}),
		tarOf(t, e{name: "a/.wh.x"}, e{name: "b/new", data: "6"}, e{name: "b/.wh..wh..opq"}, e{name: "c/.wh..wh..opq"}, e{name: "c/later", data: "7"}, e{name: "a/.wh.nothing"}, e{name: ".wh.top"}),
	)
	if err != nil {
		t.Fatal(err)
	}
	w.intact(t)
	var got []string
	filepath.WalkDir(w.root, func(p string, d fs.DirEntry, err error) error {
		if !d.IsDir() {
			rel, _ := filepath.Rel(w.root, p)
			got = append(got, rel)
		}
		return nil
	})
	if strings.Join(got, " ") != "a/y b/new c/later" {
		t.Fatalf("files after the whiteouts: %v, want a/y b/new c/later", got)
	}
	// An opaque root: only the layer's own entries stay.
	w = newWorld(t)
	if _, err := apply(t, w.root, roomy, tarOf(t, e{name: "old/x", data: "1"}, e{name: "y", data: "2"}), tarOf(t, e{name: "new", data: "3"}, e{name: ".wh..wh..opq"})); err != nil {
		t.Fatal(err)
	}
	if names, _ := os.ReadDir(w.root); len(names) != 1 || names[0].Name() != "new" {
		t.Fatalf("an opaque root holds %v, want new alone", names)
	}
	w.intact(t)
}

// TestReplacingKeepsTarOrder: a later entry replaces an earlier one of any
// type; a directory over a directory keeps what it holds.
func TestReplacingKeepsTarOrder(t *testing.T) {
	w := newWorld(t)
	_, err := apply(t, w.root, roomy,
		tarOf(t, e{name: "d/f", data: "1"}, e{name: "f", data: "2"}, e{name: "keep/k", data: "3"}),
		tarOf(t, e{name: "d", data: "now a file"}, e{name: "f", typ: tar.TypeDir, mode: 0o755}, e{name: "f/inner", data: "4"}, e{name: "keep", typ: tar.TypeDir, mode: 0o700}),
	)
	if err != nil {
		t.Fatal(err)
	}
	if read(t, filepath.Join(w.root, "d")) != "now a file" || read(t, filepath.Join(w.root, "keep/k")) != "3" {
		t.Fatal("entries were not replaced in tar order")
	}
	w.intact(t)
}

// TestEntryUnderANonDirectoryIsRefused: an entry below a regular file or
// a symlink that leads nowhere inside the root (one that names a host
// directory) breaks the layer instead of being made somewhere else.
func TestEntryUnderANonDirectoryIsRefused(t *testing.T) {
	w := newWorld(t)
	_, err := apply(t, w.root, roomy, tarOf(t, e{name: "f", data: "1"}, e{name: "f/x", data: "2"}))
	wantCode(t, err, "image_layer_invalid")
	w.intact(t)
	for _, name := range []string{"s/secret", "s/new/deep/f"} {
		w = newWorld(t)
		_, err = apply(t, w.root, roomy, tarOf(t, e{name: "s", typ: tar.TypeSymlink, link: w.outside}), tarOf(t, e{name: name, data: "pwned"}))
		wantCode(t, err, "image_layer_invalid")
		w.intact(t)
	}
}

// TestLimits: the bytes and the entries of all layers together are
// bounded, on both sides; a file larger than what is left is refused
// before it is made, and a compression bomb stops at the bound.
func TestLimits(t *testing.T) {
	small := tarOf(t, e{name: "a", data: strings.Repeat("x", 1000)}, e{name: "b", data: "y"})
	size := int64(len(small))
	w := newWorld(t)
	if _, err := apply(t, w.root, Limits{MaxBytes: size, MaxEntries: 2}, small); err != nil {
		t.Fatalf("a layer of exactly the bounds: %v", err)
	}
	w = newWorld(t)
	_, err := apply(t, w.root, Limits{MaxBytes: size - 1, MaxEntries: 2}, small)
	wantCode(t, err, "image_too_large")
	w = newWorld(t)
	_, err = apply(t, w.root, Limits{MaxBytes: size, MaxEntries: 1}, small)
	wantCode(t, err, "image_too_large")
	// Across layers.
	w = newWorld(t)
	_, err = apply(t, w.root, Limits{MaxBytes: 2*size - 1, MaxEntries: 10}, small, small)
	wantCode(t, err, "image_too_large")

	// A file that says it is larger than what is left is not made.
	w = newWorld(t)
	_, err = apply(t, w.root, Limits{MaxBytes: 1 << 20, MaxEntries: 10}, tarOf(t, e{name: "big", data: strings.Repeat("z", 2<<20)}))
	wantCode(t, err, "image_too_large")
	if _, err := os.Lstat(filepath.Join(w.root, "big")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the file over the bound was made: %v", err)
	}

	// A bomb: 64 MiB of zeros in 64 KiB of gzip.
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	tw := tar.NewWriter(zw)
	for i := range 4 {
		tw.WriteHeader(&tar.Header{Name: "zero" + string(rune('0'+i)), Mode: 0o644, Size: 16 << 20, Typeflag: tar.TypeReg})
		io.CopyN(tw, zeros{}, 16<<20)
	}
	tw.Close()
	zw.Close()
	zr, _ := gzip.NewReader(&z)
	w = newWorld(t)
	r, _ := Open(w.root, Limits{MaxBytes: 20 << 20, MaxEntries: 10})
	defer r.Close()
	err = r.Apply(zr)
	wantCode(t, err, "image_too_large")
	if r.Bytes > 20<<20 {
		t.Fatalf("read %d bytes past a bound of %d", r.Bytes, 20<<20)
	}
	w.intact(t)
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestGarbageIsInvalid: what is not a tar stream fails as invalid.
func TestGarbageIsInvalid(t *testing.T) {
	w := newWorld(t)
	_, err := apply(t, w.root, roomy, bytes.Repeat([]byte("not a tar "), 100))
	wantCode(t, err, "image_layer_invalid")
	// A header that promises more than the stream holds.
	l := tarOf(t, e{name: "a", data: strings.Repeat("x", 5000)})
	_, err = apply(t, newWorld(t).root, roomy, l[:2048])
	wantCode(t, err, "image_layer_invalid")
}

// paxRecord is one PAX extended header record ("LEN key=value\n").
func paxRecord(k, v string) string {
	rec := " " + k + "=" + v + "\n"
	n := len(rec)
	for {
		if l := len(strconv.Itoa(n)) + len(rec); l != n {
			n = l
			continue
		}
		return strconv.Itoa(n) + rec
	}
}

// sparseLayer is a layer holding one PAX (1.0) sparse file of realsize
// bytes, stored as one byte: archive/tar writes no sparse file, so its
// extended header is swapped in for a comment of the same length.
func sparseLayer(t *testing.T, realsize int64) []byte {
	t.Helper()
	want := paxRecord("GNU.sparse.major", "1") + paxRecord("GNU.sparse.minor", "0") +
		paxRecord("GNU.sparse.name", "sparse-file") + paxRecord("GNU.sparse.realsize", strconv.FormatInt(realsize, 10))
	// A record of the same length (the length's digits may skip it for
	// one key: then another's does not).
	var key, comment string
	n := 0
	for _, k := range []string{"comment", "execbox.pad"} {
		for n = 1; len(paxRecord(k, strings.Repeat("c", n))) < len(want); n++ {
		}
		if comment = paxRecord(k, strings.Repeat("c", n)); len(comment) == len(want) {
			key = k
			break
		}
	}
	if key == "" {
		t.Fatalf("no record of the sparse records' length %d (%q)", len(want), want)
	}
	body := make([]byte, 512)
	copy(body, fmt.Sprintf("1\n%d\n1\n", realsize-1)) // one region: the last byte
	body = append(body, 'x')
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	tw.WriteHeader(&tar.Header{Name: "f", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body)), Format: tar.FormatPAX,
		PAXRecords: map[string]string{key: strings.Repeat("c", n)}})
	tw.Write(body)
	tw.Close()
	out := bytes.Replace(b.Bytes(), []byte(comment), []byte(want), 1)
	if bytes.Equal(out, b.Bytes()) {
		t.Fatal("the comment record was not found to replace")
	}
	return out
}

// TestBombsOfNothing: what takes no tar bytes still counts — a sparse
// file's holes (written out as zeros) and the directories one deep name
// makes — and both sides of each bound hold.
func TestBombsOfNothing(t *testing.T) {
	// Two layers of a 600 KiB sparse file each: under 1.2 MiB of tar
	// bytes by far, 1.2 MiB on disk.
	sparse := sparseLayer(t, 600<<10)
	w := newWorld(t)
	r, err := apply(t, w.root, Limits{MaxBytes: 1200<<10 + 8<<10, MaxEntries: 10}, sparse, sparse)
	if err != nil {
		t.Fatalf("sparse files within the bound: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(w.root, "sparse-file")); err != nil || fi.Size() != 600<<10 || r.Written != 1200<<10 {
		t.Fatalf("the sparse file: %v %v, written %d", fi, err, r.Written)
	}
	w = newWorld(t)
	r, err = apply(t, w.root, Limits{MaxBytes: 1 << 20, MaxEntries: 10}, sparse, sparse)
	wantCode(t, err, "image_too_large")
	if r.Bytes > 16<<10 {
		t.Fatalf("%d tar bytes read: the bound held for the wrong reason", r.Bytes)
	}

	deep := tarOf(t, e{name: strings.Repeat("d/", 100) + "f", data: "x"})
	w = newWorld(t)
	if _, err := apply(t, w.root, Limits{MaxBytes: 100*dirCost + 1, MaxEntries: 101}, deep); err != nil {
		t.Fatalf("100 directories for one deep name within the bounds: %v", err)
	}
	for _, lim := range []Limits{{MaxBytes: 100*dirCost + 1, MaxEntries: 100}, {MaxBytes: 100 * dirCost, MaxEntries: 101}} {
		w = newWorld(t)
		_, err = apply(t, w.root, lim, deep)
		wantCode(t, err, "image_too_large")
	}
}

// TestWhiteoutOfDotDot: ".wh..." names "..", the directory above; a
// layer that holds one is refused, and nothing above the root goes.
func TestWhiteoutOfDotDot(t *testing.T) {
	for _, name := range []string{".wh...", "s/.wh...", "d/.wh...", ".wh..", "d/.wh."} {
		w := newWorld(t)
		_, err := apply(t, w.root, roomy,
			tarOf(t, e{name: "s", typ: tar.TypeSymlink, link: "/"}, e{name: "d/x", data: "1"}),
			tarOf(t, e{name: name}))
		wantCode(t, err, "image_layer_invalid")
		w.intact(t)
		if _, err := os.Lstat(filepath.Join(w.root, "d/x")); err != nil {
			t.Fatalf("%s: the root's own files went: %v", name, err)
		}
	}
}
