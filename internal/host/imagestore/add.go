package imagestore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/match"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/execbox/execbox/sandbox"
)

// Bounds of what an image may be, whatever the quota.
const (
	maxLayers   = 256
	maxMetadata = 4 << 20 // a manifest or a config
)

// platform is the one the store pulls: this host's.
var platform = v1.Platform{OS: "linux", Architecture: runtime.GOARCH}

// Pull fetches ref from its registry (this host's platform of a
// multi-platform image), stores it under its full reference and unpacks
// it.
func (s *Store) Pull(ctx context.Context, ref string) (Image, error) {
	r, err := parseRef(ref)
	if err != nil {
		return Image{}, err
	}
	desc, err := remote.Get(r, remote.WithContext(ctx), remote.WithAuthFromKeychain(s.o.Keychain), remote.WithPlatform(platform),
		remote.WithTransport(loopbackHTTP{remote.DefaultTransport}))
	if err != nil {
		return Image{}, pullErr(ref, err)
	}
	img, err := desc.Image()
	if err != nil {
		return Image{}, pullErr(ref, err)
	}
	return s.add(img, r.Name(), func(err error) error { return pullErr(ref, err) })
}

// loopbackHTTP refuses plain HTTP but to this host: go-containerregistry
// falls back to it for registries on private addresses too, where anyone
// on the network could change an image (and read a credential) in flight.
type loopbackHTTP struct{ next http.RoundTripper }

func (t loopbackHTTP) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme == "http" {
		host := req.URL.Hostname()
		ip := net.ParseIP(host)
		if host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return nil, fmt.Errorf("plain HTTP to %s refused: only a registry on this host is spoken to without TLS", req.URL.Host)
		}
	}
	return t.next.RoundTrip(req)
}

// pullErr types a registry's failure: what it does not have is not found,
// the rest unavailable.
func pullErr(ref string, err error) error {
	if sandbox.KindOf(err) != sandbox.ErrInternal {
		return err
	}
	var te *transport.Error
	if errors.As(err, &te) && (te.StatusCode == http.StatusNotFound || hasCode(te, transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode)) {
		return sandbox.Errorf(sandbox.ErrNotFound, "image_not_found", "pulling %s: the registry has no such image: %v", ref, err)
	}
	return sandbox.Errorf(sandbox.ErrUnavailable, "image_pull_failed", "pulling %s: %v", ref, err)
}

func hasCode(te *transport.Error, codes ...transport.ErrorCode) bool {
	for _, d := range te.Errors {
		for _, c := range codes {
			if d.Code == c {
				return true
			}
		}
	}
	return false
}

// Import adds the images of file: a `docker save` tar or an OCI layout
// directory. tag names the image (required when the file names none, or
// holds more than one).
func (s *Store) Import(file, tag string) ([]Image, error) {
	fi, err := os.Stat(file)
	if err != nil {
		return nil, sandbox.Errorf(sandbox.ErrNotFound, "image_not_found", "importing: %v", err)
	}
	invalid := func(err error) error {
		if sandbox.KindOf(err) != sandbox.ErrInternal {
			return err
		}
		return sandbox.Errorf(sandbox.ErrInvalid, "image_invalid", "importing %s: %v", file, err)
	}
	type named struct {
		img v1.Image
		ref string
	}
	var imgs []named
	if fi.IsDir() {
		idx, err := layout.ImageIndexFromPath(file)
		if err != nil {
			return nil, invalid(err)
		}
		m, err := idx.IndexManifest()
		if err != nil {
			return nil, invalid(err)
		}
		for _, d := range m.Manifests {
			if !d.MediaType.IsImage() {
				continue
			}
			img, err := idx.Image(d.Digest)
			if err != nil {
				return nil, invalid(err)
			}
			imgs = append(imgs, named{img, d.Annotations[refName]})
		}
	} else {
		open := func() (io.ReadCloser, error) { return os.Open(file) }
		m, err := tarball.LoadManifest(open)
		if err != nil {
			return nil, invalid(err)
		}
		for _, d := range m {
			var t *name.Tag
			ref := ""
			if len(d.RepoTags) > 0 {
				ref = d.RepoTags[0]
				if tt, err := name.NewTag(ref); err == nil {
					t = &tt
				}
			}
			if t == nil && len(m) > 1 {
				return nil, sandbox.Errorf(sandbox.ErrInvalid, "image_invalid", "importing %s: an image without a tag among %d", file, len(m))
			}
			img, err := tarball.Image(open, t)
			if err != nil {
				return nil, invalid(err)
			}
			imgs = append(imgs, named{img, ref})
		}
	}
	switch {
	case len(imgs) == 0:
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "image_invalid", "importing %s: it holds no image", file)
	case tag != "" && len(imgs) > 1:
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "image_invalid", "importing %s: it holds %d images; --tag names one", file, len(imgs))
	case tag != "":
		imgs[0].ref = tag
	}
	var out []Image
	for _, n := range imgs {
		if n.ref == "" {
			return nil, sandbox.Errorf(sandbox.ErrInvalid, "image_invalid", "importing %s: the image has no name; give it one with --tag", file)
		}
		r, err := parseRef(n.ref)
		if err != nil {
			return nil, err
		}
		img, err := s.add(n.img, r.Name(), invalid)
		if err != nil {
			return nil, err
		}
		out = append(out, img)
	}
	return out, nil
}

// add stores img under ref and unpacks it; wrap types the source's
// errors. Nothing of an image that fails stays.
func (s *Store) add(img v1.Image, ref string, wrap func(error) error) (Image, error) {
	m, err := img.Manifest()
	if err != nil {
		return Image{}, wrap(err)
	}
	if len(m.Layers) > maxLayers {
		return Image{}, sandbox.Errorf(sandbox.ErrLimit, "image_too_large", "the image has %d layers, more than %d", len(m.Layers), maxLayers)
	}
	if m.Config.Size > maxMetadata {
		return Image{}, sandbox.Errorf(sandbox.ErrLimit, "image_too_large", "the image's config is %d bytes, more than %d", m.Config.Size, maxMetadata)
	}
	raw, err := img.RawManifest()
	if err != nil {
		return Image{}, wrap(err)
	}
	need := int64(len(raw)) + m.Config.Size
	for _, l := range m.Layers {
		if l.Size < 0 {
			return Image{}, sandbox.Errorf(sandbox.ErrInvalid, "image_invalid", "a layer of the image has a negative size")
		}
		need += l.Size
	}
	h, err := img.Digest()
	if err != nil {
		return Image{}, wrap(err)
	}
	unlock, err := s.lock()
	if err != nil {
		return Image{}, err
	}
	defer unlock()
	if s.usage()+need > s.o.MaxBytes {
		return Image{}, s.errQuota(need)
	}
	// Blobs first, then the root, then the name: an image that fails
	// leaves blobs no name holds, which gc removes.
	if err := s.oci.WriteImage(img); err != nil {
		s.gc()
		return Image{}, wrap(err)
	}
	if s.usage() > s.o.MaxBytes {
		s.gc()
		return Image{}, s.errQuota(need)
	}
	if err := s.unpack(h); err != nil {
		s.gc()
		return Image{}, err
	}
	if err := s.oci.ReplaceImage(img, match.Annotation(refName, ref), layout.WithAnnotations(map[string]string{refName: ref})); err != nil {
		s.gc()
		return Image{}, wrap(err)
	}
	// A name that moved to this image may have left another without one.
	if _, err := s.gc(); err != nil {
		return Image{}, err
	}
	out, err := s.describe(h)
	out.Refs = []string{ref}
	return out, err
}

// manifest reads the manifest h from the blobs, checking its digest.
func (s *Store) manifest(h v1.Hash) (*v1.Manifest, []byte, error) {
	raw, err := s.blob(h, maxMetadata)
	if err != nil {
		return nil, nil, err
	}
	m, err := v1.ParseManifest(strings.NewReader(string(raw)))
	if err != nil {
		return nil, nil, sandbox.Errorf(sandbox.ErrInvalid, "image_invalid", "the manifest %s: %v", h, err)
	}
	return m, raw, nil
}

// config reads the config of m from the blobs, checking its digest.
func (s *Store) config(m *v1.Manifest) (*v1.ConfigFile, error) {
	raw, err := s.blob(m.Config.Digest, maxMetadata)
	if err != nil {
		return nil, err
	}
	cf, err := v1.ParseConfigFile(strings.NewReader(string(raw)))
	if err != nil {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "image_invalid", "the config %s: %v", m.Config.Digest, err)
	}
	return cf, nil
}

// blob reads a small blob whole, at most max bytes, checking its digest.
func (s *Store) blob(h v1.Hash, max int64) ([]byte, error) {
	if h.Algorithm != "sha256" {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "image_invalid", "digest %s: only sha256 is supported", h)
	}
	f, err := s.oci.Blob(h)
	if err != nil {
		return nil, fmt.Errorf("reading blob %s: %w", h, err)
	}
	defer f.Close()
	raw, err := readAtMost(f, max)
	if err != nil {
		return nil, fmt.Errorf("reading blob %s: %w", h, err)
	}
	if got := sha256Hex(raw); got != h.Hex {
		return nil, mismatch("blob", h.String(), "sha256:"+got)
	}
	return raw, nil
}

func mismatch(what, want, got string) error {
	return sandbox.Errorf(sandbox.ErrInvalid, "image_digest_mismatch", "the image's %s should have the digest %s and has %s", what, want, got)
}
