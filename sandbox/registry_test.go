package sandbox

import (
	"context"
	"errors"
	"testing"
)

// named is the smallest Backend: a name, nothing to run.
type named struct{ name string }

func (n named) Name() string                                  { return n.name }
func (n named) Capabilities() Capabilities                    { return Capabilities{} }
func (n named) Health(context.Context) Health                 { return Health{} }
func (n named) Create(context.Context, Spec) (Sandbox, error) { return nil, ErrUnavailable }

type sizeConfig struct{ Size int }

func (c *sizeConfig) Validate() error {
	if c.Size < 0 {
		return errors.New("test.size: negative")
	}
	return nil
}

// The backend Define makes known is built from its validated section (its
// built-in value when the settings hold none); one without a section has
// no Config.
var (
	defined = Define("define-test", func() *sizeConfig { return &sizeConfig{Size: 1} }, func(c sizeConfig, _ Settings) (Backend, error) {
		if c.Size == 0 {
			return nil, Errorf(ErrUnavailable, "size_zero", "size 0")
		}
		return named{"define-test"}, nil
	})
	bare = Define[struct{}]("define-test-bare", nil, func(struct{}, Settings) (Backend, error) { return named{"bare"}, nil })
)

func TestDefine(t *testing.T) {
	if _, err := defined(Settings{Config: &sizeConfig{Size: -1}}); CodeOf(err) != "config_invalid" {
		t.Errorf("an invalid section: %v, want config_invalid", err)
	}
	if _, err := defined(Settings{Config: &sizeConfig{Size: 0}}); CodeOf(err) != "size_zero" {
		t.Errorf("build's error: %v, want it passed on", err)
	}
	if b, err := defined(Settings{}); err != nil || b.Name() != "define-test" {
		t.Errorf("New with no section: %v %v, want the built-in one", b, err)
	}
	if r, ok := Lookup("define-test"); !ok || r.Config().(*sizeConfig).Size != 1 {
		t.Error("not registered with its section")
	}
	if r, ok := Lookup("define-test-bare"); !ok || r.Config != nil {
		t.Errorf("a backend without a section: %+v %v", r, ok)
	}
	if b, err := bare(Settings{}); err != nil || b.Name() != "bare" {
		t.Errorf("New of a backend without a section: %v %v", b, err)
	}
}
