package image

import (
	"archive/tar"
	"bytes"
	"io"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestPythonDockerfile(t *testing.T) {
	// Every image can be built both ways: from its Dockerfile and offline.
	if got := dockerfileNames(); !slices.Equal(got, Names()) {
		t.Fatalf("images with a Dockerfile %v, with an offline recipe %v: want the same", got, Names())
	}
	df, err := Dockerfile("python")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^FROM python:3\.[0-9]+-slim$`).Match(df) {
		t.Errorf("the python image is not built from a python:3.x-slim base:\n%s", df)
	}
	for _, want := range []string{"USER 65534:65534", "WORKDIR /work", "chown 65534:65534 /work"} {
		if !bytes.Contains(df, []byte(want)) {
			t.Errorf("the Dockerfile lacks %q", want)
		}
	}
	ctx, err := BuildContext("python")
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(bytes.NewReader(ctx))
	h, err := tr.Next()
	if err != nil || h.Name != "Dockerfile" {
		t.Fatalf("context: %v %+v", err, h)
	}
	got, _ := io.ReadAll(tr)
	if !bytes.Equal(got, df) {
		t.Errorf("the context's Dockerfile differs")
	}
	if _, err := Dockerfile("nope"); err == nil || !strings.Contains(err.Error(), "python") {
		t.Errorf("unknown image: %v", err)
	}
}
