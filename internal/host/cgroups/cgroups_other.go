//go:build !linux

package cgroups

import (
	"runtime"

	"github.com/execbox/execbox/sandbox"
)

// Manager reports "none" off Linux.
type Manager struct{}

// Cgroup cannot be created off Linux.
type Cgroup struct{}

var errNoCgroups = sandbox.Errorf(sandbox.ErrUnavailable, "cgroups_unavailable", "cgroups exist only on Linux, not %s", runtime.GOOS)

// Open reports that there are no cgroups.
func Open() (*Manager, error) { return &Manager{}, nil }

func (m *Manager) Version() string                        { return None }
func (m *Manager) Reason() string                         { return "cgroups exist only on Linux, not " + runtime.GOOS }
func (m *Manager) Mechanisms() map[string]string          { return map[string]string{} }
func (m *Manager) Create(string, Limits) (*Cgroup, error) { return nil, errNoCgroups }
func (m *Manager) Reconcile() ([]string, error)           { return nil, nil }
func (m *Manager) Hierarchies() []string                  { return nil }

func (c *Cgroup) Name() string           { return "" }
func (c *Cgroup) Dirs() []string         { return nil }
func (c *Cgroup) Path() string           { return "" }
func (c *Cgroup) Procs() ([]int, error)  { return nil, errNoCgroups }
func (c *Cgroup) Memory() (int64, error) { return 0, errNoCgroups }
func (c *Cgroup) FD() (int, bool)        { return -1, false }
func (c *Cgroup) Add(int) error          { return errNoCgroups }
func (c *Cgroup) Stats() (Stats, error)  { return Stats{}, errNoCgroups }
func (c *Cgroup) Kill() error            { return nil }
func (c *Cgroup) Close() error           { return nil }
