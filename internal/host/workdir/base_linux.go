package workdir

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Base is this process's directory Path under a backend's work root Root:
// every sandbox dir the process makes for that backend is below it.
type Base struct {
	Root string // the backend's work root
	Path string // <Root>/<pid>.<rand>; "" when none was made
}

// liveBases are the bases this process made (one per Base), so reconciling
// never takes a sibling backend's.
var liveBases sync.Map

// OpenBase makes root (MakeRoot: no symlink followed, ours alone, 0711),
// removes what dead processes left in it and makes this process's base
// there (0711).
func OpenBase(root string) (*Base, error) {
	fd, err := openRoot(root, true)
	if err != nil {
		return nil, fmt.Errorf("creating work root: %w", err)
	}
	defer unix.Close(fd)
	root = filepath.Clean(root)
	if _, err := reconcileAt(fd, root); err != nil {
		return nil, err
	}
	var r [4]byte
	rand.Read(r[:])
	name := strconv.Itoa(os.Getpid()) + "." + hex.EncodeToString(r[:])
	d := &Base{Root: root, Path: filepath.Join(root, name)}
	liveBases.Store(d.Path, true)
	err = unix.Mkdirat(fd, name, RootMode)
	if err == nil {
		var bd int
		if bd, err = unix.Openat(fd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err == nil {
			err = fchmodDir(bd, RootMode)
			unix.Close(bd)
		}
	}
	if err != nil {
		liveBases.Delete(d.Path)
		return nil, fmt.Errorf("creating work dir parent: %w", err)
	}
	return d, nil
}

// baseName is the name of a process's base: <pid>.<random>.
var baseName = regexp.MustCompile(`^[0-9]+\.[0-9a-z]+$`)

// Reconcile removes, mounts first, every <pid>.<rand> directory of root
// that belongs to a dead process, or to this PID but no live Base. It
// returns the directories it removed.
//
// It never deletes through a symlink: root is opened as MakeRoot checks it
// (no symlink on the path, ours alone) without creating it, and only real
// directories owned by this process's user with a base's name are
// candidates; anything else in root is left alone.
func Reconcile(root string) ([]string, error) {
	fd, err := openRoot(root, false)
	if err != nil {
		return nil, fmt.Errorf("reconciling work dirs: %w", err)
	}
	defer unix.Close(fd)
	return reconcileAt(fd, filepath.Clean(root))
}

// reconcileAt is Reconcile of root, held open (read) as fd.
func reconcileAt(fd int, root string) ([]string, error) {
	dup, err := unix.Dup(fd)
	if err != nil {
		return nil, fmt.Errorf("reconciling work dirs: %w", err)
	}
	f := os.NewFile(uintptr(dup), root)
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("reconciling work dirs: %w", err)
	}
	slices.Sort(names)
	euid := os.Geteuid()
	var removed []string
	var errs []error
	for _, name := range names {
		dir := filepath.Join(root, name)
		if _, live := liveBases.Load(dir); live || !baseName.MatchString(name) {
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil ||
			st.Mode&unix.S_IFMT != unix.S_IFDIR || int(st.Uid) != euid {
			continue // a symlink, a file, someone else's: never ours to remove
		}
		p, _, _ := strings.Cut(name, ".")
		pid, err := strconv.Atoi(p)
		if err == nil && pid != os.Getpid() {
			if err := unix.Kill(pid, 0); err == nil || errors.Is(err, unix.EPERM) {
				continue // its owner lives
			}
		}
		if err := RemoveTree(dir); err != nil {
			errs = append(errs, fmt.Errorf("reconciling work dirs: %w", err))
			continue
		}
		removed = append(removed, dir)
	}
	return removed, errors.Join(errs...)
}

// Close removes the base with everything in it, and the work root when
// nothing else is left in it. Every sandbox under the base must be closed
// first. A mount left below it (a backend's own, such as its device nodes)
// is detached first.
func (d *Base) Close() error {
	if d.Path != "" {
		liveBases.Delete(d.Path)
		if err := RemoveTree(d.Path); err != nil {
			return err
		}
	}
	os.Remove(d.Root) // fails, as it should, while another process uses it
	return nil
}

// CloseEmpty is Close for a base that must already be empty: it refuses
// (and the base stays live) while anything is left in it. The error is the
// one os.Remove returned.
func (d *Base) CloseEmpty() error {
	if d.Path != "" {
		if err := os.Remove(d.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		liveBases.Delete(d.Path)
	}
	os.Remove(d.Root) // fails, as it should, while another process uses it
	return nil
}
