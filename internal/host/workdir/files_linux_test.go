package workdir

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
)

// wantErr checks that err is of kind with code, or nil when kind is nil.
func wantErr(t *testing.T, what string, err error, kind *sandbox.Kind, code string) {
	t.Helper()
	if kind == nil {
		if err != nil {
			t.Errorf("%s: %v", what, err)
		}
		return
	}
	if !errors.Is(err, kind) || sandbox.CodeOf(err) != code {
		t.Errorf("%s = %v (code %q), want %s %q", what, err, sandbox.CodeOf(err), kind, code)
	}
}

// onlyReader hides a reader's WriterTo, so Put sees a stream.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

func put(t *testing.T, w *Dir, p, data string) {
	t.Helper()
	if _, err := w.Put(p, strings.NewReader(data), int64(len(data))); err != nil {
		t.Fatalf("Put(%q): %v", p, err)
	}
}

func umask() os.FileMode {
	old := unix.Umask(0)
	unix.Umask(old)
	return os.FileMode(old)
}

// A 50 MiB file, streamed in and out, comes back byte for byte.
func TestPutGetRoundTrip(t *testing.T) {
	w := newWD(t)
	const size = 50 << 20
	in := sha256.New()
	src := io.TeeReader(io.LimitReader(rand.NewChaCha8([32]byte{1}), size), in)
	n, err := w.Put("dir/big.bin", onlyReader{src}, size)
	if err != nil || n != size {
		t.Fatalf("Put = %d, %v", n, err)
	}
	out := sha256.New()
	n, err = w.Get("dir/big.bin", out, size)
	if err != nil || n != size {
		t.Fatalf("Get = %d, %v", n, err)
	}
	if !bytes.Equal(in.Sum(nil), out.Sum(nil)) {
		t.Fatal("the file came back different")
	}
}

func TestPutBounds(t *testing.T) {
	for _, tc := range []struct {
		name       string
		size, max  int64
		kind       *sandbox.Kind
		code       string
		replaceOld bool // a file is at the path before
	}{
		{name: "under max", size: 999, max: 1000},
		{name: "exactly max", size: 1000, max: 1000},
		{name: "max+1", size: 1001, max: 1000, kind: sandbox.ErrLimit, code: "file_too_large"},
		{name: "max+1 over an old file", size: 1001, max: 1000, kind: sandbox.ErrLimit, code: "file_too_large", replaceOld: true},
		{name: "replacing a longer file", size: 10, max: 1000, replaceOld: true},
		{name: "empty at max 0", size: 0, max: 0},
		{name: "one byte at max 0", size: 1, max: 0, kind: sandbox.ErrLimit, code: "file_too_large"},
		{name: "negative max", size: 0, max: -1, kind: sandbox.ErrInvalid, code: "limit_invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWD(t)
			if tc.replaceOld {
				put(t, w, "d/f", strings.Repeat("old", 100))
			}
			data := bytes.Repeat([]byte{'x'}, int(tc.size))
			n, err := w.Put("d/f", onlyReader{bytes.NewReader(data)}, tc.max)
			wantErr(t, "Put", err, tc.kind, tc.code)
			got, rerr := os.ReadFile(filepath.Join(w.Path, "d/f"))
			if tc.kind != nil {
				if n != 0 || !os.IsNotExist(rerr) {
					t.Fatalf("a refused Put returned %d and left a file (%v)", n, rerr)
				}
				return
			}
			if n != tc.size || !bytes.Equal(got, data) {
				t.Fatalf("Put = %d, file holds %d bytes (%v), want %d", n, len(got), rerr, tc.size)
			}
		})
	}
}

func TestGetBounds(t *testing.T) {
	w := newWD(t)
	put(t, w, "f", strings.Repeat("y", 1000))
	put(t, w, "empty", "")
	for _, tc := range []struct {
		name string
		path string
		max  int64
		want int64 // bytes in the writer
		kind *sandbox.Kind
		code string
	}{
		{name: "over max", path: "f", max: 2000, want: 1000},
		{name: "exactly max", path: "f", max: 1000, want: 1000},
		{name: "max-1", path: "f", max: 999, want: 999, kind: sandbox.ErrLimit, code: "file_too_large"},
		{name: "max 0", path: "f", max: 0, want: 0, kind: sandbox.ErrLimit, code: "file_too_large"},
		{name: "empty at max 0", path: "empty", max: 0, want: 0},
		{name: "negative max", path: "f", max: -1, want: 0, kind: sandbox.ErrInvalid, code: "limit_invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			n, err := w.Get(tc.path, &buf, tc.max)
			wantErr(t, "Get", err, tc.kind, tc.code)
			if n != tc.want || int64(buf.Len()) != tc.want {
				t.Fatalf("Get = %d, writer holds %d, want %d", n, buf.Len(), tc.want)
			}
		})
	}
}

// Every refusal: bad paths, what is not there, what is in the way.
func TestFilesRefusals(t *testing.T) {
	w := newWD(t)
	put(t, w, "f", "x")
	if err := w.Mkdir("d"); err != nil {
		t.Fatal(err)
	}
	var sink bytes.Buffer
	ops := map[string]func(p string) error{
		"Put":    func(p string) error { _, err := w.Put(p, strings.NewReader("x"), 10); return err },
		"Get":    func(p string) error { _, err := w.Get(p, &sink, 10); return err },
		"Stat":   func(p string) error { _, err := w.Stat(p); return err },
		"List":   func(p string) error { _, _, err := w.List(p, 10); return err },
		"Remove": w.RemovePath,
		"Mkdir":  w.Mkdir,
	}
	all := slices.Sorted(maps.Keys(ops))
	for _, tc := range []struct {
		ops  []string // nil: all
		path string
		kind *sandbox.Kind
		code string
	}{
		{path: "../x", kind: sandbox.ErrInvalid, code: "path_invalid"},
		{path: "/etc/passwd", kind: sandbox.ErrInvalid, code: "path_invalid"},
		{path: "a//b", kind: sandbox.ErrInvalid, code: "path_invalid"},
		{path: "a/./b", kind: sandbox.ErrInvalid, code: "path_invalid"},
		{path: "a\x00b", kind: sandbox.ErrInvalid, code: "path_invalid"},
		{path: strings.Repeat("a", 256), kind: sandbox.ErrInvalid, code: "path_invalid"},
		// Through a regular file.
		{path: "f/x", kind: sandbox.ErrInvalid, code: "path_invalid"},
		{path: "f/x/y", kind: sandbox.ErrInvalid, code: "path_invalid"},
		// Missing.
		{ops: []string{"Get", "Stat", "List", "Remove"}, path: "missing", kind: sandbox.ErrNotFound, code: "file_not_found"},
		{ops: []string{"Get", "Stat", "List", "Remove"}, path: "nodir/missing", kind: sandbox.ErrNotFound, code: "file_not_found"},
		{ops: []string{"Get", "Stat", "List", "Remove"}, path: "d/missing", kind: sandbox.ErrNotFound, code: "file_not_found"},
		// The work dir itself is a directory only to Stat and List.
		{ops: []string{"Put", "Get", "Remove", "Mkdir"}, path: "", kind: sandbox.ErrInvalid, code: "path_invalid"},
		// The wrong kind of entry.
		{ops: []string{"Put"}, path: "d", kind: sandbox.ErrInvalid, code: "path_invalid"},
		{ops: []string{"Get"}, path: "d", kind: sandbox.ErrInvalid, code: "not_a_file"},
		{ops: []string{"List"}, path: "f", kind: sandbox.ErrInvalid, code: "not_a_dir"},
		{ops: []string{"Mkdir"}, path: "f", kind: sandbox.ErrInvalid, code: "path_invalid"},
	} {
		names := tc.ops
		if names == nil {
			names = all
		}
		for _, op := range names {
			wantErr(t, op+"("+strings.ReplaceAll(tc.path, "\x00", `\x00`)+")", ops[op](tc.path), tc.kind, tc.code)
		}
	}
	// Nothing was made on the way.
	if ents, _ := os.ReadDir(w.Path); len(ents) != 2 {
		t.Fatalf("the work dir holds %d entries, want f and d", len(ents))
	}
}

// A symlink planted as a parent or as the target is never followed, by
// any method; Remove removes the link itself.
func TestFilesNeverFollowSymlinks(t *testing.T) {
	w := newWD(t)
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("s3cret"), 0o600)
	os.Mkdir(filepath.Join(outside, "sub"), 0o755)
	os.Symlink(outside, filepath.Join(w.Path, "pdir"))
	os.Symlink(filepath.Join(outside, "secret"), filepath.Join(w.Path, "tfile"))
	var sink bytes.Buffer
	for _, tc := range []struct {
		name string
		op   func() error
		code string // all ErrInvalid
	}{
		{"Put through parent", func() error { _, err := w.Put("pdir/new", strings.NewReader("x"), 10); return err }, "path_invalid"},
		{"Put through deeper parent", func() error { _, err := w.Put("pdir/sub/new", strings.NewReader("x"), 10); return err }, "path_invalid"},
		{"Put over the target", func() error { _, err := w.Put("tfile", strings.NewReader("x"), 10); return err }, "path_invalid"},
		{"Put over the dir link", func() error { _, err := w.Put("pdir", strings.NewReader("x"), 10); return err }, "path_invalid"},
		{"Get through parent", func() error { _, err := w.Get("pdir/secret", &sink, 10); return err }, "path_invalid"},
		{"Get the target", func() error { _, err := w.Get("tfile", &sink, 10); return err }, "not_a_file"},
		{"Stat through parent", func() error { _, err := w.Stat("pdir/secret"); return err }, "path_invalid"},
		{"List through parent", func() error { _, _, err := w.List("pdir/sub", 10); return err }, "path_invalid"},
		{"List the dir link", func() error { _, _, err := w.List("pdir", 10); return err }, "not_a_dir"},
		{"Remove through parent", func() error { return w.RemovePath("pdir/secret") }, "path_invalid"},
		{"Remove a dir through parent", func() error { return w.RemovePath("pdir/sub") }, "path_invalid"},
		{"Mkdir through parent", func() error { return w.Mkdir("pdir/new") }, "path_invalid"},
		{"Mkdir over the dir link", func() error { return w.Mkdir("pdir") }, "path_invalid"},
		{"Mkdir over the file link", func() error { return w.Mkdir("tfile/x") }, "path_invalid"},
	} {
		wantErr(t, tc.name, tc.op(), sandbox.ErrInvalid, tc.code)
	}
	if sink.Len() != 0 {
		t.Fatalf("Get copied %q", sink.String())
	}
	checkOutside := func() {
		t.Helper()
		if b, err := os.ReadFile(filepath.Join(outside, "secret")); string(b) != "s3cret" {
			t.Fatalf("the target outside changed: %q %v", b, err)
		}
		if ents, _ := os.ReadDir(outside); len(ents) != 2 {
			t.Fatalf("outside holds %d entries, want secret and sub", len(ents))
		}
		if ents, _ := os.ReadDir(filepath.Join(outside, "sub")); len(ents) != 0 {
			t.Fatalf("created %s outside", ents[0].Name())
		}
	}
	checkOutside()
	// Stat and List describe the links themselves.
	fi, err := w.Stat("tfile")
	if err != nil || fi.Type != sandbox.FileSymlink || fi.Path != "tfile" {
		t.Fatalf("Stat(tfile) = %+v, %v", fi, err)
	}
	ents, _, err := w.List("", 10)
	if err != nil || len(ents) != 2 || ents[0].Type != sandbox.FileSymlink || ents[1].Type != sandbox.FileSymlink {
		t.Fatalf("List = %+v, %v", ents, err)
	}
	// Removing a link removes the link, never its target.
	for _, p := range []string{"tfile", "pdir"} {
		if err := w.RemovePath(p); err != nil {
			t.Fatalf("RemovePath(%s): %v", p, err)
		}
		if _, err := os.Lstat(filepath.Join(w.Path, p)); !os.IsNotExist(err) {
			t.Fatalf("%s is still there: %v", p, err)
		}
	}
	checkOutside()
}

// A FIFO is refused at once, never opened to wait for a writer or reader.
func TestFilesFIFO(t *testing.T) {
	w := newWD(t)
	if err := unix.Mkfifo(filepath.Join(w.Path, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		op   func() error
		code string
	}{
		{"Get", func() error { _, err := w.Get("fifo", io.Discard, 10); return err }, "not_a_file"},
		{"Put", func() error { _, err := w.Put("fifo", strings.NewReader("x"), 10); return err }, "path_invalid"},
	} {
		done := make(chan error, 1)
		go func() { done <- tc.op() }()
		select {
		case err := <-done:
			wantErr(t, tc.name+"(fifo)", err, sandbox.ErrInvalid, tc.code)
		case <-time.After(5 * time.Second):
			t.Fatalf("%s of a FIFO hangs", tc.name)
		}
	}
	if fi, err := w.Stat("fifo"); err != nil || fi.Type != sandbox.FileOther {
		t.Fatalf("Stat(fifo) = %+v, %v", fi, err)
	}
}

func TestStat(t *testing.T) {
	w := newWD(t)
	put(t, w, "d/f", "hello")
	perm := 0o644 &^ umask()
	for _, tc := range []struct {
		path string
		typ  string
		size int64
		mode os.FileMode
	}{
		{path: "", typ: sandbox.FileDir, mode: 0o700},
		{path: "d", typ: sandbox.FileDir, mode: 0o755 &^ umask()},
		{path: "d/f", typ: sandbox.FileRegular, size: 5, mode: perm},
	} {
		fi, err := w.Stat(tc.path)
		if err != nil {
			t.Fatalf("Stat(%q): %v", tc.path, err)
		}
		host, _ := os.Lstat(filepath.Join(w.Path, tc.path))
		if fi.Path != tc.path || fi.Type != tc.typ || os.FileMode(fi.Mode) != tc.mode ||
			(tc.typ == sandbox.FileRegular && fi.Size != tc.size) || !fi.ModTime.Equal(host.ModTime()) {
			t.Errorf("Stat(%q) = %+v", tc.path, fi)
		}
	}
}

func TestList(t *testing.T) {
	w := newWD(t)
	put(t, w, "b", "bbb")
	put(t, w, "a", "")
	put(t, w, "c/x", "x")
	os.Symlink("/etc", filepath.Join(w.Path, "d"))
	unix.Mkfifo(filepath.Join(w.Path, "e"), 0o644)
	all := "a:file:0,b:file:3,c:dir,d:symlink,e:other"
	for _, tc := range []struct {
		dir       string
		max       int
		want      string
		truncated bool
	}{
		{dir: "", max: 10, want: all},
		{dir: "", max: 6, want: all},
		{dir: "", max: 5, want: all},
		{dir: "", max: 4, want: "a:file:0,b:file:3,c:dir,d:symlink", truncated: true},
		{dir: "", max: 1, want: "a:file:0", truncated: true},
		{dir: "", max: 0, want: "", truncated: true},
		{dir: "c", max: 1, want: "c/x:file:1"},
		{dir: "c", max: 0, want: "", truncated: true},
	} {
		ents, trunc, err := w.List(tc.dir, tc.max)
		if err != nil {
			t.Fatalf("List(%q, %d): %v", tc.dir, tc.max, err)
		}
		var got []string
		for _, e := range ents {
			s := e.Path + ":" + e.Type
			if e.Type == sandbox.FileRegular {
				s += ":" + strconv.FormatInt(e.Size, 10)
			}
			got = append(got, s)
		}
		if strings.Join(got, ",") != tc.want || trunc != tc.truncated {
			t.Errorf("List(%q, %d) = %v truncated %v, want %s truncated %v", tc.dir, tc.max, got, trunc, tc.want, tc.truncated)
		}
	}
	if _, _, err := w.List("", -1); !errors.Is(err, sandbox.ErrInvalid) || sandbox.CodeOf(err) != "limit_invalid" {
		t.Errorf("List with max -1 = %v", err)
	}
}

// A directory bigger than one read batch: the smallest names, sorted.
func TestListLarge(t *testing.T) {
	w := newWD(t)
	dir := filepath.Join(w.Path, "many")
	os.Mkdir(dir, 0o755)
	const n = 3000
	perm := rand.Perm(n)
	for _, i := range perm {
		os.WriteFile(filepath.Join(dir, name4(i)), nil, 0o644)
	}
	for _, tc := range []struct {
		max       int
		want      int
		truncated bool
	}{{10, 10, true}, {n - 1, n - 1, true}, {n, n, false}, {n + 1, n, false}} {
		ents, trunc, err := w.List("many", tc.max)
		if err != nil || len(ents) != tc.want || trunc != tc.truncated {
			t.Fatalf("List(many, %d) = %d entries, truncated %v, %v", tc.max, len(ents), trunc, err)
		}
		for i, e := range ents {
			if e.Path != "many/"+name4(i) {
				t.Fatalf("List(many, %d)[%d] = %s", tc.max, i, e.Path)
			}
		}
	}
}

func name4(i int) string { return fmt.Sprintf("%04d", i) }

func TestRemovePath(t *testing.T) {
	w := newWD(t)
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "keep"), []byte("k"), 0o644)
	put(t, w, "a/b/c/f", "x")
	put(t, w, "a/f", "x")
	put(t, w, "other", "x")
	w.Mkdir("a/empty")
	os.Symlink(outside, filepath.Join(w.Path, "a/b/out"))
	os.Symlink(filepath.Join(outside, "keep"), filepath.Join(w.Path, "a/b/c/keep"))
	unix.Mkfifo(filepath.Join(w.Path, "a/b/fifo"), 0o644)
	for i := range 1500 { // more than one read batch
		os.WriteFile(filepath.Join(w.Path, "a/many-"+name4(i)), nil, 0o644)
	}
	if err := w.RemovePath("other"); err != nil {
		t.Fatal(err)
	}
	if err := w.RemovePath("a"); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(w.Path); len(ents) != 0 {
		t.Fatalf("left %s", ents[0].Name())
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 1 {
		t.Fatal("removed something outside")
	}
}

// RemovePath holds one fd per level: a tree maxDepth deep goes, a deeper
// one is refused.
func TestRemovePathDepth(t *testing.T) {
	for _, tc := range []struct {
		depth int
		kind  *sandbox.Kind
		code  string
	}{{maxDepth, nil, ""}, {maxDepth + 1, sandbox.ErrLimit, "dir_too_deep"}} {
		w := newWD(t)
		p := strings.TrimSuffix(strings.Repeat("d/", tc.depth), "/")
		if err := w.Mkdir(p); err != nil {
			t.Fatal(err)
		}
		put(t, w, p+"/f", "x")
		wantErr(t, fmt.Sprintf("RemovePath of a tree %d deep", tc.depth), w.RemovePath("d"), tc.kind, tc.code)
	}
}

// A mount point in a tree is never entered, so what is mounted there is
// never emptied.
func TestRemovePathMountPoint(t *testing.T) {
	testutil.RequiresRoot(t, "root")
	w := newWD(t)
	if err := w.Mkdir("m/mnt"); err != nil {
		t.Fatal(err)
	}
	mnt := filepath.Join(w.Path, "m/mnt")
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=64k"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })
	os.WriteFile(filepath.Join(mnt, "keep"), []byte("k"), 0o644)
	for _, p := range []string{"m", "m/mnt"} {
		wantErr(t, "RemovePath("+p+")", w.RemovePath(p), sandbox.ErrInvalid, "path_invalid")
	}
	if _, err := os.Stat(filepath.Join(mnt, "keep")); err != nil {
		t.Fatalf("the mount was emptied: %v", err)
	}
}

func TestMkdir(t *testing.T) {
	w := newWD(t)
	for _, p := range []string{"a/b/c", "a/b/c", "a/b", "a/x"} {
		if err := w.Mkdir(p); err != nil {
			t.Fatalf("Mkdir(%q): %v", p, err)
		}
	}
	for _, p := range []string{"a", "a/b", "a/b/c", "a/x"} {
		fi, err := os.Lstat(filepath.Join(w.Path, p))
		if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o755&^umask() {
			t.Fatalf("%s: %v %v", p, fi.Mode(), err)
		}
	}
}

// What Put and Mkdir create is the sandbox's; what was there stays whose
// it was.
func TestFilesOwnership(t *testing.T) {
	testutil.RequiresRoot(t, "root")
	const uid, gid = 12345, 23456
	w, err := New(t.TempDir(), uid, gid)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Remove() })
	os.Mkdir(filepath.Join(w.Path, "pre"), 0o755) // root's
	put(t, w, "a/b/f", "x")
	put(t, w, "pre/f", "x")
	if err := w.Mkdir("pre/x/y"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path     string
		uid, gid uint32
	}{
		{"a", uid, gid}, {"a/b", uid, gid}, {"a/b/f", uid, gid},
		{"pre", 0, 0}, {"pre/f", uid, gid}, {"pre/x", uid, gid}, {"pre/x/y", uid, gid},
	} {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(w.Path, tc.path), &st); err != nil || st.Uid != tc.uid || st.Gid != tc.gid {
			t.Errorf("%s is %d:%d (%v), want %d:%d", tc.path, st.Uid, st.Gid, err, tc.uid, tc.gid)
		}
	}
}

// A full work dir is ErrLimit work_size_exceeded, and the part written
// does not stay.
func TestPutFullWorkDir(t *testing.T) {
	testutil.RequiresRoot(t, "root")
	w := newWD(t)
	if err := unix.Mount("tmpfs", w.Path, "tmpfs", 0, "size=64k"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(w.Path, unix.MNT_DETACH) })
	if _, err := w.Put("small", bytes.NewReader(make([]byte, 16<<10)), 1<<20); err != nil {
		t.Fatalf("Put within the size: %v", err)
	}
	_, err := w.Put("big", bytes.NewReader(make([]byte, 128<<10)), 1<<20)
	wantErr(t, "Put past a full work dir", err, sandbox.ErrLimit, "work_size_exceeded")
	if _, err := os.Lstat(filepath.Join(w.Path, "big")); !os.IsNotExist(err) {
		t.Fatalf("the partial file stays: %v", err)
	}
}

// While the "program" swaps a directory and a symlink to outside back and
// forth, every method either works inside or fails; none reaches outside.
func TestFilesSwapRace(t *testing.T) {
	w := newWD(t)
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("s3cret"), 0o644)
	put(t, w, "d/secret", "inside")
	os.Symlink(outside, filepath.Join(w.Path, "swap"))
	stop, done := make(chan struct{}), make(chan struct{})
	var swaps atomic.Int64
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := unix.Renameat2(unix.AT_FDCWD, filepath.Join(w.Path, "d"), unix.AT_FDCWD, filepath.Join(w.Path, "swap"), unix.RENAME_EXCHANGE); err != nil {
				t.Error(err)
				return
			}
			swaps.Add(1)
		}
	}()
	stopSwapping := sync.OnceFunc(func() { close(stop); <-done })
	defer stopSwapping()
	ok := func(what string, err error) {
		if err != nil && !errors.Is(err, sandbox.ErrInvalid) && !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("%s: %v (code %s)", what, err, sandbox.CodeOf(err))
		}
	}
	for range 500 {
		_, err := w.Put("d/new", strings.NewReader("x"), 10)
		ok("Put", err)
		var buf bytes.Buffer
		_, err = w.Get("d/secret", &buf, 100)
		ok("Get", err)
		if err == nil && buf.String() != "inside" {
			t.Fatalf("Get read %q", buf.String())
		}
		_, err = w.Stat("d/secret")
		ok("Stat", err)
		_, _, err = w.List("d", 10)
		ok("List", err)
		ok("Mkdir", w.Mkdir("d/m/n"))
		ok("RemovePath", w.RemovePath("d/m"))
		ok("RemovePath", w.RemovePath("d/new"))
	}
	stopSwapping()
	if swaps.Load() == 0 {
		t.Fatal("no swap happened")
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 1 {
		t.Fatalf("outside holds %d entries, want the secret alone", len(ents))
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "secret")); string(b) != "s3cret" {
		t.Fatalf("the secret outside is now %q", b)
	}
}
