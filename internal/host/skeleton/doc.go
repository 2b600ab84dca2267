// Package skeleton builds a sandbox's root on the host for a runtime that
// mounts the rest itself (gVisor's runsc, bwrap): a small tmpfs holding
// the mount points of a hostview.View, its symlinks and its generated
// files — or, when the view's root is an image, an overlay of the image
// under that tmpfs, so what is made goes into the tmpfs and the image is
// never written.
//
// # Invariants
//
//   - Nothing is created or written through a symlink: directories are
//     made one component at a time and refuse one; a generated file
//     replaces what is there (an image's file or symlink, hidden by the
//     overlay) and is opened O_EXCL|O_NOFOLLOW. This runs as root in the
//     host's mount namespace, and an image's symlinks may name any host
//     path.
//   - The skeleton's mounts (the tmpfs, the overlay) are below root only;
//     workdir.RemoveTree removes them with it.
//
// # Concurrency
//
// Build writes only below its root; builds of different roots may run at
// once.
package skeleton
