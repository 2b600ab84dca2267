package engine

import (
	"context"
	"maps"
	"testing"

	"github.com/execbox/execbox/sandbox"
)

// rootCapture is capture with Capabilities.RootImages.
type rootCapture struct{ capture }

func (*rootCapture) Name() string { return "t-rootcap" }
func (*rootCapture) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{Isolation: sandbox.IsolationProcess, Sessions: true, RootImages: true}
}

var rootCaptured = &rootCapture{}

// imageCapture is capture with images of its own (as docker's).
type imageCapture struct{ capture }

func (*imageCapture) Name() string { return "t-imgcap" }
func (*imageCapture) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{Isolation: sandbox.IsolationProcess, Sessions: true, Images: true}
}

var imageCaptured = &imageCapture{}

func init() {
	sandbox.Register(sandbox.Registration{Name: "t-rootcap", New: func(sandbox.Settings) (sandbox.Backend, error) { return rootCaptured, nil }})
	sandbox.Register(sandbox.Registration{Name: "t-imgcap", New: func(sandbox.Settings) (sandbox.Backend, error) { return imageCaptured, nil }})
}

// TestImagesOfTheStore: an image of the store reaches a backend that
// mounts such images as Spec.Root, its variables under the call's own
// (HOME and TMPDIR the contract's), by every way in; a backend that
// cannot mount one, an image neither in the store nor listed, and a store
// that fails are refused before a sandbox is made; and only the engine
// sets Root.
func TestImagesOfTheStore(t *testing.T) {
	roots := func(ref string) (*sandbox.RootImage, error) {
		switch ref {
		case "store/img:1":
			return &sandbox.RootImage{Ref: ref, Dir: "/store/roots/abc", Env: []string{"PATH=/img/bin", "HOME=/root", "TMPDIR=/var/tmp", "IMG=1", "CALL=image"}}, nil
		case "broken:1", "broken:2":
			return nil, sandbox.Errorf(sandbox.ErrInvalid, "image_digest_mismatch", "broken")
		case "docker/listed:1":
			return &sandbox.RootImage{Ref: ref, Dir: "/store/roots/def"}, nil
		}
		return nil, sandbox.Errorf(sandbox.ErrNotFound, "image_not_found", "no image %s", ref)
	}
	e, err := New(Options{Backends: []string{"t-rootcap", "t-capture", "t-imgcap"}, Backend: "t-rootcap", Roots: roots, Images: []string{"docker/listed:1", "broken:2"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	ways := map[string]func(sel sandbox.Selection, spec sandbox.Spec) error{
		"Run": func(sel sandbox.Selection, spec sandbox.Spec) error {
			_, err := e.Run(context.Background(), sel, spec, &sandbox.Process{Args: []string{"true"}})
			return err
		},
		"Create": func(sel sandbox.Selection, spec sandbox.Spec) error {
			sb, err := e.Create(context.Background(), sel, spec)
			if err == nil {
				sb.Close(context.Background())
			}
			return err
		},
		"OpenSession": func(sel sandbox.Selection, spec sandbox.Spec) error {
			s, err := e.OpenSession(context.Background(), Owner{}, SessionRequest{Selection: sel, Spec: spec})
			if err == nil {
				e.CloseSession(context.Background(), Owner{}, s.ID())
			}
			return err
		},
	}
	for way, do := range ways {
		call := map[string]string{"CALL": "call"}
		if err := do(sandbox.Selection{}, sandbox.Spec{Image: "store/img:1", Env: call}); err != nil {
			t.Fatalf("%s: %v", way, err)
		}
		got := rootCaptured.last()
		if got.Root == nil || got.Root.Dir != "/store/roots/abc" {
			t.Fatalf("%s: the backend got Root %+v", way, got.Root)
		}
		want := map[string]string{"PATH": "/img/bin", "IMG": "1", "CALL": "call"}
		if !maps.Equal(got.Env, want) || !maps.Equal(call, map[string]string{"CALL": "call"}) {
			t.Fatalf("%s: env %v, want %v (and the call's map untouched: %v)", way, got.Env, want, call)
		}
		before := len(rootCaptured.specs) + len(captured.specs)
		for _, c := range []struct {
			sel   sandbox.Selection
			image string
			code  string
		}{
			{sandbox.Selection{Backend: "t-capture"}, "store/img:1", "image_unsupported"},
			{sandbox.Selection{}, "other:1", "image_denied"},
			{sandbox.Selection{}, "broken:1", "image_digest_mismatch"},
		} {
			if err := do(c.sel, sandbox.Spec{Image: c.image}); sandbox.CodeOf(err) != c.code {
				t.Errorf("%s with image %s on %q: %v, want %s", way, c.image, c.sel.Backend, err, c.code)
			}
		}
		if n := len(rootCaptured.specs) + len(captured.specs) - before; n != 0 {
			t.Errorf("%s: %d sandboxes made for refused images", way, n)
		}
		// An image listed for a backend of its own images goes there by
		// name, whether the store has it too or cannot say.
		for _, image := range []string{"docker/listed:1", "broken:2"} {
			if err := do(sandbox.Selection{Backend: "t-imgcap"}, sandbox.Spec{Image: image}); err != nil {
				t.Errorf("%s with the listed image %s on a backend of images: %v", way, image, err)
			} else if got := imageCaptured.last(); got.Image != image {
				t.Errorf("%s: the backend got image %q, want %q", way, got.Image, image)
			}
		}
		// A Root the caller set is not the engine's: it never reaches a backend.
		if err := do(sandbox.Selection{}, sandbox.Spec{Root: &sandbox.RootImage{Dir: "/etc"}}); err != nil {
			t.Fatal(err)
		}
		if got := rootCaptured.last(); got.Root != nil || got.Env["IMG"] != "" {
			t.Fatalf("%s: a caller's Root reached the backend: %+v", way, got.Root)
		}
	}
}
