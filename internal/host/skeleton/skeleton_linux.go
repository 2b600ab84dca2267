package skeleton

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/execbox/execbox/internal/host/hostview"
	"golang.org/x/sys/unix"
)

// Build makes the skeleton at root (made here): the mount points of the
// view's binds and extra mounts, its symlinks and generated files, and
// directories for /proc, /sys, /dev, /tmp, /work and /etc. Mount points
// are never created through a symlink, so a target whose path passes one
// is left to the runtime, which resolves it inside the sandbox.
func Build(root string, v *hostview.View) error {
	if err := os.Mkdir(root, 0o755); err != nil {
		return err
	}
	// The skeleton is a small tmpfs of its own, without noexec: runsc
	// remounts the root read-only with only nosuid and nodev, which the
	// kernel refuses (EPERM) where the flags of the mount below are locked
	// and include noexec — a work root on Debian's /run (mounted noexec by
	// its initramfs), or a container's --tmpfs. Close detaches it with the
	// sandbox dir (workdir.RemoveTree).
	if err := unix.Mount("tmpfs", root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=4m"); err != nil {
		return fmt.Errorf("mounting the skeleton's tmpfs: %w", err)
	}
	// An image is the skeleton's lower layer: what is made below goes into
	// the tmpfs, never into the image. This runs in the host's mount
	// namespace as root, so nothing below may follow a symlink the image
	// holds (mkdirAll refuses them; files are replaced, not written
	// through).
	if v.Image != "" {
		upper, work := root+"/.upper", root+"/.work"
		for _, d := range []string{upper, work} {
			if err := os.Mkdir(d, 0o755); err != nil {
				return err
			}
		}
		if err := unix.Mount("overlay", root, "overlay", unix.MS_NOSUID|unix.MS_NODEV, "lowerdir="+v.Image+",upperdir="+upper+",workdir="+work); err != nil {
			return fmt.Errorf("mounting the image as the root: %w", err)
		}
	}
	for _, d := range []string{"/proc", "/sys", "/dev", hostview.Tmp, hostview.WorkDir, "/etc"} {
		if err := mkdirAll(root, d); err != nil {
			return err
		}
	}
	for _, l := range v.Symlinks {
		if err := mkdirAll(root, filepath.Dir(l.Path)); err != nil {
			return err
		}
		if err := os.Symlink(l.Target, filepath.Join(root, l.Path)); err != nil {
			return fmt.Errorf("recreating symlink %s: %w", l.Path, err)
		}
	}
	for _, f := range v.Files {
		if err := mkdirAll(root, filepath.Dir(f.Path)); err != nil {
			return err
		}
		if err := writeFile(filepath.Join(root, f.Path), []byte(f.Data), fs.FileMode(f.Mode)); err != nil {
			return fmt.Errorf("writing %s: %w", f.Path, err)
		}
	}
	for _, bd := range append(append([]hostview.Bind(nil), v.Binds...), v.Mounts...) {
		if err := mountPoint(root, bd, v.Image != ""); err != nil {
			return err
		}
	}
	return nil
}

// writeFile writes a new file at p in place of whatever is there (an
// image's file or symlink: the overlay keeps the image's), never through a
// symlink.
func writeFile(p string, data []byte, mode fs.FileMode) error {
	if err := unix.Unlink(p); err != nil && !errors.Is(err, unix.ENOENT) {
		return err
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY|unix.O_NOFOLLOW, mode)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	return errors.Join(err, f.Close())
}

// mountPoint makes bd's target in the skeleton: a directory for a
// directory, an empty file for a file. A target below another mount (a
// host directory or /tmp) is not in the skeleton and is skipped — but over
// an image (image) a path through the image's symlinks is refused: a
// runtime that makes mount points before it moves into the root (bwrap)
// would follow them on the host.
func mountPoint(root string, bd hostview.Bind, image bool) error {
	st, err := os.Stat(bd.Source)
	if err != nil {
		return fmt.Errorf("mount source %s: %w", bd.Source, err)
	}
	if !ownedBySkeleton(root, bd.Target) {
		if image {
			return fmt.Errorf("mount point %s: a directory above it in the image is not a directory (a symlink?)", bd.Target)
		}
		return nil
	}
	if st.IsDir() {
		return mkdirAll(root, bd.Target)
	}
	if err := mkdirAll(root, filepath.Dir(bd.Target)); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(root, bd.Target), os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		if lst, err := os.Lstat(filepath.Join(root, bd.Target)); image && (err != nil || !lst.Mode().IsRegular()) {
			return fmt.Errorf("mount point %s: the image has something else than a file there (a symlink?)", bd.Target)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("creating mount point %s: %w", bd.Target, err)
	}
	return f.Close()
}

// ownedBySkeleton reports whether every existing component of p's parents
// in the skeleton is a real directory (no symlink, no file): only then is
// the mount point ours to create.
func ownedBySkeleton(root, p string) bool {
	cur := root
	parts := strings.Split(strings.Trim(filepath.Dir(p), "/"), "/")
	for _, c := range parts {
		if c == "" {
			continue
		}
		cur = filepath.Join(cur, c)
		st, err := os.Lstat(cur)
		if errors.Is(err, fs.ErrNotExist) {
			return true
		}
		if err != nil || !st.IsDir() {
			return false
		}
	}
	return true
}

// mkdirAll makes p (absolute inside the sandbox) in the skeleton one
// component at a time, refusing to pass a symlink.
func mkdirAll(root, p string) error {
	cur := root
	for _, c := range strings.Split(strings.Trim(p, "/"), "/") {
		if c == "" {
			continue
		}
		cur = filepath.Join(cur, c)
		err := os.Mkdir(cur, 0o755)
		if err == nil {
			continue
		}
		if !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("creating %s in the sandbox root: %w", p, err)
		}
		st, err := os.Lstat(cur)
		if err != nil {
			return fmt.Errorf("creating %s in the sandbox root: %w", p, err)
		}
		if !st.IsDir() {
			return fmt.Errorf("creating %s in the sandbox root: %s is not a directory", p, cur)
		}
	}
	return nil
}
