package hostbase

import (
	"context"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// Register makes backend name known to the sandbox package, with its
// configuration section (def's type and built-in values), and returns the
// backend's New: it takes the section from the settings (def() when they
// have none), validates it — an invalid one is ErrInvalid "config_invalid"
// naming the key at fault — and builds the backend with build, which
// must be cheap (the host is looked at on first use). Call it from a
// package variable's initialiser.
func Register[C any, P interface {
	*C
	Validate() error
}](name string, def func() P, build func(C, sandbox.Settings) sandbox.Backend) func(sandbox.Settings) (sandbox.Backend, error) {
	newB := func(s sandbox.Settings) (sandbox.Backend, error) {
		c := sandbox.ConfigOf(s, func() *C { return def() })
		if err := P(c).Validate(); err != nil {
			return nil, sandbox.Errorf(sandbox.ErrInvalid, "config_invalid", "%w", err)
		}
		return build(*c, s), nil
	}
	sandbox.Register(sandbox.Registration{Name: name, New: newB, Config: func() any { return def() }})
	return newB
}

// Unsupported is a backend on an OS it cannot work on: Health and Create
// say why.
type Unsupported struct {
	name string
	iso  sandbox.Isolation
	err  error
}

// NewUnsupported returns backend name of isolation iso that fails with err.
func NewUnsupported(name string, iso sandbox.Isolation, err error) *Unsupported {
	return &Unsupported{name: name, iso: iso, err: err}
}

func (u *Unsupported) Name() string { return u.name }

func (u *Unsupported) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{Isolation: u.iso, Sessions: true}
}

func (u *Unsupported) Health(ctx context.Context) sandbox.Health {
	return sandbox.Health{Reason: u.err.Error(), CheckedAt: time.Now()}
}

func (u *Unsupported) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	return nil, u.err
}

// Interface guards.
var _ sandbox.Backend = (*Unsupported)(nil)
