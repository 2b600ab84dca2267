// Package image is the docker backend's sandbox images. Each image (Names)
// can be built two ways: from its Dockerfile, embedded here
// (dockerfiles/NAME/Dockerfile, sent to the engine as BuildContext), or
// offline, with no registry at all, from the host's own files (Build, with
// the image's Recipe): the files of a few Debian packages (as dpkg lists
// them), every shared library they load (found by reading their ELF
// headers), a minimal /etc and the empty directories a sandbox mounts over.
// The result is a tar stream that the Engine API's image import turns into
// an image ("execbox image build python --offline").
//
// Files by phase: recipe.go (what an image holds), dpkg.go (a package's
// files), tree.go (paths and symlinks inside the tree), elf.go (shared
// libraries), build.go (the whole build), tar.go (the output).
//
// Invariant of every image: /bin/sh, /usr/bin/env, sleep, the user 65534
// and a /work directory owned by it — what the docker backend's keeper and
// exec wrapper need.
//
// Invariants of an offline build:
//   - Only regular files, directories and symlinks go into the tar; no
//     device, FIFO or socket, no setuid or setgid bit, every entry owned by
//     root except /work (65534:65534, the sandbox user).
//   - Paths are the host's real paths: on a merged-/usr host, /bin/dash is
//     stored as usr/bin/dash and bin is a symlink to usr/bin, as on the host.
//   - Documentation, manual pages and translations are left out.
//   - Building is deterministic for a given host state: entries are written
//     in path order.
//
// Concurrency: Recipe values are immutable; Build and BuildContext may run
// concurrently with themselves.
package image
