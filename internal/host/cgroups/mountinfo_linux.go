package cgroups

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/execbox/execbox/internal/host/mountinfo"
)

// mountEntry is a mount of a cgroup hierarchy.
type mountEntry = mountinfo.Mount

// readMountinfo reads the cgroup mounts of a mountinfo file.
func readMountinfo(p string) ([]mountEntry, error) {
	all, err := mountinfo.Read(p)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(m mountEntry) bool { return m.FSType != "cgroup" && m.FSType != "cgroup2" }), nil
}

// readSelfCgroup parses /proc/self/cgroup into controller → path; the v2
// entry is under "".
func readSelfCgroup(p string) (map[string]string, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", p, err)
	}
	out := map[string]string{}
	for line := range strings.Lines(string(data)) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			out[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	return out, nil
}

// findV2Mount returns the first cgroup2 mount.
func findV2Mount(mounts []mountEntry) (mountEntry, bool) {
	for _, m := range mounts {
		if m.FSType == "cgroup2" {
			return m, true
		}
	}
	return mountEntry{}, false
}

// findV1Mount returns the mount point of the v1 hierarchy carrying controller.
func findV1Mount(mounts []mountEntry, controller string) (string, bool) {
	for _, m := range mounts {
		if m.FSType == "cgroup" && slices.Contains(m.Super, controller) {
			return m.Point, true
		}
	}
	return "", false
}

// v2Base is the directory of this process's v2 cgroup under mnt — or, when
// this process already sits in the daemon leaf Open made, its parent.
func v2Base(mnt mountEntry, self map[string]string) (string, error) {
	own, ok := self[""]
	if !ok {
		return "", fmt.Errorf("this process has no cgroup v2 entry in /proc/self/cgroup")
	}
	if strings.Contains(own, "/..") {
		return "", fmt.Errorf("own cgroup %s is outside this cgroup namespace", own)
	}
	rel, ok := strings.CutPrefix(path.Clean(own), path.Clean(mnt.Root))
	if !ok || (rel != "" && !strings.HasPrefix(rel, "/") && mnt.Root != "/") {
		return "", fmt.Errorf("own cgroup %s is outside the mount %s (root %s)", own, mnt.Point, mnt.Root)
	}
	if path.Base(rel) == daemonLeaf {
		rel = path.Dir(rel)
	}
	return filepath.Join(mnt.Point, rel), nil
}
