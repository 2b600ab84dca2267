// Package registry starts the distribution registry (the real one, from
// the Go module proxy, its storage in memory) on loopback for tests, and
// pushes images to it.
package registry
