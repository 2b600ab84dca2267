package docker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"

	"github.com/moby/moby/client"

	"github.com/execbox/execbox/sandbox"
)

// EnvAllowlist names the only environment variables execbox reads to reach
// the engine. DOCKER_CONTEXT, DOCKER_CONFIG and every other DOCKER_*
// variable are ignored.
var EnvAllowlist = []string{"DOCKER_HOST", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH", "DOCKER_API_VERSION"}

// NewClient returns an Engine API client for host ("" = DOCKER_HOST, else
// the local socket), configured from EnvAllowlist only, and the address it
// talks to. It does not connect: every call dials as needed, so an engine
// that was down is used again as soon as it is back.
func NewClient(host string) (*client.Client, string, error) {
	if host == "" {
		host = os.Getenv("DOCKER_HOST")
	}
	if host == "" {
		host = client.DefaultDockerHost
	}
	// TLS first: it replaces the HTTP client that WithHost then configures.
	cli, err := client.New(client.WithTLSClientConfigFromEnv(), client.WithHost(host), client.WithAPIVersionFromEnv())
	if err != nil {
		return nil, host, sandbox.Errorf(sandbox.ErrInvalid, "docker_host_invalid", "configuring the docker client for %s: %w", host, err)
	}
	return cli, host, nil
}

// engineDown reports whether err means the engine could not be reached.
func engineDown(err error) bool {
	if err == nil {
		return false
	}
	if client.IsErrConnectionFailed(err) {
		return true
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT)
}

// wrap turns an Engine API error into an execbox error: an engine that is
// down is ErrUnavailable naming the address and what to do; a cancelled
// context stays itself; anything else is ErrInternal with what was being
// done.
func (b *Backend) wrap(err error, doing string) error {
	if err == nil {
		return nil
	}
	var se *sandbox.Error
	switch {
	case errors.As(err, &se):
		return err
	case engineDown(err):
		return &sandbox.Error{Kind: sandbox.ErrUnavailable, Code: "engine_unavailable", Err: err, Msg: fmt.Sprintf(
			"%s: the docker engine at %s is not answering (%s); start dockerd or point docker.host / DOCKER_HOST at a running engine",
			doing, b.host, downCause(err))}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s: %w", doing, err)
	}
	return sandbox.Errorf(sandbox.ErrInternal, "docker_failed", "%s: %w", doing, err)
}

// downCause is the innermost network error of err (what the dial said), or
// err itself.
func downCause(err error) string {
	var op *net.OpError
	if errors.As(err, &op) {
		return op.Error()
	}
	return err.Error()
}

// imageMissing is the error for an image the engine does not have:
// execbox never pulls.
func (b *Backend) imageMissing(image string) error {
	return sandbox.Errorf(sandbox.ErrUnavailable, "image_missing",
		"docker image %s is not present in the engine at %s and execbox never pulls; build it with `execbox image build python --offline` (no registry needed) or `docker build -t %s internal/host/image/dockerfiles/python`",
		image, b.host, image)
}
