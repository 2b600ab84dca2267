package imagestore

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/match"
	"golang.org/x/sys/unix"

	"github.com/execbox/execbox/sandbox"
)

// refName is the OCI annotation that names an image in the layout.
const refName = "org.opencontainers.image.ref.name"

// Options configure a Store.
type Options struct {
	// Dir holds the store (the state dir's images/).
	Dir string
	// MaxBytes bounds the blobs and unpacked roots together.
	MaxBytes int64
	// Keychain gives registry credentials; nil means docker's config
	// files ($DOCKER_CONFIG or ~/.docker/config.json).
	Keychain authn.Keychain
}

// Store is an image store in a directory.
type Store struct {
	o   Options
	oci layout.Path
	mu  sync.RWMutex // within this process; the lock file across processes
}

// Image is one image of the store.
type Image struct {
	Refs       []string  `json:"refs"`
	Digest     string    `json:"digest"` // the manifest's: the image's id in the store
	Config     string    `json:"config"` // the config's digest (docker's image ID)
	Size       int64     `json:"size"`   // its blobs (compressed layers, config, manifest)
	Unpacked   int64     `json:"unpacked,omitempty"`
	Layers     int       `json:"layers"`
	Platform   string    `json:"platform,omitempty"`
	Created    time.Time `json:"created,omitzero"`
	Env        []string  `json:"env,omitempty"`
	WorkingDir string    `json:"working_dir,omitempty"`
	User       string    `json:"user,omitempty"`
	Entrypoint []string  `json:"entrypoint,omitempty"`
	Cmd        []string  `json:"cmd,omitempty"`
	// Root is the unpacked root's path ("" until it is unpacked).
	Root string `json:"root,omitempty"`
	// Dropped and Cleared say what unpacking left out: device nodes,
	// FIFOs and sockets, and setuid or setgid bits.
	Dropped int `json:"dropped,omitempty"`
	Cleared int `json:"cleared,omitempty"`
}

// Open opens the store in o.Dir, making it when missing.
func Open(o Options) (*Store, error) {
	if o.MaxBytes <= 0 {
		return nil, fmt.Errorf("imagestore: MaxBytes must be positive")
	}
	if o.Keychain == nil {
		o.Keychain = authn.DefaultKeychain
	}
	s := &Store{o: o}
	if err := os.MkdirAll(s.roots(), 0o700); err != nil {
		return nil, err
	}
	dir := filepath.Join(o.Dir, "oci")
	p, err := layout.FromPath(dir)
	if err != nil {
		if p, err = layout.Write(dir, empty.Index); err != nil {
			return nil, fmt.Errorf("making the image store's layout: %w", err)
		}
	}
	s.oci = p
	return s, nil
}

func (s *Store) roots() string { return filepath.Join(s.o.Dir, "roots") }

// lock holds the store for a change, against this process's goroutines
// and other processes (the CLI beside a server).
func (s *Store) lock() (unlock func(), err error) {
	return s.flock(unix.LOCK_EX, s.mu.Lock, s.mu.Unlock)
}

// rlock holds the store for reading: go-containerregistry rewrites
// index.json in place, so a reader waits for a change to end.
func (s *Store) rlock() (unlock func(), err error) {
	return s.flock(unix.LOCK_SH, s.mu.RLock, s.mu.RUnlock)
}

func (s *Store) flock(how int, lock, unlock func()) (func(), error) {
	lock()
	f, err := os.OpenFile(filepath.Join(s.o.Dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err == nil {
		err = unix.Flock(int(f.Fd()), how)
	}
	if err != nil {
		if f != nil {
			f.Close()
		}
		unlock()
		return nil, fmt.Errorf("locking the image store: %w", err)
	}
	return func() { f.Close(); unlock() }, nil
}

// descriptors are the layout's images, one per reference.
func (s *Store) descriptors() ([]v1.Descriptor, error) {
	idx, err := s.oci.ImageIndex()
	if err != nil {
		return nil, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	return m.Manifests, nil
}

// List returns the store's images, one per digest, by first reference.
func (s *Store) List() ([]Image, error) {
	unlock, err := s.rlock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	ds, err := s.descriptors()
	if err != nil {
		return nil, err
	}
	var out []Image
	seen := map[v1.Hash]int{}
	for _, d := range ds {
		if i, ok := seen[d.Digest]; ok {
			out[i].Refs = append(out[i].Refs, d.Annotations[refName])
			continue
		}
		img, err := s.describe(d.Digest)
		if err != nil {
			return nil, err
		}
		img.Refs = []string{d.Annotations[refName]}
		seen[d.Digest] = len(out)
		out = append(out, img)
	}
	slices.SortFunc(out, func(a, b Image) int { return strings.Compare(a.Refs[0], b.Refs[0]) })
	return out, nil
}

// Inspect returns the image ref names: a reference as pulled, or a
// digest (whole, or its first 12 or more hex digits).
func (s *Store) Inspect(ref string) (Image, error) {
	unlock, err := s.rlock()
	if err != nil {
		return Image{}, err
	}
	defer unlock()
	return s.inspect(ref)
}

// inspect is Inspect with the store held.
func (s *Store) inspect(ref string) (Image, error) {
	h, err := s.find(ref)
	if err != nil {
		return Image{}, err
	}
	img, err := s.describe(h)
	if err != nil {
		return Image{}, err
	}
	ds, err := s.descriptors()
	if err != nil {
		return Image{}, err
	}
	for _, d := range ds {
		if d.Digest == h {
			img.Refs = append(img.Refs, d.Annotations[refName])
		}
	}
	return img, nil
}

// Root returns the image ref names with its unpacked root, unpacking it
// when it is not (yet or any more).
func (s *Store) Root(ref string) (Image, error) {
	img, err := s.Inspect(ref)
	if err != nil || img.Root != "" {
		return img, err
	}
	unlock, err := s.lock()
	if err != nil {
		return Image{}, err
	}
	defer unlock()
	h, _ := v1.NewHash(img.Digest)
	if err := s.unpack(h); err != nil {
		return Image{}, err
	}
	return s.inspect(img.Digest)
}

func notFound(ref string) error {
	return sandbox.Errorf(sandbox.ErrNotFound, "image_not_found", "no image %q in the store (execbox image ls lists them; pull or import it first)", ref)
}

// find resolves ref to a manifest digest of the store.
func (s *Store) find(ref string) (v1.Hash, error) {
	ds, err := s.descriptors()
	if err != nil {
		return v1.Hash{}, err
	}
	if hex, ok := digestPrefix(ref); ok {
		var found []v1.Hash
		for _, d := range ds {
			if strings.HasPrefix(d.Digest.Hex, hex) && !slices.Contains(found, d.Digest) {
				found = append(found, d.Digest)
			}
		}
		switch len(found) {
		case 0:
			return v1.Hash{}, notFound(ref)
		case 1:
			return found[0], nil
		}
		return v1.Hash{}, sandbox.Errorf(sandbox.ErrInvalid, "image_ref_invalid", "%q names %d images: give more of the digest", ref, len(found))
	}
	r, err := parseRef(ref)
	if err != nil {
		return v1.Hash{}, err
	}
	for _, d := range ds {
		if d.Annotations[refName] == r.Name() {
			return d.Digest, nil
		}
	}
	return v1.Hash{}, notFound(ref)
}

// digestPrefix reports whether ref is a digest or its first 12 or more
// hex digits, and returns the hex.
func digestPrefix(ref string) (string, bool) {
	hex := strings.TrimPrefix(ref, "sha256:")
	if len(hex) < 12 || len(hex) > 64 || strings.Trim(hex, "0123456789abcdef") != "" {
		return "", false
	}
	return hex, true
}

func parseRef(ref string) (name.Reference, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "image_ref_invalid", "image reference %q: %v", ref, err)
	}
	return r, nil
}

// describe reads what the store knows of the image h.
func (s *Store) describe(h v1.Hash) (Image, error) {
	m, raw, err := s.manifest(h)
	if err != nil {
		return Image{}, err
	}
	cf, err := s.config(m)
	if err != nil {
		return Image{}, err
	}
	img := Image{
		Digest: h.String(), Config: m.Config.Digest.String(), Layers: len(m.Layers),
		Size:     int64(len(raw)) + m.Config.Size,
		Platform: cf.OS + "/" + cf.Architecture, Created: cf.Created.Time,
		Env: cf.Config.Env, WorkingDir: cf.Config.WorkingDir, User: cf.Config.User,
		Entrypoint: cf.Config.Entrypoint, Cmd: cf.Config.Cmd,
	}
	for _, l := range m.Layers {
		img.Size += l.Size
	}
	var st rootStats
	if b, err := os.ReadFile(filepath.Join(s.roots(), h.Hex+".json")); err == nil && json.Unmarshal(b, &st) == nil {
		if fi, err := os.Lstat(filepath.Join(s.roots(), h.Hex)); err == nil && fi.IsDir() {
			img.Root = filepath.Join(s.roots(), h.Hex)
			img.Unpacked, img.Dropped, img.Cleared = st.Bytes, st.Dropped, st.Cleared
		}
	}
	return img, nil
}

// rootStats is what roots/HEX.json holds.
type rootStats struct {
	Bytes   int64 `json:"bytes"`
	Dropped int   `json:"dropped"`
	Cleared int   `json:"cleared"`
}

// Remove removes ref from the store: a reference removes that name, a
// digest every name of its image. An image left without a name goes, with
// its root and the blobs no other image uses.
func (s *Store) Remove(ref string) error {
	unlock, err := s.lock()
	if err != nil {
		return err
	}
	defer unlock()
	h, err := s.find(ref)
	if err != nil {
		return err
	}
	var m match.Matcher = match.Digests(h)
	if _, ok := digestPrefix(ref); !ok {
		r, _ := parseRef(ref)
		m = match.Annotation(refName, r.Name())
	}
	if err := s.oci.RemoveDescriptors(m); err != nil {
		return err
	}
	_, err = s.gc()
	return err
}

// Prune removes what no image uses: blobs, roots and unfinished unpacks.
// It returns the bytes freed.
func (s *Store) Prune() (int64, error) {
	unlock, err := s.lock()
	if err != nil {
		return 0, err
	}
	defer unlock()
	return s.gc()
}

// gc removes the blobs and roots of no image. The store is locked.
func (s *Store) gc() (int64, error) {
	ds, err := s.descriptors()
	if err != nil {
		return 0, err
	}
	keep := map[string]bool{}
	for _, d := range ds {
		keep[d.Digest.Hex] = true
		m, _, err := s.manifest(d.Digest)
		if err != nil {
			return 0, err
		}
		keep[m.Config.Digest.Hex] = true
		for _, l := range m.Layers {
			keep[l.Digest.Hex] = true
		}
	}
	var freed int64
	blobs := filepath.Join(s.o.Dir, "oci", "blobs", "sha256")
	names, _ := os.ReadDir(blobs)
	for _, n := range names {
		if keep[n.Name()] {
			continue
		}
		if fi, err := n.Info(); err == nil {
			freed += fi.Size()
		}
		if err := os.Remove(filepath.Join(blobs, n.Name())); err != nil {
			return freed, err
		}
	}
	roots, _ := os.ReadDir(s.roots())
	for _, n := range roots {
		hex := strings.TrimSuffix(n.Name(), ".json")
		if keep[hex] && !strings.HasPrefix(n.Name(), ".") {
			continue
		}
		if n.IsDir() {
			var st rootStats
			if b, err := os.ReadFile(filepath.Join(s.roots(), hex+".json")); err == nil && json.Unmarshal(b, &st) == nil {
				freed += st.Bytes
			}
		}
		if err := os.RemoveAll(filepath.Join(s.roots(), n.Name())); err != nil {
			return freed, err
		}
	}
	return freed, nil
}

// usage is what the store holds: its blobs and its roots.
func (s *Store) usage() int64 {
	var n int64
	filepath.WalkDir(filepath.Join(s.o.Dir, "oci", "blobs"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	roots, _ := os.ReadDir(s.roots())
	for _, r := range roots {
		if !strings.HasSuffix(r.Name(), ".json") {
			continue
		}
		var st rootStats
		if b, err := os.ReadFile(filepath.Join(s.roots(), r.Name())); err == nil && json.Unmarshal(b, &st) == nil {
			n += st.Bytes
		}
	}
	return n
}

// errQuota is the refusal of what does not fit.
func (s *Store) errQuota(need int64) error {
	used := s.usage()
	return sandbox.Errorf(sandbox.ErrLimit, "image_quota",
		"the image needs %s and the store holds %s of its %s (image_store.max_bytes): remove images (execbox image rm, prune) or raise it",
		size(need), size(used), size(s.o.MaxBytes))
}

func size(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/sandbox.MiB) }
