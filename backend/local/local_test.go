package local

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox/sandbox"
)

func newBackend(t *testing.T) sandbox.Backend {
	t.Helper()
	b, err := New(sandbox.Settings{WorkRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestQuick(t *testing.T) {
	b := newBackend(t)
	t.Setenv("EXECBOX_LOCAL_SECRET", "hunter2")
	res, err := sandbox.Run(context.Background(), b, sandbox.Spec{}, &sandbox.Process{Args: []string{"env"}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(res.Stdout, "hunter2") {
		t.Fatalf("secret leaked: %s", res.Stdout)
	}
	t.Logf("%+v", res)
	start := time.Now()
	res, err = sandbox.Run(context.Background(), b, sandbox.Spec{Limits: sandbox.Limits{Wall: time.Second}},
		&sandbox.Process{Args: []string{"sh", "-c", "echo hi; sleep 100 & setsid sleep 100 & wait"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%v %+v", time.Since(start), res)
	if res.Reason != sandbox.ReasonTimeout || res.Stdout != "hi\n" {
		t.Fatalf("got %+v", res)
	}
	_ = os.Getpid()
}

// The local backend runs on the host's own files: a spec with extra
// mounts is refused, never run without them.
func TestMountsRefused(t *testing.T) {
	b := newBackend(t)
	_, err := b.Create(context.Background(), sandbox.Spec{Policy: sandbox.Policy{Mounts: []sandbox.Mount{{Source: t.TempDir(), Target: "/data"}}}})
	if sandbox.CodeOf(err) != "mounts_unsupported" {
		t.Fatalf("Create with a mount: %v, want mounts_unsupported", err)
	}
}
