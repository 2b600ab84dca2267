// Package hostview decides a sandbox's view of the host, independently of
// the technology that builds it: which host paths form the read-only root,
// which files are generated, which device nodes exist, which extra mounts
// the caller asked for and which paths the program may write. The native
// init, bwrap and gVisor backends each turn a View into their own mounts.
//
// # Invariants
//
//   - Every path in a View is clean and absolute, and every host path in it
//     existed, was not a symlink (except Symlinks, which are recreated,
//     never followed) and had no symlink among its parents when Plan ran.
//   - Never mounted from the host: "/", /proc, /sys, /dev, /run, /var/run,
//     nor anything inside or containing Options.Hidden (execbox's work
//     roots). Device nodes come only from Devices; sockets and devices are
//     never bind-mounted.
//   - Binds are read-only; an extra mount is writable only when the caller
//     set Mount.Writable. Binds of the root are exec; writable extra mounts
//     are noexec unless View.Exec.
//   - /etc/passwd, group, hosts and hostname are generated (root and nobody
//     only) unless an explicit bind covers /etc.
//   - An explicit list (Policy.RootFS or Options.RootFS) is checked
//     strictly: a bad entry is ErrInvalid "rootfs_invalid". The default list
//     skips what the host lacks. A bad extra mount is ErrInvalid
//     "mount_invalid".
//
// # Concurrency
//
// Plan only reads the host file system and package-level values; it is
// safe to call from many goroutines. A View is immutable by convention.
package hostview
