package cgroups

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// v2Controllers must all be usable for Open to pick v2.
var v2Controllers = []string{"memory", "pids", "cpu"}

// v1Controllers must all be mounted and writable for Open to pick v1;
// freezer first so a process is freezable from its first Add.
var v1Controllers = []string{"freezer", "pids", "memory", "cpu", "cpuacct"}

// daemonLeaf is where Open moves this process on v2 when its own cgroup
// must become an inner node.
const daemonLeaf = "execbox.daemon"

// Open detects the host's cgroup setup: v2 when its controllers are
// usable, else v1 when its hierarchies are mounted and writable, else
// "none" with a reason. It errs only when /proc cannot be read.
func Open() (*Manager, error) {
	mounts, err := readMountinfo("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("detecting cgroups: %w", err)
	}
	self, err := readSelfCgroup("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("detecting cgroups: %w", err)
	}
	return detect(mounts, self), nil
}

// detect picks the version from the mounts and this process's cgroups.
func detect(mounts []mountEntry, self map[string]string) *Manager {
	why2 := "cgroup v2: not mounted"
	if mnt, ok := findV2Mount(mounts); ok {
		base, err := v2Base(mnt, self)
		if err != nil {
			why2 = "cgroup v2: " + err.Error()
		} else if m, err := openV2(base); err != nil {
			why2 = "cgroup v2: " + err.Error()
		} else {
			m.v2mount = mnt.Point
			return m
		}
	}
	m, err := openV1(mounts)
	if err != nil {
		return &Manager{version: None, reason: why2 + "; cgroup v1: " + err.Error(), mech: map[string]string{}}
	}
	m.reason = why2 + "; using cgroup v1 (" + m.reason + ")"
	for _, e := range mounts {
		if e.FSType == "cgroup" {
			m.v1all = append(m.v1all, e.Point)
		}
	}
	return m
}

// openV2 checks that base offers the controllers and prepares it so
// children can use them.
func openV2(base string) (*Manager, error) {
	data, err := os.ReadFile(filepath.Join(base, "cgroup.controllers"))
	if err != nil {
		return nil, fmt.Errorf("reading controllers of %s: %w", base, err)
	}
	have := strings.Fields(string(data))
	var missing []string
	for _, c := range v2Controllers {
		if !slices.Contains(have, c) {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s lacks controllers %s (available: %q; on a hybrid host they are bound to v1 hierarchies)",
			base, strings.Join(missing, ", "), strings.Join(have, " "))
	}
	if err := unix.Access(base, unix.W_OK); err != nil {
		return nil, fmt.Errorf("%s is not writable (no delegation?): %w", base, err)
	}
	if err := enableV2(base); err != nil {
		return nil, err
	}
	m := &Manager{version: V2, v2base: base, v2ctrl: v2Controllers}
	if err := m.ensureParentV2(); err != nil {
		return nil, err
	}
	swap := fileExists(filepath.Join(base, parentName, "memory.swap.max"))
	m.mech = map[string]string{
		"memory": "cgroup v2 memory.max+memory.swap.max=0",
		"pids":   "cgroup v2 pids.max",
		"cpu":    "cgroup v2 cpu.max",
	}
	if !swap {
		m.mech["memory"] = "cgroup v2 memory.max (swap not limited: no memory.swap.max, swap accounting off)"
	}
	kill := "cgroup.kill"
	if !fileExists(filepath.Join(base, parentName, "cgroup.kill")) {
		kill = "cgroup.freeze + SIGKILL"
	}
	m.reason = fmt.Sprintf("cgroup v2 at %s with controllers %s; kill via %s", base, strings.Join(v2Controllers, ", "), kill)
	return m, nil
}

// enableV2 enables the controllers in base's subtree_control. If base holds
// processes (and is not the root), v2 refuses with EBUSY; then this
// process moves into a leaf of its own and tries again, and moves back if
// that does not help because other processes share the cgroup.
func enableV2(base string) error {
	err := enableControllers(base, v2Controllers)
	if err == nil || !errors.Is(err, unix.EBUSY) {
		return err
	}
	leaf := filepath.Join(base, daemonLeaf)
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("creating %s to leave the inner cgroup: %w", leaf, err)
	}
	pid := strconv.Itoa(os.Getpid())
	if err := writeFile(filepath.Join(leaf, "cgroup.procs"), pid); err != nil {
		return fmt.Errorf("moving this process out of %s: %w", base, err)
	}
	if err := enableControllers(base, v2Controllers); err != nil {
		_ = writeFile(filepath.Join(base, "cgroup.procs"), pid)
		_ = os.Remove(leaf)
		return fmt.Errorf("%s holds other processes; run execbox in a cgroup of its own (systemd Delegate=yes): %w", base, err)
	}
	return nil
}

// enableControllers adds ctrls to dir's cgroup.subtree_control when missing.
func enableControllers(dir string, ctrls []string) error {
	if len(ctrls) == 0 {
		return nil
	}
	p := filepath.Join(dir, "cgroup.subtree_control")
	data, err := os.ReadFile(p)
	if err != nil {
		return fmt.Errorf("reading %s: %w", p, err)
	}
	on := strings.Fields(string(data))
	var add []string
	for _, c := range ctrls {
		if !slices.Contains(on, c) {
			add = append(add, "+"+c)
		}
	}
	if len(add) == 0 {
		return nil
	}
	return writeFile(p, strings.Join(add, " "))
}

// ensureParentV2 creates <base>/execbox with the controllers enabled for
// its children.
func (m *Manager) ensureParentV2() error {
	parent := filepath.Join(m.v2base, parentName)
	if err := os.Mkdir(parent, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("creating cgroup parent: %w", err)
	}
	if err := enableControllers(parent, m.v2ctrl); err != nil {
		return fmt.Errorf("enabling controllers in cgroup parent: %w", err)
	}
	return nil
}

// openV1 finds the v1 hierarchies and checks they are writable.
func openV1(mounts []mountEntry) (*Manager, error) {
	m := &Manager{version: V1}
	for _, c := range v1Controllers {
		mnt, ok := findV1Mount(mounts, c)
		if !ok {
			return nil, fmt.Errorf("no hierarchy carries the %s controller", c)
		}
		i := slices.IndexFunc(m.v1, func(h hierarchy) bool { return h.mount == mnt })
		if i < 0 {
			if err := unix.Access(mnt, unix.W_OK); err != nil {
				return nil, fmt.Errorf("%s is not writable: %w", mnt, err)
			}
			m.v1 = append(m.v1, hierarchy{mount: mnt})
			i = len(m.v1) - 1
		}
		m.v1[i].controllers = append(m.v1[i].controllers, c)
	}
	mem := m.v1Dir("memory", "")
	m.mech = map[string]string{
		"memory": "cgroup v1 memory.limit_in_bytes+memsw",
		"pids":   "cgroup v1 pids.max",
		"cpu":    "cgroup v1 cpu.cfs_quota_us",
	}
	if !fileExists(filepath.Join(mem, "memory.memsw.limit_in_bytes")) {
		m.mech["memory"] = "cgroup v1 memory.limit_in_bytes (swap not limited: no memory.memsw.* files, swap accounting off)"
	}
	var hs []string
	for _, h := range m.v1 {
		hs = append(hs, h.mount)
	}
	m.reason = "hierarchies " + strings.Join(hs, ", ") + "; kill via freezer"
	return m, nil
}
