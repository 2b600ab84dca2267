package client

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies: a program that uses the Go client links the wire
// types, the contract's leaf packages and the standard library — never
// the engine, a backend, an internal package or a YAML decoder.
func TestDependencies(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("the go command is not on PATH: %v", err)
	}
	const mod = "github.com/execbox/execbox/"
	out, err := exec.Command(gobin, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}",
		mod+"client", mod+"api/v1").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	allowed := map[string]bool{mod + "client": true, mod + "api/v1": true, mod + "sandbox": true, mod + "errmap": true}
	var deps []string
	for _, p := range strings.Fields(string(out)) {
		deps = append(deps, p)
		if !allowed[p] {
			t.Errorf("client and api/v1 depend on %s; they may use only %v and the standard library", p, allowed)
		}
	}
	if len(deps) != len(allowed) {
		t.Errorf("dependencies %v; want exactly %v", deps, allowed)
	}
}
