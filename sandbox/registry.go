package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
)

// Registration makes a backend known: its name, its configuration section
// and how to build it. Backends register in an init function.
type Registration struct {
	// Name is the backend's name and the key of its configuration section.
	Name string
	// Config returns a new value of the backend's configuration: a pointer
	// to a struct whose fields (with yaml tags, as the configuration's
	// other sections) are the keys of the section, set to their defaults.
	// The value may implement Validate() error, which the configuration
	// loader calls; its errors name the key ("docker.image: …"). nil means
	// the backend has no section.
	Config func() any
	// New builds the backend. It must be cheap: no probing (that is
	// Health's job).
	New func(Settings) (Backend, error)
}

// Settings are what a Registration's New gets to build its backend.
type Settings struct {
	// Config is the backend's section, every configuration layer applied:
	// a value Registration.Config made. nil means the defaults.
	Config any
	// StateDir is a directory the backend may keep state in.
	StateDir string
	// WorkRoot is where sandboxes make their work dirs on the host.
	WorkRoot string
	// Instance identifies this execbox process, for labelling what it owns.
	Instance string
	// Defaults are the configured default limits; zero means Defaults.
	Defaults Limits
}

// ConfigOf returns s.Config as a *T, or def() when it is nil. A value of
// another type is a programming error and panics.
func ConfigOf[T any](s Settings, def func() *T) *T {
	if s.Config == nil {
		return def()
	}
	return s.Config.(*T)
}

// Root returns s.WorkRoot, or DefaultWorkRoot() when it is empty.
func (s Settings) Root() string {
	if s.WorkRoot == "" {
		return DefaultWorkRoot()
	}
	return s.WorkRoot
}

// DefaultWorkRoot is the work root when none is configured: a directory
// only execbox controls, never one in a world-writable directory another
// user could plant first. As root it is /run/execbox; otherwise
// $XDG_RUNTIME_DIR/execbox (a private per-user directory the session
// manager made), or, without one, os.TempDir()/execbox-<uid>, which
// execbox creates 0711 and refuses to use when another user got there
// first (see internal/host/workdir).
func DefaultWorkRoot() string {
	uid := os.Geteuid()
	if uid == 0 {
		return "/run/execbox"
	}
	if x := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(x) {
		return filepath.Join(x, "execbox")
	}
	return filepath.Join(os.TempDir(), "execbox-"+strconv.Itoa(uid))
}

// DefaultLimits returns s.Defaults, or Defaults when it is zero.
func (s Settings) DefaultLimits() Limits {
	if s.Defaults == (Limits{}) {
		return Defaults
	}
	return s.Defaults
}

var (
	registryMu sync.RWMutex
	registry   = map[string]Registration{}
)

// Define registers backend name, whose configuration section is a C (def
// returns one set to its built-in values; nil: the backend has none), and
// returns the backend's New: it takes the section from the settings (def()
// when they have none), validates it when it has a Validate method (an
// invalid one is ErrInvalid "config_invalid" naming the key at fault) and
// builds the backend with build, which must be cheap (no probing: that is
// Health's job). Every backend registers so, from a package variable's
// initialiser.
func Define[C any](name string, def func() *C, build func(C, Settings) (Backend, error)) func(Settings) (Backend, error) {
	newB := func(s Settings) (Backend, error) {
		var c C
		if def != nil {
			c = *ConfigOf(s, def)
			if v, ok := any(&c).(interface{ Validate() error }); ok {
				if err := v.Validate(); err != nil {
					return nil, Errorf(ErrInvalid, "config_invalid", "%w", err)
				}
			}
		}
		return build(c, s)
	}
	r := Registration{Name: name, New: newB}
	if def != nil {
		r.Config = func() any { return def() }
	}
	Register(r)
	return newB
}

// Register makes a backend known. It panics on a duplicate or empty name
// or a missing New, as those are programming errors found at start-up.
func Register(r Registration) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if r.Name == "" || r.New == nil {
		panic(fmt.Sprintf("sandbox: registration %q lacks a name or New", r.Name))
	}
	if _, dup := registry[r.Name]; dup {
		panic(fmt.Sprintf("sandbox: backend %q registered twice", r.Name))
	}
	registry[r.Name] = r
}

// Lookup returns the registration of name.
func Lookup(name string) (Registration, bool) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	r, ok := registry[name]
	return r, ok
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
