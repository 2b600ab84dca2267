package cgroups

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"

	"golang.org/x/sys/unix"
)

// live holds the leaves this process created and has not closed, so
// Reconcile can tell them from a previous daemon's with the same PID.
var live struct {
	sync.Mutex
	names map[string]bool
}

func setLive(name string, on bool) {
	live.Lock()
	defer live.Unlock()
	if live.names == nil {
		live.names = map[string]bool{}
	}
	if on {
		live.names[name] = true
	} else {
		delete(live.names, name)
	}
}

// claim marks name live unless it already is.
func claim(name string) bool {
	live.Lock()
	defer live.Unlock()
	if live.names == nil {
		live.names = map[string]bool{}
	}
	if live.names[name] {
		return false
	}
	live.names[name] = true
	return true
}

func isLive(name string) bool {
	live.Lock()
	defer live.Unlock()
	return live.names[name]
}

// Reconcile kills and removes leaves left by dead daemons: those whose
// <pid> is not a live process, and those with this process's PID that it
// did not create. It returns the names it removed.
func (m *Manager) Reconcile() (removed []string, err error) {
	seen := map[string]bool{}
	var names []string
	for _, p := range m.parents() {
		ents, rerr := os.ReadDir(p)
		if rerr != nil {
			if !errors.Is(rerr, os.ErrNotExist) {
				err = errors.Join(err, fmt.Errorf("reconciling cgroups: %w", rerr))
			}
			continue
		}
		for _, e := range ents {
			if e.IsDir() && !seen[e.Name()] {
				seen[e.Name()] = true
				names = append(names, e.Name())
			}
		}
	}
	slices.Sort(names)
	for _, name := range names {
		pid, ok := LeafOwner(name)
		if !ok || !stale(name, pid) {
			continue
		}
		if cerr := m.attach(name).Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("reconciling cgroups: %w", cerr))
			continue
		}
		removed = append(removed, name)
	}
	return removed, err
}

// stale reports whether leaf name, made by daemon pid, has no owner.
func stale(name string, pid int) bool {
	if pid == os.Getpid() {
		return !isLive(name)
	}
	err := unix.Kill(pid, 0)
	return err != nil && !errors.Is(err, unix.EPERM)
}
