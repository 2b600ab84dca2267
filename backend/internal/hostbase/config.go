package hostbase

import (
	"context"
	"time"

	"github.com/execbox/execbox/sandbox"
)

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
