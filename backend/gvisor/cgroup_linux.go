package gvisor

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/execbox/execbox/internal/cgroups"
)

// cgroupMounts lists the mount points of cgroup file systems: v1
// hierarchies (fstype "cgroup") or the v2 one ("cgroup2").
func cgroupMounts(fstype string) []string {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for line := range strings.Lines(string(data)) {
		_, post, ok := strings.Cut(line, " - ")
		f := strings.Fields(line)
		pf := strings.Fields(post)
		if !ok || len(f) < 5 || len(pf) < 1 || pf[0] != fstype {
			continue
		}
		out = append(out, unescapeMount(f[4]))
	}
	return out
}

// cgroupsPath is the path runsc is given (linux.cgroupsPath): the leaf
// relative to the root of its hierarchy. runsc joins the leaf wherever it
// exists and makes it (and later removes it) in the hierarchies it lacks.
func cgroupsPath(cg *cgroups.Cgroup, version string) string {
	d := cg.Dirs()[0]
	fstype := "cgroup"
	if version == cgroups.V2 {
		fstype = "cgroup2"
	}
	for _, mp := range cgroupMounts(fstype) {
		if rel, ok := strings.CutPrefix(d, mp+"/"); ok {
			return "/" + rel
		}
	}
	// Not found under a mount: the v1 layout internal/cgroups uses.
	return "/execbox/" + cg.Name()
}

// v1Hierarchies are the mount points of the v1 hierarchies. runsc makes
// leaves of its own in those internal/cgroups does not use (blkio, cpuset,
// devices, name=systemd, …).
func v1Hierarchies() []string { return cgroupMounts("cgroup") }

// removeExtra removes the leaf name runsc made in hierarchies, except the
// directories in own (the leaves internal/cgroups made); runsc removes
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
// hierarchy (internal/cgroups has killed their processes and removed its
// own leaves already).
func reconcileExtra(hierarchies []string) {
	for _, mp := range hierarchies {
		parent := filepath.Join(mp, "execbox")
		ents, err := os.ReadDir(parent)
		if err != nil {
			continue
		}
		for _, e := range ents {
			pid, ok := leafPID(e.Name())
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

// leafPID parses the daemon PID out of a leaf name execbox-<pid>-<id>.
func leafPID(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, "execbox-")
	if !ok {
		return 0, false
	}
	p, id, ok := strings.Cut(rest, "-")
	if !ok || id == "" {
		return 0, false
	}
	pid, err := strconv.Atoi(p)
	return pid, err == nil && pid > 0
}
