// Package workroot manages a backend's work root: the directory under
// which each execbox process keeps its own base directory, named
// <pid>.<rand> and created 0711, holding that process's sandbox dirs.
//
// Invariants:
//   - Reconcile removes a base only when its process is dead, or when it
//     carries this process's PID but no Dir of this process owns it (a
//     previous process with the same PID, as PID 1 in a container).
//   - Before removing a tree, every mount at or below it is detached,
//     deepest first, and RemoveTree refuses while any mount is left, so a
//     writable host bind is never emptied by a recursive remove.
//   - Close removes only this Dir's base, and the work root only when it
//     is empty (another process may be using it).
//
// Concurrency: the set of live bases is process-wide and safe for
// concurrent use, so several Dirs (one per backend) may share a work root;
// a single Dir is closed once, after every sandbox under it is closed.
package workroot
