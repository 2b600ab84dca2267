// Package workdir keeps sandboxes' directories on the host: a backend's
// work root, this process's base directory in it (Base), each sandbox's
// work dir below that (Dir, mounted at /work inside), and their removal.
//
//	<work root>/<backend>/<pid>.<rand>/[<sandbox id>/]execbox-XXXX
//	 MakeRoot    OpenBase  Base                        Dir
//
// # The work root
//
// The work root is execbox's alone (MakeRoot): created without following
// a symlink anywhere on its path; every directory above it owned by root
// or execbox's user and writable by others only when sticky (/tmp); the
// root itself owned by execbox's user and writable by no one else. Every
// directory execbox makes on the way to a work dir is 0711 (RootMode),
// owned by execbox: others may pass through (bwrap's uid 65534 reaches its
// work dir) but neither list nor write, and the names below the backend's
// directory are unguessable. The work dir itself is 0700, owned by the
// sandbox's uid. The default root (sandbox.DefaultWorkRoot) is /run/execbox
// as root, $XDG_RUNTIME_DIR/execbox or /tmp/execbox-<uid> otherwise.
//
// # Writing in and collecting out
//
// Dir.Write puts input files into a work dir and Dir.Collect takes
// artifacts out of it, never following a symlink the sandboxed program may
// have planted: every path is resolved by the kernel with
// openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)
// from a directory fd, so a symlink anywhere on the way — even one created
// between a check and a use — makes the operation fail instead of escaping
// the work dir. Collect is only safe while no sandboxed process runs
// (after Exec), since a running program could change files mid-read;
// sizes are still bounded then.
//
// # A running sandbox's files
//
// Put, Get, Stat, List, RemovePath and Mkdir are sandbox.Files on the host:
// one file or directory at a time, while the sandboxed program may run
// and swap a directory for a symlink at any moment. Each path is walked
// one component at a time with the same openat2 flags, and only its last
// component is named to an *at call that never follows it (lstat, unlink,
// mkdir, O_NOFOLLOW), so a swap makes the call fail (path_invalid) and
// never reach outside. Put and Get are bounded by their max, List by its
// max (holding at most max+1024 names however big the directory),
// RemovePath by the depth of the tree and never enters a mount point. They
// keep no state, so unlike Write, Collect and Snapshot they are safe for
// concurrent use.
//
// # Invariants
//
//   - Reconcile removes a base only when its process is dead, or when it
//     carries this process's PID but no Base of this process owns it (a
//     previous process with the same PID, as PID 1 in a container); only
//     a real directory named <pid>.<rand> owned by execbox's user, found in
//     a root MakeRoot accepts: never anything through a symlink, never
//     another user's, never a name that is not a base's.
//   - Before removing a tree, every mount at or below it is detached,
//     deepest first, and RemoveTree refuses while any mount is left, so a
//     writable host bind is never emptied by a recursive remove.
//   - Base.Close removes only its own directory, and the work root only
//     when it is empty (another process may be using it).
//
// # Concurrency
//
// The set of live bases is process-wide and safe for concurrent use, so
// several Bases (one per backend) may share a work root; a single Base is
// closed once, after every sandbox under it is closed. A Dir's Write,
// Collect and Snapshot are used by one goroutine at a time; its file
// operations (above) by any number.
package workdir
