// Package hostfs manages a sandbox's work dir on the host: writing input
// files into it and collecting artifacts out of it, without ever following
// a symlink the sandboxed program may have planted.
//
// Every path is resolved by the kernel with openat2(RESOLVE_BENEATH |
// RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS) from a directory fd, so a
// symlink anywhere on the way — even one created between a check and a use —
// makes the operation fail instead of escaping the work dir.
//
// A WorkDir is used by one goroutine at a time. It is only safe to Collect
// while no sandboxed process runs (after Exec), since a running program
// could change files mid-read; sizes are still bounded then.
package hostfs
