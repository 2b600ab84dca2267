package bwrap

import (
	"testing"

	"github.com/execbox/execbox/sandbox"
	"github.com/execbox/execbox/sandbox/sandboxtest"
)

func TestConformance(t *testing.T) {
	b := newBackend(t)
	sandboxtest.Run(t, b, sandboxtest.WithWorkRoot(b.WorkRoot()))
}

// The backend registers itself, and a backend built through the registry
// from configuration (as the engine builds it) runs Python with no flags.
func TestRegistered(t *testing.T) {
	newBackend(t)
	r, ok := sandbox.Lookup(Name)
	if !ok {
		t.Fatal("bwrap is not registered")
	}
	b, err := r.New(sandbox.Settings{WorkRoot: workRoot(t), Config: &Config{Path: "/usr/bin/bwrap"}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := sandbox.Run(t.Context(), b, sandbox.Spec{}, &sandbox.Process{Args: []string{"python3", "-c", "print(1)"}})
	if err != nil || !res.Succeeded() || res.Stdout != "1\n" || res.Backend != Name || res.Isolation != sandbox.IsolationProcess {
		t.Fatalf("python3 -c 'print(1)': %v %+v", err, res)
	}
}
