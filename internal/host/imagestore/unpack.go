package imagestore

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/klauspost/compress/zstd"

	"github.com/execbox/execbox/internal/host/layer"
	"github.com/execbox/execbox/sandbox"
)

// maxEntries bounds the files of one image.
const maxEntries = 1 << 20

// unpack makes the root of the image h from its blobs, checking every
// digest on the way; a root that exists is done. The store is locked.
func (s *Store) unpack(h v1.Hash) error {
	final := filepath.Join(s.roots(), h.Hex)
	if _, err := os.Lstat(final); err == nil {
		return nil
	}
	m, _, err := s.manifest(h)
	if err != nil {
		return err
	}
	cf, err := s.config(m)
	if err != nil {
		return err
	}
	if len(cf.RootFS.DiffIDs) != len(m.Layers) {
		return sandbox.Errorf(sandbox.ErrInvalid, "image_invalid", "the image has %d layers and its config %d diff IDs", len(m.Layers), len(cf.RootFS.DiffIDs))
	}
	left := s.o.MaxBytes - s.usage()
	tmp, err := os.MkdirTemp(s.roots(), ".unpack-")
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			os.RemoveAll(tmp)
		}
	}()
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	root, err := layer.Open(tmp, layer.Limits{MaxBytes: max(left, 0), MaxEntries: maxEntries})
	if err != nil {
		return err
	}
	defer root.Close()
	for i, l := range m.Layers {
		if err := s.applyLayer(root, l, cf.RootFS.DiffIDs[i]); err != nil {
			if sandbox.CodeOf(err) == "image_too_large" && root.Entries <= maxEntries {
				return sandbox.Errorf(sandbox.ErrLimit, "image_quota",
					"unpacked, the image needs more than the %s the store has left of its %s (image_store.max_bytes): remove images (execbox image rm, prune) or raise it",
					size(left), size(s.o.MaxBytes))
			}
			return err
		}
	}
	// What the root takes: its tar bytes, or more where sparse files and
	// made directories wrote what the tar did not hold.
	st, err := json.Marshal(rootStats{Bytes: max(root.Bytes, root.Written), Dropped: root.Dropped, Cleared: root.Cleared})
	if err != nil {
		return err
	}
	if err := os.WriteFile(final+".json", st, 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, final); err != nil {
		os.Remove(final + ".json")
		return err
	}
	done = true
	return nil
}

// applyLayer applies the layer l whose uncompressed digest is diffID.
func (s *Store) applyLayer(root *layer.Root, l v1.Descriptor, diffID v1.Hash) error {
	if l.Digest.Algorithm != "sha256" || diffID.Algorithm != "sha256" {
		return sandbox.Errorf(sandbox.ErrInvalid, "image_invalid", "layer %s: only sha256 digests are supported", l.Digest)
	}
	f, err := s.oci.Blob(l.Digest)
	if err != nil {
		return fmt.Errorf("reading layer %s: %w", l.Digest, err)
	}
	defer f.Close()
	ch := sha256.New()
	compressed := bufio.NewReader(io.TeeReader(f, ch))
	tar, closeTar, err := decompress(compressed)
	if err != nil {
		return sandbox.Errorf(sandbox.ErrInvalid, "image_layer_invalid", "layer %s: %v", l.Digest, err)
	}
	defer closeTar()
	uh := sha256.New()
	err = root.Apply(io.TeeReader(badStream{tar, l.Digest}, uh))
	if err == nil {
		// The compressed stream to its end, so its digest covers every byte.
		_, err = io.Copy(io.Discard, badStream{compressed, l.Digest})
	}
	if err != nil {
		return err // the layer's fault typed invalid; the rest (a full disk) the host's
	}
	if got := hexOf(ch); got != l.Digest.Hex {
		return mismatch("layer", l.Digest.String(), "sha256:"+got)
	}
	if got := hexOf(uh); got != diffID.Hex {
		return mismatch("uncompressed layer", diffID.String(), "sha256:"+got)
	}
	return nil
}

// decompress reads a layer as gzip, zstd or plain tar, by its first bytes
// (a media type is the image's word; the bytes are what is there).
func decompress(r *bufio.Reader) (io.Reader, func(), error) {
	magic, _ := r.Peek(4)
	switch {
	case bytes.HasPrefix(magic, []byte{0x1f, 0x8b}):
		z, err := gzip.NewReader(r)
		if err != nil {
			return nil, nil, err
		}
		z.Multistream(true)
		return z, func() { z.Close() }, nil
	case bytes.Equal(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		// A frame may ask for a window of gigabytes: bounded here.
		z, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(64<<20), zstd.WithDecoderMaxMemory(256<<20))
		if err != nil {
			return nil, nil, err
		}
		return z, z.Close, nil
	}
	return r, func() {}, nil
}

// badStream types a stream's read errors (what does not decompress, or
// ends early) as the layer's fault.
type badStream struct {
	r     io.Reader
	layer v1.Hash
}

func (b badStream) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		err = sandbox.Errorf(sandbox.ErrInvalid, "image_layer_invalid", "layer %s: %v", b.layer, err)
	}
	return n, err
}

func hexOf(h hash.Hash) string { return hex.EncodeToString(h.Sum(nil)) }

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// readAtMost reads r whole, failing when it holds more than max bytes.
func readAtMost(r io.Reader, max int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err == nil && int64(len(b)) > max {
		err = sandbox.Errorf(sandbox.ErrLimit, "image_too_large", "a manifest or config of more than %d bytes", max)
	}
	return b, err
}
