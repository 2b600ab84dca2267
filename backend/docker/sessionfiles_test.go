package docker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// filesSandbox makes a sandbox of spec, closed when the test ends, and
// returns it as the sandbox.Files it must be.
func filesSandbox(t *testing.T, spec sandbox.Spec) (*Sandbox, sandbox.Files) {
	t.Helper()
	b := newBackend(t, Config{})
	sb := create(t, b, spec)
	f, ok := sb.(sandbox.Files)
	if !ok {
		t.Fatalf("%T is not a sandbox.Files", sb)
	}
	return sb.(*Sandbox), f
}

// filesSh runs a shell script in sb and fails the test unless it exits 0.
func filesSh(t *testing.T, sb sandbox.Sandbox, script string) *sandbox.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := sb.Exec(ctx, &sandbox.Process{Args: []string{"/bin/sh", "-c", script}})
	if err != nil {
		t.Fatalf("Exec %q: %v", script, err)
	}
	if !res.Succeeded() {
		t.Fatalf("Exec %q: %s", script, describe(res))
	}
	return res
}

// wantFilesErr fails the test unless err is of kind with code.
func wantFilesErr(t *testing.T, what string, err error, kind *sandbox.Kind, code string) {
	t.Helper()
	if !errors.Is(err, kind) || sandbox.CodeOf(err) != code {
		t.Errorf("%s: err = %v (code %q), want %v %q", what, err, sandbox.CodeOf(err), kind, code)
	}
}

func filesPut(t *testing.T, f sandbox.Files, p, data string) {
	t.Helper()
	n, err := f.PutFile(context.Background(), p, strings.NewReader(data), sandbox.MiB)
	if err != nil || n != int64(len(data)) {
		t.Fatalf("PutFile %q: %d, %v", p, n, err)
	}
}

func filesGet(t *testing.T, f sandbox.Files, p string) string {
	t.Helper()
	var buf bytes.Buffer
	if _, err := f.GetFile(context.Background(), p, &buf, sandbox.MiB); err != nil {
		t.Fatalf("GetFile %q: %v", p, err)
	}
	return buf.String()
}

func fileNames(entries []sandbox.FileInfo) []string {
	var out []string
	for _, e := range entries {
		out = append(out, e.Path+":"+e.Type)
	}
	return out
}

// A 50 MiB file streams in and out byte for byte, and an Exec sees what
// PutFile wrote.
func TestSessionFilesRoundTrip(t *testing.T) {
	sb, f := filesSandbox(t, sandbox.Spec{})
	ctx := context.Background()
	const size = 50 * sandbox.MiB
	in := sha256.New()
	src := io.TeeReader(io.LimitReader(rand.NewChaCha8([32]byte{1}), size), in)
	n, err := f.PutFile(ctx, "data/big.bin", src, size)
	if err != nil || n != size {
		t.Fatalf("PutFile: %d, %v", n, err)
	}
	out := sha256.New()
	n, err = f.GetFile(ctx, "data/big.bin", out, size)
	if err != nil || n != size {
		t.Fatalf("GetFile: %d, %v", n, err)
	}
	if !bytes.Equal(in.Sum(nil), out.Sum(nil)) {
		t.Fatal("GetFile returned other bytes than PutFile wrote")
	}
	fi, err := f.Stat(ctx, "data/big.bin")
	if err != nil || fi.Type != sandbox.FileRegular || fi.Size != size || fi.Mode != 0o644 || fi.Path != "data/big.bin" {
		t.Errorf("Stat: %+v, %v", fi, err)
	}
	if d := time.Since(fi.ModTime); d < -time.Minute || d > time.Minute {
		t.Errorf("Stat: mtime %v is not about now", fi.ModTime)
	}
	res := filesSh(t, sb, "sha256sum data/big.bin")
	if want := hex.EncodeToString(in.Sum(nil)); !strings.HasPrefix(res.Stdout, want) {
		t.Errorf("sha256sum in the sandbox = %q, want %s", res.Stdout, want)
	}

	// Both ways with an Exec: PutFile → cat, and echo → GetFile.
	filesPut(t, f, "in.txt", "from PutFile\n")
	if res := filesSh(t, sb, "cat in.txt"); res.Stdout != "from PutFile\n" {
		t.Errorf("cat in.txt = %q", res.Stdout)
	}
	filesSh(t, sb, "echo from Exec > out.txt; chmod 600 out.txt")
	if got := filesGet(t, f, "out.txt"); got != "from Exec\n" {
		t.Errorf("GetFile out.txt = %q", got)
	}
	if fi, err := f.Stat(ctx, "out.txt"); err != nil || fi.Mode != 0o600 || fi.Size != 10 {
		t.Errorf("Stat out.txt: %+v, %v", fi, err)
	}
	// Replacing a file.
	filesPut(t, f, "in.txt", "again")
	if got := filesGet(t, f, "in.txt"); got != "again" {
		t.Errorf("GetFile after a replace = %q", got)
	}
}

// max bytes pass, max+1 is ErrLimit file_too_large, both ways.
func TestSessionFilesMax(t *testing.T) {
	_, f := filesSandbox(t, sandbox.Spec{})
	ctx := context.Background()
	data := bytes.Repeat([]byte("0123456789"), 100) // 1000 bytes
	if n, err := f.PutFile(ctx, "exact", bytes.NewReader(data), 1000); err != nil || n != 1000 {
		t.Fatalf("PutFile of max bytes: %d, %v", n, err)
	}
	_, err := f.PutFile(ctx, "over", bytes.NewReader(append(data, 'x')), 1000)
	wantFilesErr(t, "PutFile of max+1 bytes", err, sandbox.ErrLimit, "file_too_large")
	_, err = f.Stat(ctx, "over")
	wantFilesErr(t, "Stat after a PutFile too large", err, sandbox.ErrNotFound, "file_not_found")
	// Too large over an existing file leaves it as it was.
	_, err = f.PutFile(ctx, "exact", io.LimitReader(rand.NewChaCha8([32]byte{2}), 5000), 1000)
	wantFilesErr(t, "PutFile too large over a file", err, sandbox.ErrLimit, "file_too_large")
	if got := filesGet(t, f, "exact"); got != string(data) {
		t.Errorf("a PutFile too large changed the file: %d bytes", len(got))
	}
	if n, err := f.PutFile(ctx, "empty", strings.NewReader(""), 0); err != nil || n != 0 {
		t.Errorf("PutFile of an empty file with max 0: %d, %v", n, err)
	}

	var buf bytes.Buffer
	if n, err := f.GetFile(ctx, "exact", &buf, 1000); err != nil || n != 1000 || !bytes.Equal(buf.Bytes(), data) {
		t.Errorf("GetFile of max bytes: %d, %v", n, err)
	}
	buf.Reset()
	n, err := f.GetFile(ctx, "exact", &buf, 999)
	wantFilesErr(t, "GetFile of max+1 bytes", err, sandbox.ErrLimit, "file_too_large")
	if n != 999 || !bytes.Equal(buf.Bytes(), data[:999]) {
		t.Errorf("GetFile over max: %d bytes returned, w holds %d, want the first 999", n, buf.Len())
	}
	if n, err := f.GetFile(ctx, "empty", io.Discard, 0); err != nil || n != 0 {
		t.Errorf("GetFile of an empty file with max 0: %d, %v", n, err)
	}

	_, err = f.PutFile(ctx, "neg", strings.NewReader(""), -1)
	wantFilesErr(t, "PutFile with max -1", err, sandbox.ErrInvalid, "limit_invalid")
	_, err = f.GetFile(ctx, "exact", io.Discard, -1)
	wantFilesErr(t, "GetFile with max -1", err, sandbox.ErrInvalid, "limit_invalid")
	_, _, err = f.List(ctx, "", -1)
	wantFilesErr(t, "List with max -1", err, sandbox.ErrInvalid, "limit_invalid")
}

// Symlinks the program plants are never followed: as a parent every
// method refuses, as the target Stat and List report them, GetFile says
// not_a_file, Remove removes the link.
func TestSessionFilesSymlinks(t *testing.T) {
	sb, f := filesSandbox(t, sandbox.Spec{})
	ctx := context.Background()
	filesSh(t, sb, "ln -s /etc /work/evil && ln -s /etc/passwd /work/pw && mkdir sub && ln -s sub in")

	for _, p := range []string{"evil/x", "evil/passwd", "pw", "in/x", "evil", "in"} {
		_, err := f.PutFile(ctx, p, strings.NewReader("owned"), 100)
		wantFilesErr(t, "PutFile "+p, err, sandbox.ErrInvalid, "path_invalid")
	}
	for _, p := range []string{"evil/passwd", "in/x"} {
		_, err := f.GetFile(ctx, p, io.Discard, sandbox.MiB)
		wantFilesErr(t, "GetFile "+p, err, sandbox.ErrInvalid, "path_invalid")
		_, err = f.Stat(ctx, p)
		wantFilesErr(t, "Stat "+p, err, sandbox.ErrInvalid, "path_invalid")
		err = f.Remove(ctx, p)
		wantFilesErr(t, "Remove "+p, err, sandbox.ErrInvalid, "path_invalid")
		err = f.Mkdir(ctx, p+"/deeper")
		wantFilesErr(t, "Mkdir "+p+"/deeper", err, sandbox.ErrInvalid, "path_invalid")
	}
	for _, p := range []string{"pw", "evil", "in"} {
		var buf bytes.Buffer
		_, err := f.GetFile(ctx, p, &buf, sandbox.MiB)
		wantFilesErr(t, "GetFile "+p, err, sandbox.ErrInvalid, "not_a_file")
		if buf.Len() > 0 {
			t.Errorf("GetFile %s wrote %q", p, buf.String())
		}
		fi, err := f.Stat(ctx, p)
		if err != nil || fi.Type != sandbox.FileSymlink || fi.Path != p {
			t.Errorf("Stat %s: %+v, %v; want a symlink", p, fi, err)
		}
	}
	for _, p := range []string{"evil", "in", "pw"} {
		err := f.Mkdir(ctx, p)
		wantFilesErr(t, "Mkdir "+p, err, sandbox.ErrInvalid, "path_invalid")
		_, _, err = f.List(ctx, p, 10)
		wantFilesErr(t, "List "+p, err, sandbox.ErrInvalid, "path_invalid")
	}
	entries, truncated, err := f.List(ctx, "", 10)
	if got, want := fileNames(entries), []string{"evil:symlink", "in:symlink", "pw:symlink", "sub:dir"}; err != nil || truncated || !slices.Equal(got, want) {
		t.Errorf("List: %v, %v, %v; want %v", got, truncated, err, want)
	}

	if err := f.Remove(ctx, "pw"); err != nil {
		t.Fatalf("Remove pw: %v", err)
	}
	if err := f.Remove(ctx, "evil"); err != nil {
		t.Fatalf("Remove evil: %v", err)
	}
	_, err = f.Stat(ctx, "pw")
	wantFilesErr(t, "Stat after Remove", err, sandbox.ErrNotFound, "file_not_found")
	if res := filesSh(t, sb, "test -s /etc/passwd && ls /etc/hostname && echo ok"); !strings.HasSuffix(res.Stdout, "ok\n") {
		t.Errorf("/etc after removing links to it: %s", describe(res))
	}
	if err := f.Remove(ctx, "in"); err != nil {
		t.Fatalf("Remove in: %v", err)
	}
	if fi, err := f.Stat(ctx, "sub"); err != nil || fi.Type != sandbox.FileDir {
		t.Errorf("Stat sub after removing a link to it: %+v, %v", fi, err)
	}
}

// A FIFO is not a file: GetFile says so at once instead of blocking, and
// PutFile does not replace it.
func TestSessionFilesFIFO(t *testing.T) {
	sb, f := filesSandbox(t, sandbox.Spec{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	filesSh(t, sb, "mkfifo fifo")
	start := time.Now()
	_, err := f.GetFile(ctx, "fifo", io.Discard, sandbox.MiB)
	wantFilesErr(t, "GetFile fifo", err, sandbox.ErrInvalid, "not_a_file")
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("GetFile of a FIFO took %v", d)
	}
	_, err = f.PutFile(ctx, "fifo", strings.NewReader("x"), 10)
	wantFilesErr(t, "PutFile fifo", err, sandbox.ErrInvalid, "not_a_file")
	if fi, err := f.Stat(ctx, "fifo"); err != nil || fi.Type != sandbox.FileOther {
		t.Errorf("Stat fifo: %+v, %v; want other", fi, err)
	}
	if err := f.Remove(ctx, "fifo"); err != nil {
		t.Errorf("Remove fifo: %v", err)
	}
}

// What is not there is ErrNotFound file_not_found; a path through a file
// is path_invalid; the work dir cannot be removed; bad paths are refused.
func TestSessionFilesErrors(t *testing.T) {
	_, f := filesSandbox(t, sandbox.Spec{})
	ctx := context.Background()
	_, err := f.GetFile(ctx, "nope", io.Discard, 10)
	wantFilesErr(t, "GetFile nope", err, sandbox.ErrNotFound, "file_not_found")
	_, err = f.Stat(ctx, "nope/deeper")
	wantFilesErr(t, "Stat nope/deeper", err, sandbox.ErrNotFound, "file_not_found")
	_, _, err = f.List(ctx, "nope", 10)
	wantFilesErr(t, "List nope", err, sandbox.ErrNotFound, "file_not_found")
	err = f.Remove(ctx, "nope")
	wantFilesErr(t, "Remove nope", err, sandbox.ErrNotFound, "file_not_found")

	filesPut(t, f, "file", "x")
	_, err = f.PutFile(ctx, "file/x", strings.NewReader("y"), 10)
	wantFilesErr(t, "PutFile file/x", err, sandbox.ErrInvalid, "path_invalid")
	_, err = f.Stat(ctx, "file/x")
	wantFilesErr(t, "Stat file/x", err, sandbox.ErrInvalid, "path_invalid")
	err = f.Mkdir(ctx, "file")
	wantFilesErr(t, "Mkdir file", err, sandbox.ErrInvalid, "not_a_dir")
	_, _, err = f.List(ctx, "file", 10)
	wantFilesErr(t, "List file", err, sandbox.ErrInvalid, "not_a_dir")
	if err := f.Mkdir(ctx, "dir"); err != nil {
		t.Fatal(err)
	}
	_, err = f.GetFile(ctx, "dir", io.Discard, 10)
	wantFilesErr(t, "GetFile dir", err, sandbox.ErrInvalid, "not_a_file")
	_, err = f.PutFile(ctx, "dir", strings.NewReader("y"), 10)
	wantFilesErr(t, "PutFile dir", err, sandbox.ErrInvalid, "not_a_file")

	err = f.Remove(ctx, "")
	wantFilesErr(t, `Remove ""`, err, sandbox.ErrInvalid, "path_invalid")
	for _, p := range []string{"", "/etc/passwd", "../x", "a/../b", "a//b", "./a"} {
		_, err = f.GetFile(ctx, p, io.Discard, 10)
		wantFilesErr(t, "GetFile "+p, err, sandbox.ErrInvalid, "path_invalid")
		_, err = f.PutFile(ctx, p, strings.NewReader("y"), 10)
		wantFilesErr(t, "PutFile "+p, err, sandbox.ErrInvalid, "path_invalid")
		err = f.Mkdir(ctx, p)
		wantFilesErr(t, "Mkdir "+p, err, sandbox.ErrInvalid, "path_invalid")
	}
	if fi, err := f.Stat(ctx, ""); err != nil || fi.Type != sandbox.FileDir || fi.Path != "" {
		t.Errorf(`Stat "": %+v, %v`, fi, err)
	}
}

// Mkdir makes nested directories (again: no error); List sorts by name,
// shows dotfiles and odd names, and truncates at max.
func TestSessionFilesMkdirList(t *testing.T) {
	sb, f := filesSandbox(t, sandbox.Spec{})
	ctx := context.Background()
	for range 2 {
		if err := f.Mkdir(ctx, "a/b/c"); err != nil {
			t.Fatalf("Mkdir a/b/c: %v", err)
		}
	}
	filesPut(t, f, "a/b/c/f.txt", "f")
	filesPut(t, f, "a/b/.hidden", "h")
	filesPut(t, f, "a/b/-n", "dash")
	filesPut(t, f, "a/b/we|ird\nname", "odd")
	if err := f.Mkdir(ctx, "a/b/d"); err != nil {
		t.Fatal(err)
	}
	entries, truncated, err := f.List(ctx, "a/b", 100)
	want := []string{"a/b/-n:file", "a/b/.hidden:file", "a/b/c:dir", "a/b/d:dir", "a/b/we|ird\nname:file"}
	if got := fileNames(entries); err != nil || truncated || !slices.Equal(got, want) {
		t.Errorf("List a/b: %q, %v, %v; want %q", got, truncated, err, want)
	}
	if got := filesGet(t, f, "a/b/we|ird\nname"); got != "odd" {
		t.Errorf("GetFile of an odd name = %q", got)
	}
	entries, truncated, err = f.List(ctx, "a/b", 2)
	if got := fileNames(entries); err != nil || !truncated || !slices.Equal(got, want[:2]) {
		t.Errorf("List a/b max 2: %q, %v, %v", got, truncated, err)
	}
	entries, truncated, err = f.List(ctx, "a/b", 5)
	if err != nil || truncated || len(entries) != 5 {
		t.Errorf("List a/b max 5: %d entries, %v, %v", len(entries), truncated, err)
	}
	entries, truncated, err = f.List(ctx, "a/b/d", 5)
	if err != nil || truncated || entries == nil || len(entries) != 0 {
		t.Errorf("List of an empty dir: %v, %v, %v", entries, truncated, err)
	}
	// Many entries: the first max by name, however they come.
	filesSh(t, sb, "mkdir many && cd many && python3 -c 'import os\nfor i in range(3000): open(\"f%05d\" % (2999-i), \"w\").close()'")
	entries, truncated, err = f.List(ctx, "many", 7)
	if err != nil || !truncated || len(entries) != 7 || entries[0].Path != "many/f00000" || entries[6].Path != "many/f00006" {
		t.Errorf("List many max 7: %v, %v, %v", fileNames(entries), truncated, err)
	}
	// Remove takes a whole tree.
	if err := f.Remove(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	entries, _, err = f.List(ctx, "", 100)
	if got := fileNames(entries); err != nil || !slices.Equal(got, []string{"many:dir"}) {
		t.Errorf("List after Remove a: %q, %v", got, err)
	}
}

// A full work dir is ErrLimit work_size_exceeded; a file over the file
// size limit is file_too_large; neither leaves a file.
func TestSessionFilesWorkFull(t *testing.T) {
	_, f := filesSandbox(t, sandbox.Spec{Limits: sandbox.Limits{WorkSize: 2 * sandbox.MiB, FileSize: 8 * sandbox.MiB}})
	ctx := context.Background()
	_, err := f.PutFile(ctx, "big", io.LimitReader(rand.NewChaCha8([32]byte{3}), 3*sandbox.MiB), 4*sandbox.MiB)
	wantFilesErr(t, "PutFile over work_size", err, sandbox.ErrLimit, "work_size_exceeded")
	entries, _, err := f.List(ctx, "", 10)
	if err != nil || len(entries) != 0 {
		t.Errorf("List after a PutFile that did not fit: %v, %v", fileNames(entries), err)
	}

	_, f = filesSandbox(t, sandbox.Spec{Limits: sandbox.Limits{FileSize: 1 * sandbox.MiB}})
	_, err = f.PutFile(ctx, "big", io.LimitReader(rand.NewChaCha8([32]byte{3}), 2*sandbox.MiB), 4*sandbox.MiB)
	wantFilesErr(t, "PutFile over file_size", err, sandbox.ErrLimit, "file_too_large")
	entries, _, err = f.List(ctx, "", 10)
	if err != nil || len(entries) != 0 {
		t.Errorf("List after a PutFile over file_size: %v, %v", fileNames(entries), err)
	}
}

// stallingReader gives some bytes, then blocks until release is closed.
type stallingReader struct {
	n       int
	release chan struct{}
}

func (r *stallingReader) Read(p []byte) (int, error) {
	if r.n > 0 {
		k := min(len(p), r.n)
		clear(p[:k])
		r.n -= k
		return k, nil
	}
	<-r.release
	return 0, io.ErrUnexpectedEOF
}

// A PutFile cut off (cancel, a read error) leaves nothing: not the file,
// not its temporary file. Close ends a PutFile that waits for its reader.
func TestSessionFilesCutOff(t *testing.T) {
	sb, f := filesSandbox(t, sandbox.Spec{})
	filesPut(t, f, "keep", "old")
	r := &stallingReader{n: 1 << 20, release: make(chan struct{})}
	t.Cleanup(func() { close(r.release) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := f.PutFile(ctx, "keep", r, 10*sandbox.MiB)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("PutFile cut off by its deadline: %v", err)
	}
	_, err = f.PutFile(context.Background(), "new", io.MultiReader(strings.NewReader("part"), failingReader{}), 10*sandbox.MiB)
	wantFilesErr(t, "PutFile whose reader fails", err, sandbox.ErrInvalid, "file_invalid")
	entries, _, err := f.List(context.Background(), "", 10)
	if got := fileNames(entries); err != nil || !slices.Equal(got, []string{"keep:file"}) {
		t.Errorf("List after cut-off PutFiles: %q, %v", got, err)
	}
	if got := filesGet(t, f, "keep"); got != "old" {
		t.Errorf("keep = %q after a cut-off PutFile over it", got)
	}

	// Close while a PutFile waits for its reader: both end soon.
	r2 := &stallingReader{n: 1 << 10, release: make(chan struct{})}
	t.Cleanup(func() { close(r2.release) })
	errc := make(chan error, 1)
	go func() {
		_, err := f.PutFile(context.Background(), "stuck", r2, 10*sandbox.MiB)
		errc <- err
	}()
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	if err := sb.Close(context.Background()); err != nil {
		t.Errorf("Close: %v", err)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("Close took %v with a PutFile waiting for its reader", d)
	}
	select {
	case err := <-errc:
		wantFilesErr(t, "PutFile cut off by Close", err, sandbox.ErrNotFound, "sandbox_closed")
	case <-time.After(15 * time.Second):
		t.Error("PutFile did not end after Close")
	}
	_, err = f.Stat(context.Background(), "")
	wantFilesErr(t, "Stat after Close", err, sandbox.ErrNotFound, "sandbox_closed")
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("the upload broke") }

// The methods run while an Exec runs, without disturbing it, and
// concurrently with each other.
func TestSessionFilesDuringExec(t *testing.T) {
	sb, f := filesSandbox(t, sandbox.Spec{})
	ctx := context.Background()
	started := make(chan *sandbox.Result, 1)
	go func() {
		// It waits (30 s at most) for the test's go-ahead, put after the file.
		res, err := sb.Exec(ctx, &sandbox.Process{Args: []string{"/bin/sh", "-c", "echo running > mark; i=0; while [ ! -e go ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; cat put-during.txt"}})
		if err != nil {
			t.Errorf("Exec: %v", err)
		}
		started <- res
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := f.Stat(ctx, "mark"); err == nil {
			break
		} else if time.Now().After(deadline) || !errors.Is(err, sandbox.ErrNotFound) && !errors.Is(err, sandbox.ErrBusy) {
			t.Fatalf("waiting for the Exec's mark: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			p := "c/" + string(rune('a'+i))
			if _, err := f.PutFile(ctx, p, strings.NewReader(p), 100); err != nil {
				t.Errorf("PutFile %s: %v", p, err)
				return
			}
			var buf bytes.Buffer
			if _, err := f.GetFile(ctx, p, &buf, 100); err != nil || buf.String() != p {
				t.Errorf("GetFile %s: %q, %v", p, buf.String(), err)
			}
		})
	}
	wg.Wait()
	filesPut(t, f, "put-during.txt", "put while it ran\n")
	filesPut(t, f, "go", "")
	if got := filesGet(t, f, "mark"); got != "running\n" {
		t.Errorf("mark = %q", got)
	}
	entries, _, err := f.List(ctx, "c", 10)
	if err != nil || len(entries) != 4 {
		t.Errorf("List c: %q, %v", fileNames(entries), err)
	}
	res := <-started
	if res == nil || !res.Succeeded() || res.Stdout != "put while it ran\n" {
		t.Errorf("the Exec the Files calls ran beside: %s", describe(res))
	}
}

// Files PutFile wrote are inputs, not artifacts; what the program wrote
// is an artifact.
func TestSessionFilesArtifacts(t *testing.T) {
	sb, f := filesSandbox(t, sandbox.Spec{})
	ctx := context.Background()
	filesPut(t, f, "input.txt", "in")
	if err := f.Mkdir(ctx, "d"); err != nil {
		t.Fatal(err)
	}
	art, err := sb.Artifacts(ctx)
	if err != nil || len(art.Files) != 0 {
		t.Errorf("Artifacts after PutFile: %+v, %v", art, err)
	}
	filesSh(t, sb, "cat input.txt > d/output.txt")
	art, err = sb.Artifacts(ctx)
	if err != nil || len(art.Files) != 1 || art.Files[0].Path != "d/output.txt" || string(art.Files[0].Data) != "in" {
		t.Errorf("Artifacts after the program wrote d/output.txt: %+v, %v", art, err)
	}
}

// A program that swaps a directory for a symlink out of the work dir, over
// and over, while files are put and got through it: nothing is ever
// written or read out there.
func TestSessionFilesSymlinkRace(t *testing.T) {
	sb, f := filesSandbox(t, sandbox.Spec{})
	ctx := context.Background()
	filesSh(t, sb, "echo SECRET > /tmp/secret")
	done := make(chan *sandbox.Result, 1)
	go func() {
		res, err := sb.Exec(ctx, &sandbox.Process{Args: []string{"/bin/sh", "-c",
			`end=$(($(date +%s) + 3)); while [ $(date +%s) -lt $end ]; do mkdir d; echo inside > d/secret; rm -rf d; ln -s /tmp d; rm d; done`}})
		if err != nil {
			t.Errorf("Exec: %v", err)
		}
		done <- res
	}()
	counts := map[string]int{}
	deadline := time.Now().Add(2500 * time.Millisecond)
	for time.Now().Before(deadline) {
		var buf bytes.Buffer
		_, err := f.GetFile(ctx, "d/secret", &buf, 100)
		if strings.Contains(buf.String(), "SECRET") {
			t.Fatalf("GetFile d/secret read /tmp/secret through a symlink: %q", buf.String())
		}
		counts["get "+sandbox.CodeOf(err)]++
		_, err = f.PutFile(ctx, "d/planted", strings.NewReader("planted"), 100)
		counts["put "+sandbox.CodeOf(err)]++
		if sandbox.CodeOf(err) == "workdir_failed" {
			t.Logf("put: %v", err)
		}
		err = f.Mkdir(ctx, "d/sub")
		counts["mkdir "+sandbox.CodeOf(err)]++
		if sandbox.CodeOf(err) == "workdir_failed" {
			t.Logf("mkdir: %v", err)
		}
	}
	t.Logf("outcomes: %v", counts)
	for k := range counts {
		if strings.HasSuffix(k, " internal") || strings.HasSuffix(k, "workdir_failed") {
			t.Errorf("an internal error in the race: %v", counts)
		}
	}
	<-done
	res := filesSh(t, sb, "ls -A /tmp")
	if strings.Contains(res.Stdout, "planted") || strings.Contains(res.Stdout, "sub") || strings.Contains(res.Stdout, ".execbox") {
		t.Errorf("a Files call wrote through the symlink into /tmp: %q", res.Stdout)
	}
}
