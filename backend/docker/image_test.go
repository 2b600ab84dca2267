package docker

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/execbox/execbox/internal/host/image"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/sandbox"
)

// TestImportOffline builds the python image from the host's files into the
// engine with no registry, in seconds, and runs Python from it.
func TestImportOffline(t *testing.T) {
	b := newBackend(t, Config{})
	r, err := image.Lookup("python", "/")
	if err != nil {
		testutil.SkipOrFail(t, Name, "no host python to build from: %v", err)
	}
	const ref = "execbox-python:offline-test"
	ctx := context.Background()
	start := time.Now()
	st, id, err := ImportOffline(ctx, b.host, r, ref, image.Options{})
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Cleanup(func() { b.cli.ImageRemove(ctx, ref, client.ImageRemoveOptions{Force: true}) })
	t.Logf("imported %s (%s) in %v: %d files, %.1f MiB", ref, id, took.Round(time.Millisecond), st.Files, float64(st.Bytes)/sandbox.MiB)
	if !strings.HasPrefix(id, "sha256:") {
		t.Errorf("image ID %q", id)
	}
	if took > 30*time.Second {
		t.Errorf("the offline build took %v; it should take seconds", took)
	}
	in, err := b.cli.ImageInspect(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if in.Config == nil || in.Config.User != "65534:65534" || in.Config.WorkingDir != "/work" {
		t.Errorf("image config: %+v", in.Config)
	}
	res := py(t, b, sandbox.Spec{Image: ref}, `import json, sqlite3, ssl, hashlib, decimal, ctypes; print(json.dumps({"ok": sqlite3.sqlite_version != ""}))`)
	if !res.Succeeded() || res.Stdout != "{\"ok\": true}\n" {
		t.Errorf("python from the offline image: %s", describe(res))
	}
}
