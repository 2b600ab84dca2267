// Package layer unpacks an image's layers (tar streams, uncompressed) into
// a root directory, treating every layer as hostile input.
//
// # Invariants
//
//   - Nothing is written outside the root: every path is resolved inside
//     it as openat2(RESOLVE_IN_ROOT) does, so `..`, absolute names and
//     symlinks, however they point, end inside the root; the last
//     component is never followed (it is replaced, as tar replaces). Names
//     with a `..` component are refused outright.
//   - A hard link's target is an existing regular file inside the root.
//   - Only directories, regular files, symlinks and hard links are made.
//     Device nodes, FIFOs and sockets are dropped (counted in Stats).
//     setuid and setgid bits are cleared (counted); extended attributes,
//     file capabilities among them, are never set. Every entry is owned by
//     the unpacking user: an image's owners are not kept.
//   - Whiteouts (.wh.NAME) remove NAME of lower layers; an opaque marker
//     (.wh..wh..opq) removes what lower layers put in its directory.
//   - Limits bound the tar bytes read (file data, headers and padding:
//     what a compression bomb inflates to), what is written (file sizes, a
//     sparse file's holes included, and a block for each directory made
//     for a deeper name) and the entries (those directories included) of
//     all layers together; a file larger than what is left is refused
//     before a byte of it is written.
//   - A whiteout never names "." or "..", and nothing is ever removed
//     but by name inside a directory opened in the root.
//
// Errors are sandbox.ErrInvalid "image_layer_invalid" for a layer that
// breaks a rule and sandbox.ErrLimit "image_too_large" for a bound.
//
// # Concurrency
//
// A Root is used by one goroutine; nothing else may write its directory
// while layers are applied.
package layer
