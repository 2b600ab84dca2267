package sandbox

import (
	"fmt"
	"slices"
	"sync"
)

// Settings are what a Factory gets to build its backend.
type Settings struct {
	// Decode fills v from this backend's section of the configuration (the
	// top-level key <name>, every layer applied); with no such section it
	// leaves v unchanged. v must have a field for every key of the section.
	Decode func(v any) error
	// StateDir is a directory the backend may keep state in.
	StateDir string
	// WorkRoot is where sandboxes make their work dirs on the host.
	WorkRoot string
	// Instance identifies this execbox process, for labelling what it owns.
	Instance string
	// Defaults are the configured default limits.
	Defaults Limits
}

// Factory builds a backend. It must be cheap: no probing (that is Health's job).
type Factory func(Settings) (Backend, error)

var (
	registryMu sync.RWMutex
	registry   = map[string]Factory{}
)

// Register makes a backend known by name. It panics on a duplicate name, as
// that is a programming error found at start-up.
func Register(name string, f Factory) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[name]; dup {
		panic(fmt.Sprintf("sandbox: backend %q registered twice", name))
	}
	registry[name] = f
}

// Lookup returns the factory registered under name.
func Lookup(name string) (Factory, bool) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	f, ok := registry[name]
	return f, ok
}

// Names lists the registered backends, sorted.
func Names() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
