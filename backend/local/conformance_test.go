package local

import (
	"testing"

	"github.com/execbox/execbox/sandbox"
	"github.com/execbox/execbox/sandbox/sandboxtest"
)

func TestConformance(t *testing.T) {
	root := t.TempDir()
	b, err := New(sandbox.Settings{WorkRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	sandboxtest.Run(t, b, sandboxtest.WithWorkRoot(root))
}
