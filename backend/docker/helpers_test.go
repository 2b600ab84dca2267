package docker

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
)

// testImage is the image the tests run; EXECBOX_DOCKER_IMAGE overrides it.
func testImage() string {
	if img := os.Getenv("EXECBOX_DOCKER_IMAGE"); img != "" {
		return img
	}
	return DefaultImage
}

// probe is the health of the engine and image, checked once per test binary.
var probe = sync.OnceValue(func() sandbox.Health {
	b, err := NewWithConfig(Config{Image: testImage()}, sandbox.Settings{Instance: "test-probe"})
	if err != nil {
		return sandbox.Health{Reason: err.Error()}
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return b.Health(ctx)
})

// newBackend returns a docker backend on the engine of DOCKER_HOST with the
// test image, closed when the test ends; it skips (fails under
// EXECBOX_REQUIRE=docker) when the engine or the image is missing.
func newBackend(t testing.TB, cfg Config) *Backend {
	t.Helper()
	if h := probe(); !h.Ready {
		testutil.SkipOrFail(t, Name, "docker backend not ready (DOCKER_HOST=%q): %s", os.Getenv("DOCKER_HOST"), h.Reason)
	}
	if cfg.Image == "" {
		cfg.Image = testImage()
	}
	b, err := NewWithConfig(cfg, sandbox.Settings{Instance: "test-" + t.Name()})
	if err != nil {
		t.Fatalf("NewWithConfig: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Backend.Close: %v", err)
		}
	})
	return b
}

// py runs a Python program in a fresh sandbox: the image's python3, not
// the host's testutil.Python.
func py(t testing.TB, b *Backend, spec sandbox.Spec, code string) *sandbox.Result {
	t.Helper()
	return testutil.Run(t, b, spec, "python3", "-I", "-c", code)
}

// create makes a sandbox that is closed when the test ends.
func create(t testing.TB, b *Backend, spec sandbox.Spec) sandbox.Sandbox {
	t.Helper()
	sb, err := b.Create(context.Background(), spec)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { sb.Close(context.Background()) })
	return sb
}

// execboxContainers lists the names of the containers with execbox labels
// (all of them, or only those of instance), running or not, once b's
// removals in flight are done.
func execboxContainers(t testing.TB, b *Backend, instance string) []string {
	t.Helper()
	if err := b.settle(context.Background()); err != nil {
		t.Errorf("settling: %v", err)
	}
	f := make(client.Filters).Add("label", LabelOwner)
	if instance != "" {
		f.Add("label", LabelInstance+"="+instance)
	}
	list, err := b.cli.ContainerList(context.Background(), client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatalf("listing containers: %v", err)
	}
	var names []string
	for _, c := range list.Items {
		names = append(names, strings.Join(c.Names, ","))
	}
	return names
}

func describe(res *sandbox.Result) string {
	if res == nil {
		return "<nil>"
	}
	return fmt.Sprintf("reason=%s exit=%d signal=%q stdout=%s stderr=%s message=%q",
		res.Reason, res.ExitCode, res.Signal, clip(res.Stdout), clip(res.Stderr), res.Message)
}

func clip(s string) string {
	if len(s) > 300 {
		return fmt.Sprintf("%q…%q", s[:150], s[len(s)-150:])
	}
	return fmt.Sprintf("%q", s)
}

// newRunscBackend is newBackend with docker.runtime runsc; it skips (fails
// under EXECBOX_REQUIRE=docker-runsc) when the engine has no runsc runtime.
func newRunscBackend(t testing.TB) *Backend {
	t.Helper()
	b := newBackend(t, Config{Runtime: "runsc"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if h := b.Health(ctx); !h.Ready {
		msg := "docker runtime runsc not ready: " + h.Reason
		testutil.SkipOrFail(t, "docker-runsc", "%s", msg)
	}
	return b
}
