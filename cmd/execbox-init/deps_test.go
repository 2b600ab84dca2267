package main

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// The init runs inside every sandbox and its start time is on every run's
// critical path: it must not link the network stack, a database, the
// Docker client, the seccomp compiler or the CLI.
func TestDependencies(t *testing.T) {
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	cmd := exec.Command(goTool, "list", "-deps", ".")
	cmd.Env = append(cmd.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	forbidden := []string{
		"net", "net/http", "crypto/tls", "database/sql",
		"sqlite", "github.com/docker/", "github.com/moby/", "github.com/elastic/go-seccomp-bpf",
		"github.com/spf13/", "go.yaml.in/", "github.com/execbox/execbox/sandbox",
		"github.com/execbox/execbox/engine", "github.com/execbox/execbox/backend/",
	}
	for _, d := range deps {
		for _, f := range forbidden {
			if d == f || (strings.HasSuffix(f, "/") && strings.HasPrefix(d, f)) || (f == "sqlite" && strings.Contains(d, f)) {
				t.Errorf("execbox-init links %s", d)
			}
		}
	}
	if len(deps) < 10 || !contains(deps, "github.com/execbox/execbox/internal/host/nsinit") {
		t.Fatalf("go list returned an implausible list: %v", deps)
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
