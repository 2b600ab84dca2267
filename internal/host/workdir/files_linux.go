package workdir

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/execbox/execbox/sandbox"
)

// The methods below are sandbox.Files on the host side: a session's files,
// one at a time, while the sandboxed program may be running. That program
// can swap any directory for a symlink at any moment, so no path is
// checked first and used later: every component is opened with openat2
// (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS) from the
// fd of the directory before it, and only the last one is named to an *at
// call (never followed). A swap then makes the call fail (path_invalid),
// never reach outside the work dir. Paths are walked one component at a
// time because a valid path (CheckPath: up to 4096 bytes) is too long for
// one openat2 (PATH_MAX counts the NUL).
//
// They keep no state (not the Collect baseline), so they are safe for
// concurrent use with each other and with Write and Collect.

// Put creates or replaces the regular file p with what r holds, creating
// missing parent directories (0755, owned by the sandbox's uid:gid, as the
// file is). More than max bytes is ErrLimit "file_too_large". Once it has
// begun writing, a Put that fails leaves no file at p (not even the one it
// was replacing); directories it made stay. It returns the bytes written.
func (w *Dir) Put(p string, r io.Reader, max int64) (int64, error) {
	if err := checkMax(max); err != nil {
		return 0, err
	}
	if err := sandbox.CheckPath(p); err != nil {
		return 0, err
	}
	root, err := w.open()
	if err != nil {
		return 0, err
	}
	defer unix.Close(root)
	// Refuse a symlink, directory or special file at p before opening it
	// (opening a device could do something); the fstat below catches one
	// swapped in since.
	if err := check(root, p); err != nil {
		return 0, err
	}
	parts := strings.Split(p, "/")
	dir, err := w.mkdirs(root, p, parts[:len(parts)-1])
	if err != nil {
		return 0, err
	}
	defer unix.Close(dir)
	name := parts[len(parts)-1]
	// O_NONBLOCK: a FIFO swapped in fails (ENXIO) or opens at once instead
	// of waiting for a reader.
	fd, err := openat2(dir, name, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0o644)
	if errors.Is(err, unix.ENXIO) {
		return 0, notRegular(p)
	}
	if err != nil {
		return 0, pathErr("writing", p, err)
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return 0, notRegular(p)
	}
	n, err := w.fill(f, p, r, max)
	if err != nil {
		// What was written is incomplete or too much: none of it stays.
		// The name is unlinked without following it; if the program put
		// something else there meanwhile, that is in its own work dir.
		unix.Unlinkat(dir, name, 0)
		return 0, err
	}
	return n, nil
}

// fill makes f, just opened for p, the sandbox's and copies at most max
// bytes of r into it.
func (w *Dir) fill(f *os.File, p string, r io.Reader, max int64) (int64, error) {
	if err := f.Chown(w.uid, w.gid); err != nil {
		return 0, pathErr("writing", p, err)
	}
	limit := int64(math.MaxInt64)
	if max < math.MaxInt64 {
		limit = max + 1 // one byte more tells that r holds too much
	}
	n, err := io.Copy(f, io.LimitReader(r, limit))
	if err == nil {
		err = f.Close() // a delayed write error (not on tmpfs, but rootless)
	}
	switch {
	case err != nil:
		return 0, pathErr("writing", p, err)
	case n > max:
		return 0, sandbox.Errorf(sandbox.ErrLimit, "file_too_large", "writing %q: more than %d bytes", p, max)
	}
	return n, nil
}

// Get copies the regular file p to out: a directory, symlink or special
// file is ErrInvalid "not_a_file". After max bytes with more to come it
// stops with ErrLimit "file_too_large" (out then holds max bytes).
func (w *Dir) Get(p string, out io.Writer, max int64) (int64, error) {
	if err := checkMax(max); err != nil {
		return 0, err
	}
	if err := sandbox.CheckPath(p); err != nil {
		return 0, err
	}
	root, err := w.open()
	if err != nil {
		return 0, err
	}
	defer unix.Close(root)
	dir, name, err := openParent(root, p)
	if err != nil {
		return 0, err
	}
	defer unix.Close(dir)
	// Look before opening: a device or socket is never opened at all.
	var st unix.Stat_t
	if err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return 0, pathErr("reading", p, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return 0, notAFile(p)
	}
	// Since the look, the program may have put a symlink there (ELOOP), a
	// socket (ENXIO) or a FIFO: O_NONBLOCK opens that at once instead of
	// waiting for a writer, and the fstat refuses it.
	fd, err := openat2(dir, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENXIO) {
		return 0, notAFile(p)
	}
	if err != nil {
		return 0, pathErr("reading", p, err)
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return 0, notAFile(p)
	}
	n, err := io.CopyN(out, f, max)
	if errors.Is(err, io.EOF) {
		return n, nil // all of it, within max
	}
	if err != nil {
		return n, fmt.Errorf("copying %q: %w", p, err) // the file's error or out's
	}
	var more [1]byte
	m, err := f.Read(more[:])
	switch {
	case m > 0:
		return n, sandbox.Errorf(sandbox.ErrLimit, "file_too_large", "reading %q: more than %d bytes", p, max)
	case err != nil && !errors.Is(err, io.EOF):
		return n, fmt.Errorf("reading %q: %w", p, err)
	}
	return n, nil
}

// Stat describes the entry p ("" is the work dir) without following a
// symlink: one at p is described as FileSymlink.
func (w *Dir) Stat(p string) (sandbox.FileInfo, error) {
	root, err := w.open()
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	defer unix.Close(root)
	var st unix.Stat_t
	if p == "" {
		if err := unix.Fstat(root, &st); err != nil {
			return sandbox.FileInfo{}, fmt.Errorf("stat of the work dir: %w", err)
		}
		return fileInfo("", &st), nil
	}
	if err := sandbox.CheckPath(p); err != nil {
		return sandbox.FileInfo{}, err
	}
	dir, name, err := openParent(root, p)
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	defer unix.Close(dir)
	if err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return sandbox.FileInfo{}, pathErr("stat of", p, err)
	}
	return fileInfo(p, &st), nil
}

// List describes the entries of the directory dir ("" is the work dir),
// sorted by name, at most max of them; truncated says there were more.
// However many entries dir has, it holds only max+1024 names at a time.
// A file, or a symlink even to a directory, is ErrInvalid "not_a_dir".
func (w *Dir) List(dir string, max int) (entries []sandbox.FileInfo, truncated bool, err error) {
	if max < 0 {
		return nil, false, sandbox.Errorf(sandbox.ErrInvalid, "limit_invalid", "a negative maximum (%d)", max)
	}
	root, err := w.open()
	if err != nil {
		return nil, false, err
	}
	defer unix.Close(root)
	var fd int
	if dir == "" {
		fd, err = unix.Dup(root)
	} else if err = sandbox.CheckPath(dir); err == nil {
		fd, err = openDir(root, dir)
	}
	if err != nil {
		return nil, false, err
	}
	f := os.NewFile(uintptr(fd), dir)
	defer f.Close()
	var names []string
	for {
		batch, err := f.Readdirnames(1024)
		names = append(names, batch...)
		if len(names) > max {
			slices.Sort(names)
			names, truncated = names[:max], true
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, false, fmt.Errorf("listing %q: %w", dir, err)
		}
	}
	slices.Sort(names)
	entries = make([]sandbox.FileInfo, 0, len(names))
	for _, name := range names {
		var st unix.Stat_t
		if unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
			continue // removed since it was listed
		}
		rel := name
		if dir != "" {
			rel = dir + "/" + name
		}
		entries = append(entries, fileInfo(rel, &st))
	}
	return entries, truncated, nil
}

// openDir opens the directory dir for reading.
func openDir(root int, dir string) (int, error) {
	parent, name, err := openParent(root, dir)
	if err != nil {
		return -1, err
	}
	defer unix.Close(parent)
	fd, err := openat2(parent, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
		return -1, sandbox.Errorf(sandbox.ErrInvalid, "not_a_dir", "path %q: not a directory", dir)
	}
	if err != nil {
		return -1, pathErr("listing", dir, err)
	}
	return fd, nil
}

// RemovePath removes the entry p, a directory with everything in it. A
// symlink is removed, never followed, wherever it is in the tree; a mount
// point in the tree is never entered (ErrInvalid "path_invalid"). The work
// dir itself ("") cannot be removed: Remove does that when the sandbox
// ends.
func (w *Dir) RemovePath(p string) error {
	if p == "" {
		return sandbox.Errorf(sandbox.ErrInvalid, "path_invalid", "the work dir itself cannot be removed")
	}
	if err := sandbox.CheckPath(p); err != nil {
		return err
	}
	root, err := w.open()
	if err != nil {
		return err
	}
	defer unix.Close(root)
	dir, name, err := openParent(root, p)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	err = unix.Unlinkat(dir, name, 0)
	if errors.Is(err, unix.EISDIR) {
		err = removeTree(dir, name, 0)
	}
	if errors.Is(err, unix.EXDEV) {
		return sandbox.Errorf(sandbox.ErrInvalid, "path_invalid", "removing %q: it is or holds a mount point", p)
	}
	if errors.Is(err, errTooDeep) {
		return sandbox.Errorf(sandbox.ErrLimit, "dir_too_deep", "removing %q: directories nested more than %d deep", p, maxDepth)
	}
	if err != nil {
		return pathErr("removing", p, err)
	}
	return nil
}

var errTooDeep = errors.New("too deep")

// removeTree removes the directory name in dirfd with everything in it.
// Each directory is opened also with RESOLVE_NO_XDEV, so a mount point is
// never entered (EXDEV), and held open while its subdirectories are
// removed: maxDepth bounds the fds held.
func removeTree(dirfd int, name string, depth int) error {
	if depth >= maxDepth {
		return errTooDeep
	}
	fd, err := unix.Openat2(dirfd, name, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: resolveFlags | unix.RESOLVE_NO_XDEV,
	})
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	for {
		// Unlinking while reading on is fine: every entry that stays is
		// still listed exactly once (POSIX readdir).
		names, err := f.Readdirnames(1024)
		for _, n := range names {
			err := unix.Unlinkat(fd, n, 0)
			if errors.Is(err, unix.EISDIR) {
				err = removeTree(fd, n, depth+1)
			}
			if err != nil && !errors.Is(err, unix.ENOENT) {
				return err
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
	}
	return unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR)
}

// Mkdir creates the directory p and its missing parents (0755, owned by
// the sandbox's uid:gid); one that exists is no error, a non-directory at
// p or on the way is ErrInvalid "path_invalid".
func (w *Dir) Mkdir(p string) error {
	if err := sandbox.CheckPath(p); err != nil {
		return err
	}
	root, err := w.open()
	if err != nil {
		return err
	}
	defer unix.Close(root)
	fd, err := w.mkdirs(root, p, strings.Split(p, "/"))
	if err != nil {
		return err
	}
	unix.Close(fd)
	return nil
}

// mkdirs makes the directories parts (the components of a path below
// root) that are missing, owned by the sandbox, and returns an O_PATH fd
// of the last (root's duplicate for none). p names the path in errors.
func (w *Dir) mkdirs(root int, p string, parts []string) (int, error) {
	dir, err := unix.Dup(root)
	if err != nil {
		return -1, pathErr("creating", p, err)
	}
	for _, c := range parts {
		// mkdirat never follows its last component, and that is the only
		// one it is given: dir is a real directory fd.
		made := unix.Mkdirat(dir, c, 0o755)
		if made != nil && !errors.Is(made, unix.EEXIST) {
			unix.Close(dir)
			return -1, pathErr("creating", p, made)
		}
		// An existing symlink (ELOOP) or file (ENOTDIR) is refused here.
		next, err := openat2(dir, c, unix.O_PATH|unix.O_DIRECTORY, 0)
		unix.Close(dir)
		if err != nil {
			return -1, pathErr("creating", p, err)
		}
		dir = next
		if made == nil {
			if err := unix.Fchownat(dir, "", w.uid, w.gid, unix.AT_EMPTY_PATH); err != nil {
				unix.Close(dir)
				return -1, pathErr("creating", p, err)
			}
		}
	}
	return dir, nil
}

// openParent opens the directory holding p's last component, which it
// returns with that directory's O_PATH fd (the caller closes it).
func openParent(root int, p string) (int, string, error) {
	parts := strings.Split(p, "/")
	dir, err := unix.Dup(root)
	if err != nil {
		return -1, "", fmt.Errorf("opening the work dir: %w", err)
	}
	for _, c := range parts[:len(parts)-1] {
		next, err := openat2(dir, c, unix.O_PATH|unix.O_DIRECTORY, 0)
		unix.Close(dir)
		if err != nil {
			return -1, "", pathErr("opening", p, err)
		}
		dir = next
	}
	return dir, parts[len(parts)-1], nil
}

// pathErr is the contract's error for a failed call on p: a missing entry
// is ErrNotFound "file_not_found"; a symlink or non-directory on the way
// and a full work dir are as invalidPath has them.
func pathErr(op, p string, err error) error {
	switch {
	case errors.Is(err, unix.ENOENT):
		return sandbox.Errorf(sandbox.ErrNotFound, "file_not_found", "%s %q: no such file or directory", op, p)
	case errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EDQUOT), errors.Is(err, unix.ELOOP),
		errors.Is(err, unix.EXDEV), errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.EISDIR):
		return invalidPath(p, err)
	}
	return fmt.Errorf("%s %q: %w", op, p, err)
}

func notRegular(p string) error {
	return sandbox.Errorf(sandbox.ErrInvalid, "path_invalid", "path %q: exists and is not a regular file", p)
}

func notAFile(p string) error {
	return sandbox.Errorf(sandbox.ErrInvalid, "not_a_file", "path %q: not a regular file", p)
}

func checkMax(max int64) error {
	if max < 0 {
		return sandbox.Errorf(sandbox.ErrInvalid, "limit_invalid", "a negative maximum (%d bytes)", max)
	}
	return nil
}

func fileInfo(p string, st *unix.Stat_t) sandbox.FileInfo {
	typ := sandbox.FileOther
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		typ = sandbox.FileRegular
	case unix.S_IFDIR:
		typ = sandbox.FileDir
	case unix.S_IFLNK:
		typ = sandbox.FileSymlink
	}
	return sandbox.FileInfo{
		Path: p, Type: typ, Size: st.Size,
		Mode:    st.Mode & 0o7777, // as Artifact.Mode
		ModTime: time.Unix(st.Mtim.Unix()),
	}
}
