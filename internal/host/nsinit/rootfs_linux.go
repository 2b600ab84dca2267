package nsinit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// setupRoot builds the sandbox's file system in a fresh tmpfs on c.Root
// and makes it the root: binds, generated files, /proc, /dev, /tmp, the
// work dir and extra mounts, then pivot_root with the old root detached
// and the new root read-only.
func setupRoot(c *Config) error {
	// Nothing we mount may propagate back to the host, nor host mounts in.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making mounts private: %w", err)
	}
	root := c.Root
	size := c.RootSize
	if size <= 0 {
		size = 1 << 20
	}
	if err := unix.Mount("tmpfs", root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV,
		fmt.Sprintf("mode=0755,size=%d,nr_inodes=4096", size)); err != nil {
		return fmt.Errorf("mounting the root tmpfs on %s: %w", root, err)
	}
	if c.Image != "" {
		if err := overlayImage(root, c.Image); err != nil {
			return err
		}
	}
	for _, b := range c.Binds {
		if err := bind(root, b); err != nil {
			return err
		}
	}
	for _, l := range c.Symlinks {
		if err := mkParents(root, l.Path); err != nil {
			return err
		}
		if err := os.Symlink(l.Target, join(root, l.Path)); err != nil {
			return fmt.Errorf("creating symlink %s: %w", l.Path, err)
		}
	}
	for _, f := range c.Files {
		if err := writeFile(root, f, c.Image != ""); err != nil {
			return err
		}
	}
	if err := mountProc(root); err != nil {
		return err
	}
	if err := mountDev(root, c.Devices, c.DevLinks); err != nil {
		return err
	}
	tmpFlags := uintptr(unix.MS_NOSUID | unix.MS_NODEV)
	if !c.Tmp.Exec {
		tmpFlags |= unix.MS_NOEXEC
	}
	inodes := c.Tmp.Inodes
	if inodes <= 0 {
		inodes = 16384
	}
	if err := mountAt(root, "/tmp", "tmpfs", "tmpfs", tmpFlags,
		fmt.Sprintf("mode=1777,size=%d,nr_inodes=%d", c.Tmp.Size, inodes)); err != nil {
		return err
	}
	for _, m := range c.Mounts {
		if err := bind(root, m); err != nil {
			return err
		}
	}
	return pivot(root)
}

// overlayImage mounts an overlay of image under the root tmpfs on root:
// what the init makes (mount points, Files) goes into the tmpfs, and the
// root becomes read-only with the rest at pivot.
func overlayImage(root, image string) error {
	upper, work := root+"/.upper", root+"/.work"
	for _, d := range []string{upper, work} {
		if err := unix.Mkdir(d, 0o755); err != nil {
			return fmt.Errorf("making the image overlay's %s: %w", d, err)
		}
	}
	opts := "lowerdir=" + image + ",upperdir=" + upper + ",workdir=" + work
	if err := unix.Mount("overlay", root, "overlay", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mounting the image %s as the root: %w", image, err)
	}
	return nil
}

// join places p (absolute, clean) below root.
func join(root, p string) string { return root + p }

// mkParents creates the directories above p inside root, refusing to walk
// through a symlink (a merged-/usr link would lead into a read-only bind).
func mkParents(root, p string) error {
	return mkdirs(root, filepath.Dir(p))
}

// mkdirs creates p and its parents inside root, never following a symlink.
func mkdirs(root, p string) error {
	cur := root
	for _, part := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
		if part == "" {
			continue
		}
		cur = filepath.Join(cur, part)
		st, err := os.Lstat(cur)
		switch {
		case err == nil && st.IsDir():
			continue
		case err == nil:
			return fmt.Errorf("creating %s: %s is not a directory", p, strings.TrimPrefix(cur, root))
		case !errors.Is(err, os.ErrNotExist):
			return fmt.Errorf("creating %s: %w", p, err)
		}
		if err := unix.Mkdir(cur, 0o755); err != nil {
			return fmt.Errorf("creating %s: %w", strings.TrimPrefix(cur, root), err)
		}
	}
	return nil
}

// bind mounts b.Source on b.Target below root with b's restrictions.
func bind(root string, b Bind) error {
	st, err := os.Stat(b.Source)
	if err != nil {
		if b.Optional && errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("bind-mounting %s: %w", b.Source, err)
	}
	target := join(root, b.Target)
	if err := mkParents(root, b.Target); err != nil {
		return err
	}
	if st.IsDir() {
		err = unix.Mkdir(target, 0o755)
	} else {
		var fd int
		fd, err = unix.Open(target, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o644)
		if err == nil {
			unix.Close(fd)
		}
	}
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("creating mount point %s: %w", b.Target, err)
	}
	// A mount point that was there (an image's) must be what it seems: a
	// symlink would be followed, from the host's root, by the mount.
	if lst, err := os.Lstat(target); err != nil || lst.Mode()&os.ModeSymlink != 0 || lst.IsDir() != st.IsDir() {
		return fmt.Errorf("mount point %s is not a %s", b.Target, map[bool]string{true: "directory", false: "regular file"}[st.IsDir()])
	}
	if err := unix.Mount(b.Source, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind-mounting %s on %s: %w", b.Source, b.Target, err)
	}
	attr := uint64(unix.MOUNT_ATTR_NOSUID)
	if !b.Writable {
		attr |= unix.MOUNT_ATTR_RDONLY
	}
	if !b.Exec {
		attr |= unix.MOUNT_ATTR_NOEXEC
	}
	if !b.Dev {
		attr |= unix.MOUNT_ATTR_NODEV
	}
	// Recursive, so submounts of the source get the same restrictions.
	if err := unix.MountSetattr(unix.AT_FDCWD, target, unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: attr}); err != nil {
		return fmt.Errorf("restricting the mount of %s: %w", b.Target, err)
	}
	return nil
}

// mountAt mounts a file system of type fstype on p below root.
func mountAt(root, p, source, fstype string, flags uintptr, data string) error {
	if err := mkdirs(root, p); err != nil {
		return err
	}
	if err := unix.Mount(source, join(root, p), fstype, flags, data); err != nil {
		return fmt.Errorf("mounting %s on %s: %w", fstype, p, err)
	}
	return nil
}

// writeFile writes a generated file into the root, in place of what an
// image has there (its unlink is the overlay's: the image keeps it).
func writeFile(root string, f File, image bool) error {
	if err := mkParents(root, f.Path); err != nil {
		return err
	}
	if image {
		if err := unix.Unlink(join(root, f.Path)); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("replacing the image's %s: %w", f.Path, err)
		}
	}
	fd, err := unix.Open(join(root, f.Path), unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, f.Mode&0o777)
	if err != nil {
		return fmt.Errorf("writing %s: %w", f.Path, err)
	}
	defer unix.Close(fd)
	for data := []byte(f.Data); len(data) > 0; {
		n, err := unix.Write(fd, data)
		if err != nil {
			return fmt.Errorf("writing %s: %w", f.Path, err)
		}
		data = data[n:]
	}
	return nil
}

// mountProc mounts a proc of the new PID namespace: host processes are
// not in it. hidepid=2 also hides the init from the program (it may not
// ptrace it), so nothing of the init's threads — their capabilities, or
// cgroup paths relative to execbox's own — shows under /proc/1.
func mountProc(root string) error {
	return mountAt(root, "/proc", "proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "hidepid=2")
}

// mountDev makes a minimal read-only /dev: the named host device nodes
// (mknod is not allowed in a user namespace, so they are bind mounts) and
// the given symlinks (the backend points /dev/shm into /tmp, so POSIX
// shared memory shares /tmp's size limit instead of having a budget of its
// own).
func mountDev(root string, devices []string, links []Symlink) error {
	if err := mountAt(root, "/dev", "tmpfs", "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC,
		"mode=0755,size=64k,nr_inodes=64"); err != nil {
		return err
	}
	// Read-only binds: a program writes and reads a device (a device
	// node's data is not its file system's), but cannot chmod, chown or
	// touch the host's node, whoever owns it (runtimes such as runsc
	// chown the stdio files they are handed to the sandbox's user).
	for _, d := range devices {
		if err := bind(root, Bind{Source: "/dev/" + d, Target: "/dev/" + d, Dev: true, Optional: true}); err != nil {
			return err
		}
	}
	for _, l := range links {
		if err := os.Symlink(l.Target, join(root, l.Path)); err != nil {
			return fmt.Errorf("creating %s: %w", l.Path, err)
		}
	}
	// Terminals: a devpts of the sandbox's own (newinstance: the host's
	// terminals are not in it), so that a session can run a program on a
	// PTY.
	if err := mountAt(root, "/dev/pts", "devpts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC,
		"newinstance,ptmxmode=0666,mode=0620,max=64"); err != nil {
		return err
	}
	if err := os.Symlink("pts/ptmx", join(root, "/dev/ptmx")); err != nil {
		return fmt.Errorf("creating /dev/ptmx: %w", err)
	}
	if err := unix.MountSetattr(unix.AT_FDCWD, join(root, "/dev"), 0, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
		return fmt.Errorf("making /dev read-only: %w", err)
	}
	return nil
}

// pivot makes root the root directory, detaches the old one and makes
// the new root read-only.
func pivot(root string) error {
	if err := unix.Chdir(root); err != nil {
		return fmt.Errorf("entering the new root: %w", err)
	}
	// pivot_root(".", ".") stacks the old root on the new one; unmounting
	// "." then detaches it (runc's trick: no put_old directory needed).
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivoting the root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detaching the old root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return fmt.Errorf("entering the new root: %w", err)
	}
	if err := unix.MountSetattr(unix.AT_FDCWD, "/", 0, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}); err != nil {
		return fmt.Errorf("making the root read-only: %w", err)
	}
	return nil
}
