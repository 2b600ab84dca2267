package workdir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/execbox/execbox/sandbox"
)

// RootMode is the mode of every directory execbox makes on the way to a
// sandbox's work dir (the work root, a backend's directory, a process's
// base, a sandbox's directory): its owner may do anything, others may only
// pass through — not list it, not write in it. uid 65534 (bwrap runs as it)
// reaches its work dir through them, but can find no name it was not given;
// the names below (<pid>.<random>, the sandbox id, execbox-<random>) are
// unguessable.
const RootMode = 0o711

// CodeUnsafe is the code of MakeRoot's refusals (ErrDenied).
const CodeUnsafe = "work_root_unsafe"

// MakeRoot makes dir and every directory missing above it without ever
// following a symlink, and checks that dir is execbox's alone:
//
//   - dir is absolute; every component of it is a real directory (a
//     symlink anywhere on the path is refused, never followed);
//   - each directory above dir that MakeRoot did not make is owned by root
//     or by this process's user, and is not writable by group or others
//     unless it is sticky (/tmp), where no one else may rename or remove
//     what is ours;
//   - dir is owned by this process's user and not writable by group or
//     others; each directory MakeRoot makes gets RootMode (0711: others
//     can neither list nor write it), whatever the umask.
//
// Checks are made on the directory opened, never on a path looked up
// again, so nothing can be swapped in between. A refusal is ErrDenied with
// code CodeUnsafe naming the path and what is wrong with it; nothing is
// removed or changed then (directories MakeRoot made before it found the
// problem stay, empty).
func MakeRoot(dir string) error {
	fd, err := openRoot(dir, true)
	if err != nil {
		return err
	}
	unix.Close(fd)
	return nil
}

// openRoot is MakeRoot returning dir opened (O_RDONLY|O_DIRECTORY); with
// create false nothing missing is made and a missing dir is an error
// wrapping fs.ErrNotExist.
func openRoot(dir string, create bool) (int, error) {
	if !filepath.IsAbs(dir) {
		return -1, unsafe(dir, "it is not an absolute path")
	}
	dir = filepath.Clean(dir)
	euid := os.Geteuid()
	fd, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("opening /: %w", err)
	}
	parts := strings.Split(strings.TrimPrefix(dir, "/"), "/")
	if dir == "/" {
		parts = nil
	}
	at := ""
	for i, name := range parts {
		at += "/" + name
		last := i == len(parts)-1
		made := false
		if create {
			err := unix.Mkdirat(fd, name, RootMode)
			made = err == nil
			if err != nil && !errors.Is(err, unix.EEXIST) {
				unix.Close(fd)
				return -1, fmt.Errorf("creating %s: %w", at, err)
			}
		}
		// O_PATH needs no read permission; O_NOFOLLOW|O_DIRECTORY on one
		// component fails on a symlink, whatever it points to.
		next, err := unix.Openat(fd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			switch {
			case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
				return -1, unsafe(dir, "%s is a symlink or not a directory", at)
			case errors.Is(err, unix.ENOENT):
				return -1, fmt.Errorf("opening %s: %w", at, os.ErrNotExist)
			}
			return -1, fmt.Errorf("opening %s: %w", at, err)
		}
		fd = next
		if made {
			// The umask may have taken the search bits: set the mode on the
			// directory we hold (ours, so we may open it).
			if err := fchmodDir(fd, RootMode); err != nil {
				unix.Close(fd)
				return -1, fmt.Errorf("setting the mode of %s: %w", at, err)
			}
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("checking %s: %w", at, err)
		}
		if why := judge(&st, euid, made || last); why != "" {
			unix.Close(fd)
			return -1, unsafe(dir, "%s %s", at, why)
		}
	}
	// Checked: ours alone. Open it for reading (listing) through the fd.
	rd, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	unix.Close(fd)
	if err != nil {
		return -1, fmt.Errorf("opening %s: %w", dir, err)
	}
	return rd, nil
}

// fchmodDir sets the mode of the directory held by the O_PATH fd.
func fchmodDir(fd int, mode uint32) error {
	d, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(d)
	return unix.Fchmod(d, mode)
}

// judge says what is wrong with a directory on the way to a work root, ""
// for nothing. own is a directory that must be ours (the work root, or one
// MakeRoot made): owned by us, writable by no one else. Otherwise it is one
// above, which only root or we may own, and which others may write only
// when it is sticky.
func judge(st *unix.Stat_t, euid int, own bool) string {
	perm := st.Mode & 0o7777
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return "is not a directory"
	case own && int(st.Uid) != euid:
		return fmt.Sprintf("is owned by uid %d, not by execbox's uid %d", st.Uid, euid)
	case !own && st.Uid != 0 && int(st.Uid) != euid:
		return fmt.Sprintf("is owned by uid %d, neither root nor execbox's uid %d: its owner could replace what is below it", st.Uid, euid)
	case own && perm&0o022 != 0:
		return fmt.Sprintf("has mode %04o: others may write it; want 0700 or 0711 (chmod 711)", perm)
	case own && perm&0o700 != 0o700:
		return fmt.Sprintf("has mode %04o: want 0700 or 0711", perm)
	case perm&0o022 != 0 && perm&unix.S_ISVTX == 0:
		return fmt.Sprintf("has mode %04o: writable by others without the sticky bit, who could replace what is below it", perm)
	}
	return ""
}

func unsafe(dir, format string, args ...any) error {
	return sandbox.Errorf(sandbox.ErrDenied, CodeUnsafe, "refusing the work root %s: %s", dir, fmt.Sprintf(format, args...))
}
