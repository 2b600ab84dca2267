// Package images holds the Dockerfiles of execbox's sandbox images, embedded
// so that `execbox image build NAME` can send one to the engine as a build
// context. Each image has a directory NAME/ with a Dockerfile; the offline
// build of the same image (from the host's own files) is in
// internal/image.
//
// Invariant: every image has /bin/sh, /usr/bin/env, sleep, the user 65534
// and a /work directory owned by it — what the docker backend's keeper and
// exec wrapper need.
package images

import (
	"archive/tar"
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"slices"
)

//go:embed python/Dockerfile
var files embed.FS

// Names lists the images that have a Dockerfile.
func Names() []string {
	ents, _ := fs.ReadDir(files, ".")
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	slices.Sort(out)
	return out
}

// Dockerfile returns the Dockerfile of image name.
func Dockerfile(name string) ([]byte, error) {
	b, err := files.ReadFile(name + "/Dockerfile")
	if err != nil {
		return nil, fmt.Errorf("no Dockerfile for image %q (known: %v)", name, Names())
	}
	return b, nil
}

// Context returns image name's build context: a tar holding its Dockerfile.
func Context(name string) ([]byte, error) {
	df, err := Dockerfile(name)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(df))}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(df); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
