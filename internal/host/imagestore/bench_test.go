package imagestore

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/execbox/execbox/internal/host/image"
	testregistry "github.com/execbox/execbox/internal/testutil/registry"
)

// BenchmarkPull times an image's first use: pulling the host's python
// image (made offline, about 65 MiB in one layer) from a registry on
// loopback into an empty store, with every digest checked and the root
// unpacked.
//
//	go test -run '^$' -bench Pull -benchtime 3x ./internal/host/imagestore/
func BenchmarkPull(b *testing.B) {
	r, err := image.Lookup("python", "/")
	if err != nil {
		b.Fatal(err)
	}
	var tar bytes.Buffer
	if _, err := image.Build(&tar, r, image.Options{Root: "/"}); err != nil {
		b.Fatal(err)
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(tar.Bytes())), nil }, tarball.WithCompressionLevel(gzip.BestSpeed))
	if err != nil {
		b.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		b.Fatal(err)
	}
	cf, _ := img.ConfigFile()
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = platform.OS, platform.Architecture
	img, _ = mutate.ConfigFile(img, cf)
	ref := testregistry.Start(b) + "/bench/python:1"
	testregistry.Push(b, ref, img)
	digest, _ := img.Digest()
	b.ResetTimer()
	for range b.N {
		s, err := Open(Options{Dir: b.TempDir(), MaxBytes: 1 << 30})
		if err != nil {
			b.Fatal(err)
		}
		got, err := s.Pull(context.Background(), ref)
		if err != nil || got.Digest != digest.String() {
			b.Fatalf("pull: %+v %v", got, err)
		}
	}
	b.ReportMetric(float64(tar.Len())/(1<<20), "MiB")
}
