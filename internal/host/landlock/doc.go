// Package landlock confines a process's filesystem access with the Landlock
// LSM, as a second wall behind the mount namespace: even a program that
// got around its mounts can only touch the paths named here.
//
// The native init calls Restrict after its mounts and pivot_root (Landlock
// rules hold open files of the final tree) and before execve; the ruleset
// is inherited by every child and cannot be lifted.
//
// # Invariants
//
//   - Restrict grants read and execute below each ro path, read, write,
//     execute and cross-directory rename/link ("refer") below each rw path,
//     and nothing anywhere else. A path that is a file gets only the
//     file rights; a path that does not exist is skipped (granting less).
//   - Besides the filesystem, Restrict scopes signals and abstract UNIX
//     sockets to the domain (ABI 6+): the program cannot signal or connect
//     to processes outside it. Network ports are not restricted here; the
//     network namespace does that.
//   - Best effort: on a kernel without Landlock Restrict changes nothing and
//     says "landlock unavailable" without an error; on an older ABI it
//     enforces what that ABI can. Callers that must not run without Landlock
//     check ABI first.
//   - Restrict also sets no_new_privs, on every thread.
//
// # Concurrency
//
// ABI is safe for concurrent use. Restrict applies to all threads of the
// calling process at once (go-landlock uses TSYNC on ABI 8+ and psx before
// that); it is meant for a single-purpose init process.
package landlock
