package image

import (
	"archive/tar"
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"slices"
)

//go:embed dockerfiles/*/Dockerfile
var dockerfiles embed.FS

// dockerfileNames lists the images that have a Dockerfile.
func dockerfileNames() []string {
	ents, _ := fs.ReadDir(dockerfiles, "dockerfiles")
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
	b, err := dockerfiles.ReadFile("dockerfiles/" + name + "/Dockerfile")
	if err != nil {
		return nil, fmt.Errorf("no Dockerfile for image %q (known: %v)", name, dockerfileNames())
	}
	return b, nil
}

// BuildContext returns image name's build context for the Engine API: a
// tar holding its Dockerfile.
func BuildContext(name string) ([]byte, error) {
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
