// Package image builds sandbox root filesystems for the docker backend with
// no registry at all, from the host's own files: the files of a few Debian
// packages (as dpkg lists them), every shared library they load (found by
// reading their ELF headers), a minimal /etc and the empty directories a
// sandbox mounts over. The result is a tar stream that the Engine API's image
// import turns into an image ("execbox image build python --offline").
//
// Invariants:
//   - Only regular files, directories and symlinks go into the tar; no
//     device, FIFO or socket, no setuid or setgid bit, every entry owned by
//     root except /work (65534:65534, the sandbox user).
//   - Paths are the host's real paths: on a merged-/usr host, /bin/dash is
//     stored as usr/bin/dash and bin is a symlink to usr/bin, as on the host.
//   - Documentation, manual pages and translations are left out.
//   - Building is deterministic for a given host state: entries are written
//     in path order.
//
// Concurrency: Recipe values are immutable; Build may run concurrently with
// itself.
package image
