package workdir

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/execbox/execbox/sandbox"
)

const (
	resolveFlags = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS
	// maxEntries bounds how many directory entries Collect visits, so a
	// program that makes a million empty files cannot stall the daemon.
	maxEntries = 100_000
	maxDepth   = 64
)

// Dir is a sandbox's work dir: its private directory on the host, /work
// inside.
type Dir struct {
	Path     string
	uid, gid int
	snap     map[string]fileKey
}

// fileKey identifies a file's state; ctime cannot be set back by the program.
type fileKey struct {
	ino, size   int64
	mtime, ctim unix.Timespec
}

// New creates a fresh work dir under root, owned by uid:gid with mode
// 0700. root is created (0711, as MakeRoot: no symlink followed, ours
// alone) if missing.
func New(root string, uid, gid int) (*Dir, error) {
	if err := MakeRoot(root); err != nil {
		return nil, fmt.Errorf("creating work root: %w", err)
	}
	dir, err := os.MkdirTemp(root, "execbox-")
	if err != nil {
		return nil, fmt.Errorf("creating work dir: %w", err)
	}
	w := &Dir{Path: dir, uid: uid, gid: gid, snap: map[string]fileKey{}}
	if err := os.Chown(dir, uid, gid); err != nil {
		os.Remove(dir)
		return nil, fmt.Errorf("chowning work dir: %w", err)
	}
	return w, nil
}

// Write writes files (relative path → content) into the work dir. Every path
// is checked before anything is written: a path that is invalid, or that
// would pass through a symlink or a non-directory, fails with ErrInvalid
// naming it and nothing is written. Paths are walked one component at a
// time from directory fds, so no symlink is ever followed, not even one
// planted between the check and the write. Afterwards the current state is
// the baseline for Collect.
func (w *Dir) Write(files map[string][]byte) error {
	paths := make([]string, 0, len(files))
	for p := range files {
		if err := sandbox.CheckPath(p); err != nil {
			return err
		}
		paths = append(paths, p)
	}
	slices.Sort(paths)
	root, err := w.open()
	if err != nil {
		return err
	}
	defer unix.Close(root)
	for _, p := range paths {
		if err := check(root, p); err != nil {
			return err
		}
	}
	for _, p := range paths {
		if err := w.writeOne(root, p, files[p]); err != nil {
			return err
		}
	}
	return w.Snapshot()
}

func invalidPath(p string, err error) error {
	if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) {
		return sandbox.Errorf(sandbox.ErrLimit, "work_size_exceeded", "writing %q: the work dir is full (work_size): %w", p, err)
	}
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.EISDIR) {
		return sandbox.Errorf(sandbox.ErrInvalid, "path_invalid", "path %q: passes through a symlink or a non-directory, or names a directory", p)
	}
	return fmt.Errorf("writing %q: %w", p, err)
}

// check verifies, without creating anything, that p can be written: every
// existing directory on the way is a real directory and the file, if it
// exists, is not a symlink or a directory.
func check(root int, p string) error {
	parts := strings.Split(p, "/")
	dir, err := unix.Dup(root)
	if err != nil {
		return invalidPath(p, err)
	}
	defer func() { unix.Close(dir) }()
	for _, c := range parts[:len(parts)-1] {
		next, err := openat2(dir, c, unix.O_PATH|unix.O_DIRECTORY, 0)
		if errors.Is(err, unix.ENOENT) {
			return nil // the rest will be created
		}
		if err != nil {
			return invalidPath(p, err)
		}
		unix.Close(dir)
		dir = next
	}
	var st unix.Stat_t
	err = unix.Fstatat(dir, parts[len(parts)-1], &st, unix.AT_SYMLINK_NOFOLLOW)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil
	case err != nil:
		return invalidPath(p, err)
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return invalidPath(p, unix.ELOOP)
	case st.Mode&unix.S_IFMT == unix.S_IFDIR:
		return invalidPath(p, unix.EISDIR)
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		// A FIFO would block the open forever; a device is never ours.
		return sandbox.Errorf(sandbox.ErrInvalid, "path_invalid", "path %q: exists and is not a regular file", p)
	}
	return nil
}

func (w *Dir) writeOne(root int, p string, data []byte) error {
	parts := strings.Split(p, "/")
	dir, err := w.mkdirs(root, p, parts[:len(parts)-1])
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	// O_NONBLOCK: a FIFO swapped in since the check fails (ENXIO) instead
	// of waiting for a reader; fstat then refuses anything not regular.
	fd, err := openat2(dir, parts[len(parts)-1], unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0o644)
	if err != nil {
		return invalidPath(p, err)
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return sandbox.Errorf(sandbox.ErrInvalid, "path_invalid", "path %q: exists and is not a regular file", p)
	}
	if err := f.Chown(w.uid, w.gid); err != nil {
		return invalidPath(p, err)
	}
	if _, err := f.Write(data); err != nil {
		return invalidPath(p, err)
	}
	return nil
}

// CheckDir checks that rel ("" is the work dir itself) is a directory in
// the work dir, found without following a symlink: ErrInvalid
// "dir_not_found" when it is not.
func (w *Dir) CheckDir(rel string) error {
	if rel == "" {
		return nil
	}
	root, err := unix.Open(w.Path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return sandbox.Errorf(sandbox.ErrInternal, "workdir_failed", "opening the work dir: %w", err)
	}
	defer unix.Close(root)
	fd, err := openat2(root, rel, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return sandbox.Errorf(sandbox.ErrInvalid, "dir_not_found", "working directory %s is not a directory in the work dir: %w", rel, err)
	}
	unix.Close(fd)
	return nil
}

// Snapshot records the current files as the baseline: Collect returns only
// what differs from it.
func (w *Dir) Snapshot() error {
	snap := map[string]fileKey{}
	err := w.walk(func(rel string, st *unix.Stat_t, _ int) {
		if st.Mode&unix.S_IFMT == unix.S_IFREG {
			snap[rel] = keyOf(st)
		}
	}, nil)
	if err != nil {
		return err
	}
	w.snap = snap
	return nil
}

// Collect returns the regular files created or changed since the baseline,
// in path order, within maxFiles and maxBytes; everything else that is new
// (symlinks, devices, fifos, files over a bound) is listed in Skipped.
func (w *Dir) Collect(maxFiles int, maxBytes int64) (sandbox.Artifacts, error) {
	var out sandbox.Artifacts
	var total int64
	var readErr error
	skip := func(rel, why string) { out.Skipped = append(out.Skipped, sandbox.Skipped{Path: rel, Reason: why}) }
	err := w.walk(func(rel string, st *unix.Stat_t, dirfd int) {
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
		case unix.S_IFLNK:
			skip(rel, "symlink")
			return
		default:
			skip(rel, "not a regular file")
			return
		}
		if k, ok := w.snap[rel]; ok && k == keyOf(st) {
			return
		}
		switch {
		case len(out.Files) >= maxFiles:
			skip(rel, "file count limit")
			return
		case total+st.Size > maxBytes:
			skip(rel, "byte limit")
			return
		}
		data, err := readAt(dirfd, path.Base(rel), st.Size)
		if err != nil {
			if readErr == nil {
				readErr = fmt.Errorf("reading artifact %q: %w", rel, err)
			}
			return
		}
		total += int64(len(data))
		out.Files = append(out.Files, sandbox.Artifact{Path: rel, Size: int64(len(data)), Mode: st.Mode & 0o7777, Data: data})
	}, skip)
	if err == nil {
		err = readErr
	}
	return out, err
}

// readAt reads a regular file that is at most size bytes, refusing a symlink
// swapped in since the stat and a file that grew past size. It allocates
// the size once (io.ReadAll would regrow its buffer to twice a large file,
// copying it as it goes).
func readAt(dirfd int, name string, size int64) ([]byte, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	data := make([]byte, size)
	n, err := io.ReadFull(f, data)
	if err == io.ErrUnexpectedEOF || err == io.EOF {
		return data[:n], nil // it shrank: what is there
	}
	if err != nil {
		return nil, err
	}
	var more [1]byte
	if m, _ := f.Read(more[:]); m > 0 {
		return nil, errors.New("file grew while being read")
	}
	return data, nil
}

// walk visits every entry below the work dir in sorted order without
// following symlinks. visit gets the entry's lstat and its parent dir fd.
func (w *Dir) walk(visit func(rel string, st *unix.Stat_t, dirfd int), skip func(rel, why string)) error {
	root, err := w.open()
	if err != nil {
		return err
	}
	seen := 0
	var rec func(dirfd int, rel string, depth int) error
	rec = func(dirfd int, rel string, depth int) error {
		f := os.NewFile(uintptr(dirfd), rel)
		defer f.Close()
		names, err := f.Readdirnames(-1)
		if err != nil {
			return fmt.Errorf("listing %q: %w", rel, err)
		}
		slices.Sort(names)
		for _, name := range names {
			child := path.Join(rel, name)
			if seen++; seen > maxEntries {
				if skip != nil {
					skip(child, "entry count limit")
				}
				return nil
			}
			var st unix.Stat_t
			if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				continue // vanished
			}
			if st.Mode&unix.S_IFMT != unix.S_IFDIR {
				visit(child, &st, dirfd)
				continue
			}
			if depth >= maxDepth {
				if skip != nil {
					skip(child, "directory depth limit")
				}
				continue
			}
			sub, err := openat2(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
			if err != nil {
				if skip != nil {
					skip(child, "unreadable directory")
				}
				continue
			}
			if err := rec(sub, child, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return rec(root, "", 0)
}

// Remove deletes the work dir and everything in it, also entries the program
// made unreadable to us by chmod.
func (w *Dir) Remove() error {
	err := os.RemoveAll(w.Path)
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	// A program running as our own uid may have chmod'ed dirs to 0; make
	// them ours again (never following symlinks) and retry.
	_ = fsWalkChmod(w.Path)
	if err := os.RemoveAll(w.Path); err != nil {
		return fmt.Errorf("removing work dir: %w", err)
	}
	return nil
}

func fsWalkChmod(dir string) error {
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			_ = fsWalkChmod(path.Join(dir, e.Name()))
		}
	}
	return nil
}

func (w *Dir) open() (int, error) {
	fd, err := unix.Open(w.Path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("opening work dir: %w", err)
	}
	return fd, nil
}

func openat2(dirfd int, p string, flags uint64, mode uint64) (int, error) {
	return unix.Openat2(dirfd, p, &unix.OpenHow{Flags: flags | unix.O_CLOEXEC, Mode: mode, Resolve: resolveFlags})
}

func keyOf(st *unix.Stat_t) fileKey {
	return fileKey{ino: int64(st.Ino), size: st.Size, mtime: st.Mtim, ctim: st.Ctim}
}
