package gvisor

import (
	"errors"
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/execbox/execbox/internal/host/cgroups"
)

// runsc is given a sandbox cgroup's Path (linux.cgroupsPath): it joins the
// leaf wherever it exists and makes it (and later removes it) in the v1
// hierarchies execbox does not use (blkio, cpuset, devices, name=systemd,
// …), which Host.Cgroups.Hierarchies lists.

// removeExtra removes the leaf name runsc made in hierarchies, except the
// directories in own (the leaves internal/host/cgroups made); runsc removes
// them itself unless it was killed. Only empty directories can be removed.
func removeExtra(hierarchies []string, name string, own ...string) {
	for _, mp := range hierarchies {
		d := filepath.Join(mp, "execbox", name)
		if slices.Contains(own, d) {
			continue
		}
		_ = unix.Rmdir(d)
	}
}

// reconcileExtra removes leaves of dead execbox processes from every v1
// hierarchy (internal/host/cgroups has killed their processes and removed its
// own leaves already).
func reconcileExtra(hierarchies []string) {
	for _, mp := range hierarchies {
		parent := filepath.Join(mp, "execbox")
		ents, err := os.ReadDir(parent)
		if err != nil {
			continue
		}
		for _, e := range ents {
			pid, ok := cgroups.LeafOwner(e.Name())
			if !ok || pid == os.Getpid() {
				continue
			}
			if err := unix.Kill(pid, 0); err == nil || errors.Is(err, unix.EPERM) {
				continue
			}
			_ = unix.Rmdir(filepath.Join(parent, e.Name()))
		}
	}
}
