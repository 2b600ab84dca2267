package docker

import (
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox/internal/daemon/config"
	"github.com/execbox/execbox/sandbox"
)

// TestConfigSection takes the docker section as the engine hands it over:
// the configuration's layers applied to the value this backend registered,
// its defaults included.
func TestConfigSection(t *testing.T) {
	cfg, _, err := config.Load("", []string{"EXECBOX_DOCKER_RUNTIME=runsc", "EXECBOX_DOCKER_REUSE_CONTAINER=true"},
		map[string]string{"docker.idle_timeout": "90s", "docker.host": "tcp://127.0.0.1:1", "docker.pool_size": "3"})
	if err != nil {
		t.Fatal(err)
	}
	sec := cfg.BackendConfig(Name).(*Config)
	b, err := New(sandbox.Settings{Config: sec, Instance: "t"})
	if err != nil {
		t.Fatal(err)
	}
	db := b.(*Backend)
	want := Config{Host: "tcp://127.0.0.1:1", Image: "execbox-python:latest", Runtime: "runsc", ReuseContainer: true, IdleTimeout: 90 * time.Second, PoolSize: 3}
	if db.cfg != want {
		t.Errorf("decoded %v, want %v", db.cfg, want)
	}
	if db.Capabilities().Isolation != sandbox.IsolationKernel {
		t.Errorf("runtime runsc: isolation %v, want kernel", db.Capabilities().Isolation)
	}
	if db.host != "tcp://127.0.0.1:1" {
		t.Errorf("docker.host not used: %s", db.host)
	}
	sec.Runtime = ""
	b, _ = New(sandbox.Settings{Config: sec})
	if b.Capabilities().Isolation != sandbox.IsolationProcess {
		t.Errorf("default runtime: isolation %v, want process", b.Capabilities().Isolation)
	}
	if d := DefaultConfig(); d.PoolSize != 1 || d.IdleTimeout != 5*time.Minute || d.Image != "execbox-python:latest" {
		t.Errorf("defaults: %v", d)
	}
	for _, n := range []int{-1, 17} {
		bad := *sec
		bad.PoolSize = n
		if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "docker.pool_size") {
			t.Errorf("pool_size %d: %v", n, err)
		}
	}
	for _, n := range []int{0, 16} {
		ok := *sec
		ok.PoolSize = n
		if err := ok.Validate(); err != nil {
			t.Errorf("pool_size %d: %v", n, err)
		}
	}
	for _, host := range []string{"ssh://me@there", "no-scheme"} {
		sec.Host = host
		if _, err := New(sandbox.Settings{Config: sec}); sandbox.CodeOf(err) != "config_invalid" {
			t.Errorf("docker.host %q: %v", host, err)
		}
	}
}

// TestEnvAllowlist: only the allowlisted DOCKER_* variables steer the
// client; docker.host wins over DOCKER_HOST.
func TestEnvAllowlist(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix:///from/env.sock")
	t.Setenv("DOCKER_CONTEXT", "bogus-context")
	t.Setenv("DOCKER_CONFIG", "/nonexistent")
	_, host, err := NewClient("")
	if err != nil || host != "unix:///from/env.sock" {
		t.Errorf("DOCKER_HOST: %s %v", host, err)
	}
	_, host, err = NewClient("unix:///from/config.sock")
	if err != nil || host != "unix:///from/config.sock" {
		t.Errorf("docker.host over DOCKER_HOST: %s %v", host, err)
	}
	t.Setenv("DOCKER_API_VERSION", "not-a-version")
	if _, _, err := NewClient(""); err == nil || !strings.Contains(err.Error(), "not-a-version") {
		t.Errorf("DOCKER_API_VERSION is read: %v", err)
	}
}
