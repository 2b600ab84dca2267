package cgroups

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/execbox/execbox/sandbox"
)

// Manager knows where this host keeps cgroups and makes them.
type Manager struct {
	version string
	reason  string
	mech    map[string]string

	// v2: the delegated cgroup leaves are made under, and which of the
	// controllers it can enable for them.
	v2base  string
	v2ctrl  []string
	v2mount string // where the v2 hierarchy is mounted

	// v1: one entry per hierarchy, freezer's first; every v1 hierarchy's
	// mount point, those not used here included.
	v1    []hierarchy
	v1all []string
}

// hierarchy is one mounted v1 hierarchy and the controllers it carries
// that this package uses.
type hierarchy struct {
	mount       string
	controllers []string
}

// v1Dir is the directory of leaf name in the hierarchy carrying
// controller, or that hierarchy's mount point when name is "".
func (m *Manager) v1Dir(controller, name string) string {
	for _, h := range m.v1 {
		if slices.Contains(h.controllers, controller) {
			if name == "" {
				return h.mount
			}
			return filepath.Join(h.mount, parentName, name)
		}
	}
	return ""
}

// Version is "v2", "v1" or "none".
func (m *Manager) Version() string { return m.version }

// Reason says why this version was chosen, or why there is none.
func (m *Manager) Reason() string { return m.reason }

// Mechanisms maps each enforceable limit ("memory", "pids", "cpu") to what
// enforces it; limits that cannot be enforced are absent.
func (m *Manager) Mechanisms() map[string]string {
	out := make(map[string]string, len(m.mech))
	for k, v := range m.mech {
		out[k] = v
	}
	return out
}

// Hierarchies are the mount points of every v1 hierarchy, those this
// package does not use included (an OCI runtime given a leaf's Path makes
// leaves of that name in them); nil unless the version is v1.
func (m *Manager) Hierarchies() []string {
	if m.version != V1 {
		return nil
	}
	return slices.Clone(m.v1all)
}

// parents are the directories leaves are made in: one per v1 hierarchy,
// or the one v2 parent.
func (m *Manager) parents() []string {
	switch m.version {
	case V2:
		return []string{filepath.Join(m.v2base, parentName)}
	case V1:
		var out []string
		for _, h := range m.v1 {
			out = append(out, filepath.Join(h.mount, parentName))
		}
		return out
	}
	return nil
}

// Leaves lists the leaf directories of the cgroups process pid made
// (execbox-<pid>-*), in every hierarchy this host uses: where a leak
// check looks, wherever the parent is (below the process's own cgroup on
// a v2 host under systemd).
func (m *Manager) Leaves(pid int) []string {
	var out []string
	for _, p := range m.parents() {
		found, _ := filepath.Glob(filepath.Join(p, fmt.Sprintf("execbox-%d-*", pid)))
		out = append(out, found...)
	}
	return out
}

// Create makes the cgroup execbox-<pid>-<id> under the "execbox" parent
// and applies l.
func (m *Manager) Create(id string, l Limits) (*Cgroup, error) {
	if m.version == None {
		return nil, sandbox.Errorf(sandbox.ErrUnavailable, "cgroups_unavailable", "creating cgroup: no usable cgroups: %s", m.reason)
	}
	if !validID(id) {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "cgroup_id_invalid", "creating cgroup: id %q must be 1-128 of [A-Za-z0-9_.-]", id)
	}
	if err := l.Validate(); err != nil {
		return nil, err
	}
	return m.create(leafName(os.Getpid(), id), l)
}

// create makes leaf name; Create and tests use it. It never touches a
// leaf that exists already: that one belongs to a live Cgroup or is a
// leftover for Reconcile.
func (m *Manager) create(name string, l Limits) (*Cgroup, error) {
	if !claim(name) {
		return nil, sandbox.Errorf(sandbox.ErrBusy, "cgroup_exists", "creating cgroup %s: in use", name)
	}
	c := m.attach(name)
	for _, d := range c.dirs {
		if fileExists(d) {
			setLive(name, false)
			return nil, fmt.Errorf("creating cgroup %s: %s exists (a leftover? Reconcile removes it)", name, d)
		}
	}
	var err error
	if m.version == V2 {
		err = c.createV2(l)
	} else {
		err = c.createV1(l)
	}
	if err != nil {
		_ = c.remove()
		setLive(name, false)
		return nil, fmt.Errorf("creating cgroup %s: %w", name, err)
	}
	return c, nil
}

// mkdirLeaf makes parent/name, making the parent when missing. It retries
// when the parent vanishes in between (another process removing an empty
// parent).
func mkdirLeaf(dir string, ensureParent func() error) error {
	var err error
	for range 3 {
		if err = ensureParent(); err != nil {
			return err
		}
		if err = os.Mkdir(dir, 0o755); !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return err
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// writeFile writes s to an existing cgroup file.
func writeFile(p, s string) error {
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(s)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %q to %s: %w", s, p, err)
	}
	return nil
}
