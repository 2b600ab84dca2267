package tool

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"

	"github.com/execbox/execbox/sandbox"
)

// The runtime: entry.py, its helper module and the built-in tools.
//
//go:embed runtime/*.py runtime/tools/*.py
var runtimeFS embed.FS

// runtimeFiles are the runtime's files (path relative to runtime/ →
// content) and hash names their version: hex SHA-256 of paths and
// contents, cut to 16 bytes.
var runtimeFiles, runtimeHash = loadRuntime()

func loadRuntime() (map[string][]byte, string) {
	files := map[string][]byte{}
	err := fs.WalkDir(runtimeFS, "runtime", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := runtimeFS.ReadFile(p)
		files[p[len("runtime/"):]] = b
		return err
	})
	if err != nil {
		panic("tool: reading the embedded runtime: " + err.Error())
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		h.Write([]byte(n))
		h.Write([]byte{0})
		h.Write(files[n])
		h.Write([]byte{0})
	}
	return files, hex.EncodeToString(h.Sum(nil)[:16])
}

// materialise writes the runtime into root/<hash> unless it is already
// there, and returns that directory (symlinks of root's parents
// resolved). root must be ours and not writable by others; it is created
// 0755 when missing. A fresh copy is built in a temp dir and renamed into
// place, so concurrent Sets (in this process or others) and other
// versions never see a partial one; an existing copy is checked byte for
// byte.
func materialise(root string) (string, error) {
	if err := ownDir(root, true); err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", sandbox.Errorf(sandbox.ErrInternal, CodeRuntimeFailed, "resolving the tool runtime dir %s: %w", root, err)
	}
	dir := filepath.Join(real, runtimeHash)
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := build(real, dir); err != nil {
			return "", err
		}
	}
	if err := verify(dir); err != nil {
		return "", err
	}
	return dir, nil
}

// ownDir checks that dir is a directory (not a symlink) of this user that
// nobody else can write to, creating it 0755 when create and it is missing.
func ownDir(dir string, create bool) error {
	st, err := os.Lstat(dir)
	if create && errors.Is(err, fs.ErrNotExist) {
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return sandbox.Errorf(sandbox.ErrInternal, CodeRuntimeFailed, "creating the tool runtime dir: %w", err)
		}
		st, err = os.Lstat(dir)
	}
	if err != nil {
		return sandbox.Errorf(sandbox.ErrInternal, CodeRuntimeFailed, "checking the tool runtime dir: %w", err)
	}
	switch {
	case st.Mode()&fs.ModeSymlink != 0:
		return sandbox.Errorf(sandbox.ErrInvalid, CodeRuntimeUnsafe, "tool runtime dir %s is a symlink; refusing it", dir)
	case !st.IsDir():
		return sandbox.Errorf(sandbox.ErrInvalid, CodeRuntimeUnsafe, "tool runtime dir %s is not a directory", dir)
	case !ownedByMe(st):
		return sandbox.Errorf(sandbox.ErrInvalid, CodeRuntimeUnsafe, "tool runtime dir %s belongs to another user; refusing it", dir)
	case st.Mode().Perm()&0o022 != 0:
		return sandbox.Errorf(sandbox.ErrInvalid, CodeRuntimeUnsafe, "tool runtime dir %s is writable by others (mode %v); refusing it", dir, st.Mode().Perm())
	}
	return nil
}

// build writes the runtime into a temp dir of root and renames it to dir;
// losing the race to another writer is no error (verify checks its copy).
func build(root, dir string) (err error) {
	tmp, err := os.MkdirTemp(root, ".tmp-")
	if err != nil {
		return sandbox.Errorf(sandbox.ErrInternal, CodeRuntimeFailed, "writing the tool runtime: %w", err)
	}
	defer func() {
		if tmp != "" {
			os.RemoveAll(tmp)
		}
	}()
	fail := func(err error) error {
		return sandbox.Errorf(sandbox.ErrInternal, CodeRuntimeFailed, "writing the tool runtime: %w", err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fail(err)
	}
	for name, b := range runtimeFiles {
		p := filepath.Join(tmp, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fail(err)
		}
		if err := writeFile(p, b); err != nil {
			return fail(err)
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Lstat(dir); serr == nil {
			return nil // another Set got there first
		}
		return fail(err)
	}
	tmp = ""
	return nil
}

// writeFile writes a new file 0644 (whatever the umask) and syncs it.
func writeFile(p string, b []byte) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Chmod(0o644)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// verify checks that dir holds exactly the runtime: our directories, not
// writable by others, with the embedded files' contents, and nothing else.
func verify(dir string) error {
	seen := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			return ownDir(p, false)
		}
		want, ok := runtimeFiles[rel]
		if !ok || !d.Type().IsRegular() {
			return sandbox.Errorf(sandbox.ErrInternal, CodeRuntimeFailed, "tool runtime %s holds an unexpected entry %s", dir, rel)
		}
		st, err := d.Info()
		if err != nil {
			return err
		}
		if !ownedByMe(st) || st.Mode().Perm()&0o022 != 0 {
			return sandbox.Errorf(sandbox.ErrInvalid, CodeRuntimeUnsafe, "tool runtime file %s is not ours or writable by others", p)
		}
		got, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if !bytes.Equal(got, want) {
			return sandbox.Errorf(sandbox.ErrInternal, CodeRuntimeFailed, "tool runtime file %s was changed on disk", path.Join(filepath.Base(dir), rel))
		}
		seen++
		return nil
	})
	if err == nil && seen != len(runtimeFiles) {
		err = sandbox.Errorf(sandbox.ErrInternal, CodeRuntimeFailed, "tool runtime %s lacks files (%d of %d)", dir, seen, len(runtimeFiles))
	}
	var se *sandbox.Error
	if err != nil && !errors.As(err, &se) {
		err = sandbox.Errorf(sandbox.ErrInternal, CodeRuntimeFailed, "checking the tool runtime: %w", err)
	}
	return err
}
