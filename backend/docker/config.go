package docker

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/execbox/execbox/sandbox"
)

// Config is the `docker:` section of execbox's configuration.
type Config struct {
	// Host is the engine's address (unix:///var/run/docker.sock,
	// tcp://host:2376). Empty means DOCKER_HOST, else the local socket.
	Host string `yaml:"host"`
	// Image is the default sandbox image; a Spec.Image overrides it.
	Image string `yaml:"image"`
	// Runtime is the OCI runtime the engine runs containers with ("" is the
	// engine's default, normally runc; "runsc" is gVisor).
	Runtime string `yaml:"runtime"`
	// ReuseContainer keeps one long-lived container per Spec.Scope and runs
	// each sandbox of that scope in it with one exec per run.
	ReuseContainer bool `yaml:"reuse_container"`
	// IdleTimeout is how long a reused container, or one started ahead, may
	// stay unused before it is removed.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// PoolSize is how many containers are started ahead for one-shot
	// sandboxes of each limits profile (image, limits, network, labels) in
	// use, so that Create takes one that is running already; each serves
	// one sandbox and is never reused. 0 starts none.
	PoolSize int `yaml:"pool_size"`
}

// DefaultImage is the image a zero Config names.
const DefaultImage = "execbox-python:latest"

// DefaultIdleTimeout is the idle timeout a zero Config means.
const DefaultIdleTimeout = 5 * time.Minute

// DefaultPoolSize is the pool size of the built-in configuration.
const DefaultPoolSize = 1

// MaxPoolSize bounds docker.pool_size.
const MaxPoolSize = 16

// DefaultConfig is the docker section's built-in value.
func DefaultConfig() *Config {
	return &Config{Image: DefaultImage, IdleTimeout: DefaultIdleTimeout, PoolSize: DefaultPoolSize}
}

// Validate names the key at fault.
func (c *Config) Validate() error {
	switch {
	case c.Image == "":
		return errors.New("docker.image: must not be empty")
	case c.IdleTimeout < 0:
		return errors.New("docker.idle_timeout: must not be negative")
	case c.PoolSize < 0 || c.PoolSize > MaxPoolSize:
		return fmt.Errorf("docker.pool_size: %d is not between 0 and %d", c.PoolSize, MaxPoolSize)
	}
	return c.validate()
}

func (c Config) withDefaults() Config {
	if c.Image == "" {
		c.Image = DefaultImage
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	return c
}

// validate rejects a configuration the backend cannot use, naming the key.
func (c Config) validate() error {
	if c.Host != "" && !strings.Contains(c.Host, "://") {
		return sandbox.Errorf(sandbox.ErrInvalid, "config_invalid", "docker.host %q: want a URL such as unix:///var/run/docker.sock or tcp://host:2376", c.Host)
	}
	if strings.HasPrefix(c.Host, "ssh://") {
		return sandbox.Errorf(sandbox.ErrInvalid, "config_invalid", "docker.host %q: ssh:// engines are not supported; use unix:// or tcp:// with TLS", c.Host)
	}
	if c.PoolSize < 0 || c.PoolSize > MaxPoolSize {
		return sandbox.Errorf(sandbox.ErrInvalid, "config_invalid", "docker.pool_size %d is not between 0 and %d", c.PoolSize, MaxPoolSize)
	}
	if strings.ContainsAny(c.Image, " \t\n") {
		return sandbox.Errorf(sandbox.ErrInvalid, "config_invalid", "docker.image %q is not an image reference", c.Image)
	}
	return nil
}

// isolation is what a container gives with runtime rt: gVisor's user-space
// kernel, or namespaces on the host kernel.
func isolation(rt string) sandbox.Isolation {
	if rt == "runsc" || strings.HasSuffix(rt, "/runsc") || strings.HasPrefix(rt, "runsc-") {
		return sandbox.IsolationKernel
	}
	return sandbox.IsolationProcess
}

func (c Config) String() string {
	return fmt.Sprintf("host=%q image=%q runtime=%q reuse_container=%v idle_timeout=%v pool_size=%d",
		c.Host, c.Image, c.Runtime, c.ReuseContainer, c.IdleTimeout, c.PoolSize)
}
