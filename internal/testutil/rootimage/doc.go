// Package rootimage makes, for tests, an unpacked image of this host's
// files: what execbox's image store hands a backend as Spec.Root.
package rootimage
