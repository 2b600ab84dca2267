// Package cleanup undoes a multi-step setup when a later step fails, in
// the style of gVisor's pkg/cleanup:
//
//	cu := cleanup.Make(func() { os.RemoveAll(dir) })
//	defer cu.Clean()
//	if err := mount(…); err != nil {
//		return err // dir is removed
//	}
//	cu.Add(func() { unmount(…) })
//	…
//	cu.Release() // success: keep everything
//
// Invariants: Clean runs every function added since the last Release,
// newest first, exactly once; after Release, Clean does nothing.
//
// Concurrency: a Cleanup belongs to the one goroutine doing the setup; it
// is not safe for concurrent use.
package cleanup
