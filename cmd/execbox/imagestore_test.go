package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/execbox/execbox/internal/host/image"
	"github.com/execbox/execbox/internal/host/imagestore"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/internal/testutil/registry"
)

// hostPythonImage is the python image made offline from this host's
// files, with a layer of its own on top (a marker and an os-release) and
// a variable in its config.
func hostPythonImage(t *testing.T, marker string) v1.Image {
	t.Helper()
	r, err := image.Lookup("python", "/")
	if err != nil {
		t.Fatal(err)
	}
	var base bytes.Buffer
	if _, err := image.Build(&base, r, image.Options{Root: "/"}); err != nil {
		t.Fatal(err)
	}
	var top bytes.Buffer
	tw := tar.NewWriter(&top)
	for name, data := range map[string]string{"execbox-image-marker": marker, "etc/os-release": "ID=execbox-image-test\n"} {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg})
		tw.Write([]byte(data))
	}
	tw.Close()
	var layers []v1.Layer
	for _, b := range [][]byte{base.Bytes(), top.Bytes()} {
		l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }, tarball.WithCompressionLevel(gzip.BestSpeed))
		if err != nil {
			t.Fatal(err)
		}
		layers = append(layers, l)
	}
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	cf, _ := img.ConfigFile()
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "IMAGE_VAR=from-the-image"}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// TestImagePulledFromARegistryIsTheRoot: `image pull` from a real registry,
// then `run --image` on native sees the image's files and variables, not
// the host's; `image ls` lists it, `image rm` removes it, and a run that
// names it afterwards is refused.
func TestImagePulledFromARegistryIsTheRoot(t *testing.T) {
	testutil.RequiresRoot(t, "native")
	reg := registry.Start(t)
	ref := reg + "/test/python:1"
	marker := "marker-" + strings.ReplaceAll(t.Name(), "/", "-")
	registry.Push(t, ref, hostPythonImage(t, marker))
	state := []string{"--set", "state_dir=" + t.TempDir(), "--set", "backend=native"}
	cli := func(args ...string) cliResult { return runBinary(t, append(append([]string{}, state...), args...)...) }

	if r := cli("image", "pull", ref); r.code != 0 || !strings.Contains(r.stdout, "pulled "+ref) {
		t.Fatalf("image pull: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r := cli("run", "--image", ref, "--", "sh", "-c", `cat /execbox-image-marker; echo " $IMAGE_VAR"; grep ^ID= /etc/os-release; python3 -c 'print("python")'`)
	if want := marker + " from-the-image\nID=execbox-image-test\npython\n"; r.code != 0 || r.stdout != want {
		t.Fatalf("run --image: exit %d, stdout %q, want %q; stderr %q", r.code, r.stdout, want, r.stderr)
	}
	r = cli("image", "ls", "--json")
	var imgs []imagestore.Image
	if err := json.Unmarshal([]byte(r.stdout), &imgs); err != nil || len(imgs) != 1 || imgs[0].Refs[0] != ref || imgs[0].Unpacked == 0 {
		t.Fatalf("image ls --json: %q %v", r.stdout, err)
	}
	if r := cli("image", "rm", ref); r.code != 0 {
		t.Fatalf("image rm: exit %d, stderr %q", r.code, r.stderr)
	}
	r = cli("run", "--image", ref, "--", "true")
	if r.code != 125 || !strings.Contains(r.stderr, "image_denied") {
		t.Fatalf("run --image of a removed image: exit %d, stderr %q; want 125, image_denied", r.code, r.stderr)
	}
	if r := cli("image", "pull", reg+"/test/missing:1"); r.code == 0 || !strings.Contains(r.stderr, "image_not_found") {
		t.Fatalf("pulling what the registry lacks: exit %d, stderr %q", r.code, r.stderr)
	}
}
