package layer

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/execbox/execbox/sandbox"
)

// Limits bound what all the layers applied to one Root may hold together.
type Limits struct {
	MaxBytes   int64 // tar bytes read: file data, headers and padding
	MaxEntries int   // tar entries
}

// Stats count what the layers applied so far held.
type Stats struct {
	Entries int   // tar entries, whiteouts included, and the directories made for them
	Bytes   int64 // tar bytes read
	// Written is what the root holds on disk, about: file sizes (a sparse
	// file's holes are written out) and a block for each directory made
	// for a deeper entry. Limits.MaxBytes bounds it too.
	Written int64
	Dropped int // device nodes, FIFOs and sockets: never made
	Cleared int // files and directories whose setuid or setgid bit was cleared
}

// Root is a directory that layers are applied to, bottom layer first.
type Root struct {
	fd   int // the root directory, O_PATH
	lim  Limits
	mine map[uint64]bool // inodes the layer being applied made: an opaque marker keeps them
	Stats
}

// dirCost is what a directory made for a deeper entry is charged.
const dirCost = 4096

// Whiteout names (the OCI image spec's layer format).
const (
	whiteout = ".wh."
	opaque   = ".wh..wh..opq"
)

// Open starts applying layers to dir, which exists.
func Open(dir string, lim Limits) (*Root, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	return &Root{fd: fd, lim: lim}, nil
}

// Close releases the root's directory.
func (r *Root) Close() error { return unix.Close(r.fd) }

func invalid(format string, a ...any) error {
	return sandbox.Errorf(sandbox.ErrInvalid, "image_layer_invalid", "a layer "+format, a...)
}

func tooLarge(format string, a ...any) error {
	return sandbox.Errorf(sandbox.ErrLimit, "image_too_large", "the image "+format, a...)
}

// dirMode is a directory's mode, set once its layer is done: until then
// the unpacking user can write in it, whatever the layer says.
type dirMode struct {
	name string
	mode uint32
}

// Apply applies one layer, an uncompressed tar stream, and reads it to its
// end (so a caller hashing it sees every byte).
func (r *Root) Apply(layer io.Reader) error {
	in := &counted{r: layer, left: r.lim.MaxBytes - r.Bytes}
	defer func() { r.Bytes += in.n }()
	tr := tar.NewReader(in)
	r.mine = map[uint64]bool{}
	var dirs []dirMode
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if errors.Is(err, tar.ErrInsecurePath) {
			err = nil // clean refuses what climbs out; the rest is made relative
		}
		if err != nil {
			return in.explain(err)
		}
		r.Entries++
		if r.Entries > r.lim.MaxEntries {
			return tooLarge("has more than %d entries", r.lim.MaxEntries)
		}
		name, err := clean(h.Name)
		if err != nil {
			return err
		}
		if name == "." {
			continue // the root's own entry: its mode is execbox's
		}
		dir, base := path.Split(name)
		switch {
		case base == opaque:
			err = r.opaque(dir)
		case strings.HasPrefix(base, whiteout):
			err = r.whiteout(dir, strings.TrimPrefix(base, whiteout))
		default:
			var mode *dirMode
			mode, err = r.entry(h, tr, name, in)
			if mode != nil {
				dirs = append(dirs, *mode)
			}
		}
		if err != nil {
			return in.explain(err)
		}
	}
	for _, d := range dirs {
		if err := r.chmodDir(d); err != nil {
			return err
		}
	}
	if _, err := io.Copy(io.Discard, in); err != nil {
		return in.explain(err)
	}
	return nil
}

// clean turns a tar name into a path relative to the root: a leading "/"
// or "./" is dropped; a ".." component is refused.
func clean(name string) (string, error) {
	if len(name) > unix.PathMax {
		return "", invalid("names a path of %d bytes", len(name))
	}
	for _, c := range strings.Split(name, "/") {
		if c == ".." {
			return "", invalid("names %q, which climbs out with ..", name)
		}
	}
	p := path.Clean("/" + name)
	if p == "/" {
		return ".", nil
	}
	return p[1:], nil
}

// entry makes one file, directory, link or symlink; a directory's mode is
// returned to be set after the layer.
func (r *Root) entry(h *tar.Header, body io.Reader, name string, in *counted) (*dirMode, error) {
	mode := uint32(h.Mode) & 0o7777
	if mode&(unix.S_ISUID|unix.S_ISGID) != 0 {
		mode &^= unix.S_ISUID | unix.S_ISGID
		r.Cleared++
	}
	switch h.Typeflag {
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		r.Dropped++
		return nil, nil
	case tar.TypeDir, tar.TypeReg, tar.TypeSymlink, tar.TypeLink:
	default:
		return nil, invalid("entry %s has the unsupported type %q", name, h.Typeflag)
	}
	parent, base, err := r.parent(name)
	if err != nil {
		return nil, err
	}
	defer unix.Close(parent)
	defer r.made(parent, base)
	if h.Typeflag == tar.TypeDir {
		var st unix.Stat_t
		if err := unix.Fstatat(parent, base, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
			return &dirMode{name, mode}, nil
		}
		if err := removeAt(parent, base); err != nil {
			return nil, err
		}
		if err := unix.Mkdirat(parent, base, 0o700); err != nil {
			return nil, pathErr("mkdir", name, err)
		}
		return &dirMode{name, mode}, nil
	}
	if err := removeAt(parent, base); err != nil {
		return nil, err
	}
	switch h.Typeflag {
	case tar.TypeSymlink:
		if len(h.Linkname) > unix.PathMax {
			return nil, invalid("symlink %s has a target of %d bytes", name, len(h.Linkname))
		}
		// The target is only data: nothing is ever resolved through it
		// outside the root.
		if err := unix.Symlinkat(h.Linkname, parent, base); err != nil {
			return nil, pathErr("symlink", name, err)
		}
	case tar.TypeLink:
		return nil, r.link(h.Linkname, parent, base, name)
	case tar.TypeReg:
		// A sparse file reads as few tar bytes and writes its whole size.
		if h.Size > in.left || h.Size > r.lim.MaxBytes-r.Written {
			return nil, tooLarge("is larger than %d bytes (file %s alone is %d bytes)", r.lim.MaxBytes, name, h.Size)
		}
		r.Written += h.Size
		fd, err := unix.Openat(parent, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return nil, pathErr("create", name, err)
		}
		err = unix.Fchmod(fd, mode)
		f := os.NewFile(uintptr(fd), name)
		if err == nil {
			_, err = io.CopyN(f, body, h.Size)
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("writing %s: %w", name, err)
		}
	}
	return nil, nil
}

// made records base of parent as the layer's own.
func (r *Root) made(parent int, base string) {
	var st unix.Stat_t
	if unix.Fstatat(parent, base, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
		r.mine[st.Ino] = true
	}
}

// link makes a hard link to target, an existing regular file of the root.
func (r *Root) link(target string, parent int, base, name string) error {
	t, err := clean(target)
	if err != nil {
		return err
	}
	fd, err := r.resolve(t, unix.O_PATH|unix.O_NOFOLLOW)
	if err != nil {
		return invalid("hard link %s names %s, which is not in the image: %v", name, target, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return pathErr("stat", target, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return invalid("hard link %s names %s, which is not a regular file", name, target)
	}
	// Through the descriptor's magic link: the target as resolved above,
	// not its name again.
	if err := unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), parent, base, unix.AT_SYMLINK_FOLLOW); err != nil {
		return pathErr("link", name, err)
	}
	return nil
}

// chmodDir sets a directory's mode once its layer is done.
func (r *Root) chmodDir(d dirMode) error {
	fd, err := r.resolve(d.name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW)
	if absent(err) || errors.Is(err, unix.ELOOP) {
		return nil // a later entry of the layer replaced it
	}
	if err != nil {
		return pathErr("open", d.name, err)
	}
	defer unix.Close(fd)
	if err := unix.Fchmod(fd, d.mode); err != nil {
		return pathErr("chmod", d.name, err)
	}
	return nil
}

// whiteout removes name from dir, as lower layers left it.
func (r *Root) whiteout(dir, name string) error {
	if name == "" || name == "." || name == ".." {
		return invalid("has a whiteout of %q in %q", name, dir)
	}
	fd, err := r.resolve(dirName(dir), unix.O_PATH|unix.O_DIRECTORY)
	if absent(err) {
		return nil // nothing below to hide
	}
	if err != nil {
		return pathErr("open", dir, err)
	}
	defer unix.Close(fd)
	return removeAt(fd, name)
}

// opaque empties dir of what lower layers put in it; what this layer
// made stays.
func (r *Root) opaque(dir string) error {
	dir = dirName(dir)
	fd, err := r.resolve(dir, unix.O_RDONLY|unix.O_DIRECTORY)
	if absent(err) {
		return nil
	}
	if err != nil {
		return pathErr("open", dir, err)
	}
	defer unix.Close(fd)
	names, err := readDir(fd)
	if err != nil {
		return pathErr("read", dir, err)
	}
	for _, n := range names {
		var st unix.Stat_t
		if unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && r.mine[st.Ino] {
			continue
		}
		if err := removeAt(fd, n); err != nil {
			return err
		}
	}
	return nil
}

// dirName is path.Split's directory as a path to resolve: "." for the
// root.
func dirName(dir string) string {
	if dir = strings.TrimSuffix(dir, "/"); dir == "" {
		return "."
	}
	return dir
}

// parent opens (making what is missing) the directory that will hold
// name, resolved inside the root, and returns it with name's last
// component.
func (r *Root) parent(name string) (int, string, error) {
	dir, base := path.Split(name)
	dir = strings.TrimSuffix(dir, "/")
	if dir == "" {
		fd, err := unix.Openat(r.fd, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		return fd, base, err
	}
	// The longest part that exists, then the rest made one by one: a new
	// directory holds no symlink to follow.
	parts := strings.Split(dir, "/")
	have := len(parts)
	var fd int
	for ; have > 0; have-- {
		var err error
		fd, err = r.resolve(strings.Join(parts[:have], "/"), unix.O_PATH|unix.O_DIRECTORY)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.ENOENT) {
			return -1, "", invalid("puts %s below %s, which is not a directory", name, strings.Join(parts[:have], "/"))
		}
	}
	if have == 0 {
		var err error
		if fd, err = unix.Openat(r.fd, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
			return -1, "", err
		}
	}
	for _, c := range parts[have:] {
		// Directories made for a deeper entry count as entries and take a
		// block each: one long name must not make thousands for free.
		r.Entries++
		r.Written += dirCost
		if r.Entries > r.lim.MaxEntries || r.Written > r.lim.MaxBytes {
			unix.Close(fd)
			return -1, "", tooLarge("has more than %d entries or %d bytes", r.lim.MaxEntries, r.lim.MaxBytes)
		}
		if err := unix.Mkdirat(fd, c, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
			unix.Close(fd)
			return -1, "", pathErr("mkdir", name, err)
		}
		r.made(fd, c)
		next, err := unix.Openat(fd, c, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return -1, "", invalid("puts %s below %s, which is not a directory of the image", name, c)
		}
		fd = next
	}
	return fd, base, nil
}

// resolve opens p inside the root: symlinks and ".." resolve as if the
// root were "/".
func (r *Root) resolve(p string, flags uint64) (int, error) {
	return unix.Openat2(r.fd, p, &unix.OpenHow{Flags: flags | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS})
}

// absent reports whether err says a path is not there (or not a
// directory where one was needed): nothing to act on.
func absent(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR)
}

// removeAt removes name from dir, a directory with all it holds; never
// following a symlink, never "." or "..".
func removeAt(dir int, name string) error {
	if name == "" || name == "." || name == ".." || strings.Contains(name, "/") {
		return invalid("removes %q", name)
	}
	err := unix.Unlinkat(dir, name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EPERM) {
		return pathErr("remove", name, err)
	}
	sub, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return pathErr("open", name, err)
	}
	// Directories are made 0700 until their layer ends, but one of a lower
	// layer may be read-only to its owner.
	unix.Fchmod(sub, 0o700)
	names, err := readDir(sub)
	for _, n := range names {
		if err == nil {
			err = removeAt(sub, n)
		}
	}
	unix.Close(sub)
	if err != nil {
		return err
	}
	if err := unix.Unlinkat(dir, name, unix.AT_REMOVEDIR); err != nil {
		return pathErr("remove", name, err)
	}
	return nil
}

// readDir lists the names in the directory fd (without moving fd's offset
// for the caller: it reads a duplicate).
func readDir(fd int) ([]string, error) {
	dup, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(dup), "dir")
	defer f.Close()
	return f.Readdirnames(-1)
}

func pathErr(op, name string, err error) error {
	return &os.PathError{Op: op, Path: name, Err: err}
}

// counted reads at most left bytes and counts them.
type counted struct {
	r    io.Reader
	n    int64
	left int64
	over bool
}

func (c *counted) Read(p []byte) (int, error) {
	if c.left <= 0 {
		// At the bound: only the end of the stream may follow.
		var b [1]byte
		n, err := c.r.Read(b[:])
		if n > 0 {
			c.over = true
			return 0, errOver
		}
		return 0, err
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	c.left -= int64(n)
	return n, err
}

var errOver = errors.New("over the limit")

// explain turns an error met while reading past the limit into the
// limit's error.
func (c *counted) explain(err error) error {
	if c.over || errors.Is(err, errOver) {
		return tooLarge("unpacks to more than its limit of bytes")
	}
	var typed *sandbox.Error
	if errors.As(err, &typed) {
		return err
	}
	if errors.Is(err, tar.ErrHeader) || errors.Is(err, io.ErrUnexpectedEOF) {
		return invalid("is not a valid tar stream: %v", err)
	}
	return err
}
