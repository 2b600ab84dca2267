// Package imagestore is execbox's own store of OCI images, below the
// engine: images pulled from any registry or imported from a file (a
// `docker save` tar or an OCI layout), kept as content-addressed blobs in
// an OCI image layout (layers shared between images) and unpacked, once,
// into a root a backend can mount (package layer, which treats every
// layer as hostile).
//
// # Layout
//
//	DIR/oci/           the OCI image layout: index.json names each image by
//	                   its reference (the ref.name annotation), blobs/sha256/…
//	DIR/roots/HEX/     the unpacked root of the image whose manifest digest
//	                   is sha256:HEX, complete once it has this name
//	DIR/roots/HEX.json its size on disk and what unpacking dropped
//	DIR/roots/.unpack-*  roots being unpacked (Prune removes leftovers)
//	DIR/.lock          held (flock) by whoever changes the store
//
// # Invariants
//
//   - Every digest is checked when an image is unpacked, whatever its
//     source: each compressed layer against the manifest, each
//     uncompressed layer against the config's diff ID. An image that fails
//     any check, or any rule of package layer, leaves nothing behind.
//   - The store (blobs and roots together) never exceeds Options.MaxBytes:
//     a pull or import whose blobs do not fit is refused before a byte is
//     fetched, and unpacking stops at what is left.
//   - A root, once renamed into place, is never written again; removing
//     the last reference of an image removes its root and the blobs no
//     other image uses.
//
// Errors are typed (sandbox.Errorf): ErrInvalid "image_ref_invalid",
// "image_layer_invalid", "image_digest_mismatch", "image_invalid";
// ErrLimit "image_quota", "image_too_large"; ErrNotFound "image_not_found";
// ErrUnavailable "image_pull_failed".
//
// # Concurrency
//
// A Store may be used from many goroutines and processes at once: changes
// are serialised by a lock on the directory.
package imagestore
