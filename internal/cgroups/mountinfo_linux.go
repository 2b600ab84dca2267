package cgroups

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// mountEntry is the part of a /proc/self/mountinfo line this package needs.
type mountEntry struct {
	root   string   // path inside the filesystem that is mounted
	point  string   // where it is mounted
	fstype string   // "cgroup" or "cgroup2" for us
	super  []string // super options; a v1 hierarchy's controllers are here
}

// readMountinfo parses the cgroup mounts of a mountinfo file.
func readMountinfo(p string) ([]mountEntry, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", p, err)
	}
	var out []mountEntry
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		sep := slices.Index(f, "-")
		if sep < 6 || len(f) < sep+4 {
			continue
		}
		fstype := f[sep+1]
		if fstype != "cgroup" && fstype != "cgroup2" {
			continue
		}
		out = append(out, mountEntry{
			root:   unescape(f[3]),
			point:  unescape(f[4]),
			fstype: fstype,
			super:  strings.Split(f[sep+3], ","),
		})
	}
	return out, nil
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
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
		if m.fstype == "cgroup2" {
			return m, true
		}
	}
	return mountEntry{}, false
}

// findV1Mount returns the mount point of the v1 hierarchy carrying controller.
func findV1Mount(mounts []mountEntry, controller string) (string, bool) {
	for _, m := range mounts {
		if m.fstype == "cgroup" && slices.Contains(m.super, controller) {
			return m.point, true
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
	rel, ok := strings.CutPrefix(path.Clean(own), path.Clean(mnt.root))
	if !ok || (rel != "" && !strings.HasPrefix(rel, "/") && mnt.root != "/") {
		return "", fmt.Errorf("own cgroup %s is outside the mount %s (root %s)", own, mnt.point, mnt.root)
	}
	if path.Base(rel) == daemonLeaf {
		rel = path.Dir(rel)
	}
	return filepath.Join(mnt.point, rel), nil
}
