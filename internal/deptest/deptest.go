package deptest

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// Module is this module's path; rules name packages relative to it.
const Module = "github.com/execbox/execbox"

// Rule forbids dependencies of one package.
type Rule struct {
	// Package is the package checked, relative to Module ("client").
	Package string
	// OnlyStd: nothing outside the standard library, except Allow.
	OnlyStd bool
	// Allow lists packages (relative to Module, or full paths) that OnlyStd
	// lets through.
	Allow []string
	// Deny lists forbidden packages: a path, or a path ending in "/..." for
	// a whole tree. Paths without a dot in their first element are
	// relative to Module; "std:net/http" names a standard package.
	Deny []string
	// Except lists packages of a denied tree that are allowed after all.
	Except []string
}

// Dep is one package a package depends on.
type Dep struct {
	Path string
	Std  bool // in the standard library
}

// Deps lists every package pkg depends on, itself excluded, sorted by
// path. pkg is a full import path.
func Deps(pkg string) ([]Dep, error) {
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	cmd := exec.Command(gobin, "list", "-deps", "-f", "{{.ImportPath}} {{.Standard}}", pkg)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -deps %s: %v: %s", pkg, err, strings.TrimSpace(stderr.String()))
	}
	var deps []Dep
	for l := range strings.Lines(string(out)) {
		path, std, _ := strings.Cut(strings.TrimSpace(l), " ")
		if path != "" && path != pkg {
			deps = append(deps, Dep{Path: path, Std: std == "true"})
		}
	}
	slices.SortFunc(deps, func(a, b Dep) int { return strings.Compare(a.Path, b.Path) })
	return deps, nil
}

// Violations returns the dependencies that r forbids.
func (r Rule) Violations(deps []Dep) []string {
	var bad []string
	for _, d := range deps {
		if r.forbids(d) {
			bad = append(bad, d.Path)
		}
	}
	return bad
}

func (r Rule) forbids(d Dep) bool {
	if slices.ContainsFunc(r.Except, func(p string) bool { return matches(d.Path, p) }) {
		return false
	}
	if slices.ContainsFunc(r.Deny, func(p string) bool { return matches(d.Path, p) }) {
		return true
	}
	return r.OnlyStd && !d.Std && !slices.ContainsFunc(r.Allow, func(p string) bool { return matches(d.Path, p) })
}

// matches reports whether dep is pattern: a package, or a tree ("x/...").
func matches(dep, pattern string) bool {
	pattern = full(pattern)
	if tree, ok := strings.CutSuffix(pattern, "/..."); ok {
		return dep == tree || strings.HasPrefix(dep, tree+"/")
	}
	return dep == pattern
}

// full makes a module-relative path absolute. Standard-library paths
// (first element without a dot) are relative too, so name those in full
// with the std: prefix ("std:net/http").
func full(p string) string {
	if std, ok := strings.CutPrefix(p, "std:"); ok {
		return std
	}
	first, _, _ := strings.Cut(p, "/")
	if strings.Contains(first, ".") {
		return p
	}
	return Module + "/" + p
}

// Check fails t when r.Package depends on anything r forbids, naming each
// forbidden package.
func Check(t *testing.T, r Rule) {
	t.Helper()
	deps, err := Deps(full(r.Package))
	if err != nil {
		t.Fatal(err)
	}
	if bad := r.Violations(deps); len(bad) > 0 {
		t.Errorf("%s depends on what its rule forbids:\n\t%s\n(find the path with: go mod why -m, or go list -deps -f '{{.ImportPath}}: {{.Imports}}' ./%s)",
			r.Package, strings.Join(bad, "\n\t"), r.Package)
	}
}
