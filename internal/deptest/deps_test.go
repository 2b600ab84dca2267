package deptest

import (
	"slices"
	"strings"
	"testing"
)

// The layering rules (docs/design.md §Layout). Each one fails the moment a
// forbidden import appears anywhere below the package.
var rules = []Rule{
	// The contract is a leaf: a library user gets it and nothing else.
	{Package: "sandbox", OnlyStd: true},
	// So are the events, which the wire carries as they are.
	{Package: "event", OnlyStd: true},
	{Package: "errmap", OnlyStd: true, Allow: []string{"sandbox"}},
	// The wire and the Go client: a user of the client gets neither the
	// engine, nor a backend, nor anything internal, nor yaml.
	{Package: "api/v1", OnlyStd: true, Allow: []string{"sandbox", "errmap", "event"}},
	{Package: "client", OnlyStd: true, Allow: []string{"sandbox", "errmap", "api/v1", "event"}},
	// The engine selects among registered backends; it links none of them,
	// and no transport. It knows nothing of functions or tools: those run
	// through it (Engine.Call, Engine.Run), not the other way up.
	{Package: "engine", Deny: []string{"backend/...", "api/...", "client", "internal/...", "function", "tool", "go.yaml.in/..."}},
	// The function protocol runs through an Engine it is handed.
	{Package: "function", Deny: []string{"engine", "backend/...", "internal/...", "api/...", "client"}},
	// So do the tools, through a RunFunc they are handed; their argument
	// schemas are checked with jsonschema-go.
	{Package: "tool", OnlyStd: true, Allow: []string{"sandbox", "github.com/google/jsonschema-go/..."}},
	// A session's agent runs in any sandbox it is handed.
	{Package: "agent", OnlyStd: true, Allow: []string{"sandbox", "golang.org/x/sys/..."}},
	// internal/ has two floors. The host's mechanisms, which backends stand
	// on, know nothing of the engine, a backend or the daemon above them.
	{Package: "internal/host/...", Deny: []string{"internal/daemon/...", "engine", "backend/...", "function", "tool", "agent",
		"api/...", "client", "go.yaml.in/...", "modernc.org/...", "github.com/prometheus/..."}},
	// The configuration knows backends only through their registrations.
	{Package: "internal/daemon/config", Deny: []string{"backend/...", "engine", "internal/daemon/server"}},
	// The native backend's init helper runs in every sandbox: small, and
	// without a network stack, a database or a container client to offer.
	{Package: "cmd/execbox-init", Deny: []string{"std:net/http", "std:database/sql", "modernc.org/...",
		"github.com/moby/...", "go.yaml.in/...", "github.com/prometheus/...", "sandbox", "engine", "backend/..."}},
	// The microVM's init is the native backend and its channel to the
	// host, nothing of the server: it is copied into every VM.
	{Package: "cmd/execbox-guest", Deny: []string{"std:database/sql", "modernc.org/...", "github.com/moby/moby/...",
		"go.yaml.in/...", "github.com/prometheus/...", "engine", "internal/daemon/...", "backend/docker", "backend/gvisor"}},
}

func TestLayering(t *testing.T) {
	for _, r := range rules {
		t.Run(r.Package, func(t *testing.T) { Check(t, r) })
	}
}

// backendDeny is what no backend may depend on (TestBackendsStandAlone).
var backendDeny = []string{"engine", "backend/...", "api/...", "client", "internal/daemon/..."}

// TestRulesNameRealPackages: every package a rule names is one the module
// has or links, so that a rule does not quietly stop applying when a
// package is renamed or moved (a Deny of a path that no longer exists
// forbids nothing).
func TestRulesNameRealPackages(t *testing.T) {
	deps, err := Deps(Module + "/...") // the module's packages and all they link
	if err != nil {
		t.Fatal(err)
	}
	exists := func(pattern string) bool {
		return slices.ContainsFunc(deps, func(d Dep) bool { return matches(d.Path, pattern) })
	}
	for _, r := range append(rules, Rule{Package: "backend/...", Deny: backendDeny}) {
		for _, p := range slices.Concat([]string{r.Package}, r.Allow, r.Deny, r.Except) {
			if !exists(p) {
				t.Errorf("the rule of %s names %s, which is no package of the module or of what it links", r.Package, p)
			}
		}
	}
}

// TestBackendsStandAlone: no backend depends on the engine, on another
// backend, or on the daemon's floor of internal/; the shared pieces under
// backend/internal are theirs to use.
func TestBackendsStandAlone(t *testing.T) {
	for _, name := range backends(t) {
		t.Run(name, func(t *testing.T) {
			Check(t, Rule{
				Package: "backend/" + name,
				Deny:    backendDeny,
				Except:  []string{"backend/" + name, "backend/" + name + "/...", "backend/internal/..."},
			})
		})
	}
}

// backends lists the backend packages: backend/<name>, without the
// bundle (backend/all) and the shared internals.
func backends(t *testing.T) []string {
	deps, err := Deps(Module + "/backend/all")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range deps {
		rest, ok := strings.CutPrefix(d.Path, Module+"/backend/")
		if ok && !strings.Contains(rest, "/") && rest != "internal" {
			out = append(out, rest)
		}
	}
	if len(out) < 5 {
		t.Fatalf("backend/all links %v; want every backend (local, native, bwrap, gvisor, docker at least)", out)
	}
	return out
}

// TestRuleMatching: the matcher itself, on both sides of each form.
func TestRuleMatching(t *testing.T) {
	r := Rule{Package: "x", OnlyStd: true, Allow: []string{"sandbox"}, Deny: []string{"std:net/http", "backend/..."}, Except: []string{"backend/internal/..."}}
	for _, c := range []struct {
		dep  Dep
		want bool
	}{
		{Dep{Path: "fmt", Std: true}, false},
		{Dep{Path: "net/http", Std: true}, true},
		{Dep{Path: Module + "/sandbox"}, false},
		{Dep{Path: Module + "/sandboxtest"}, true}, // a prefix is not the package
		{Dep{Path: Module + "/backend"}, true},
		{Dep{Path: Module + "/backend/native"}, true},
		{Dep{Path: Module + "/backendx"}, true}, // not in the tree, and not std
		{Dep{Path: Module + "/backend/internal/core"}, false},
		{Dep{Path: "go.yaml.in/yaml/v3"}, true},
	} {
		if got := r.forbids(c.dep); got != c.want {
			t.Errorf("forbids(%s) = %v, want %v", c.dep.Path, got, c.want)
		}
	}
}
