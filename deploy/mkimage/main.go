// Command mkimage writes a container image as a `docker load` archive,
// offline: no registry, no Dockerfile build and no Docker engine. Its base
// layer is a root filesystem made from this host's own Debian packages by
// internal/host/image (the files dpkg installed, every shared library they load,
// a minimal /etc); a second layer, for the server image, holds execbox.
//
//	go run ./deploy/mkimage -flavor server -execbox dist/…/execbox \
//	    -execbox-init dist/…/execbox-init -config deploy/execbox.yaml \
//	    -healthcheck deploy/image/healthcheck -entrypoint deploy/image/entrypoint \
//	    -tag execbox:1.2.0 -out image.tar
//
// Flavors:
//
//	server        execbox serve: the python sandbox userland (python3, sh,
//	              bash, coreutils, …) plus bubblewrap and mount; execbox and
//	              execbox-init, the shipped execbox.yaml, an entrypoint
//	              that makes a private cgroup namespace writable and a
//	              healthcheck against /readyz. The release bundle's image.tar.
//	systemd-host  a test fixture, not shipped: a small Debian-like host with
//	              systemd as PID 1 (and dpkg with those packages in its
//	              database, useradd, bwrap, python3) on which
//	              scripts/test-release.sh installs the bundle and the .deb
//	              and starts the real unit.
//
// The layers are written uncompressed in path order with the host files'
// modes and times, so the same host state and inputs give the same image.
// The archive is the layout `docker save` writes (manifest.json, the image
// config, one directory per layer), which `docker load` reads.
package main

import (
	"archive/tar"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/execbox/execbox/internal/host/image"
)

type options struct {
	flavor, out, arch, root              string
	execbox, execboxInit, config, health string
	entrypoint                           string
	version, commit, created             string
	tags                                 []string
}

func main() {
	var o options
	flag.StringVar(&o.flavor, "flavor", "server", "server or systemd-host")
	flag.StringVar(&o.out, "out", "", "the archive to write (required)")
	flag.StringVar(&o.arch, "arch", runtime.GOARCH, "the image's architecture; the root's packages must be of it")
	flag.StringVar(&o.root, "root", "/", "the tree whose packages make the base layer")
	flag.StringVar(&o.execbox, "execbox", "", "server: the execbox binary (static, of -arch)")
	flag.StringVar(&o.execboxInit, "execbox-init", "", "server: the execbox-init binary")
	flag.StringVar(&o.config, "config", "", "server: the execbox.yaml to put in /etc/execbox")
	flag.StringVar(&o.health, "healthcheck", "", "server: the healthcheck script")
	flag.StringVar(&o.entrypoint, "entrypoint", "", "server: the entrypoint script")
	flag.StringVar(&o.version, "version", "dev", "the image's version label")
	flag.StringVar(&o.commit, "commit", "", "the image's revision label")
	flag.StringVar(&o.created, "created", "", "creation time, RFC 3339 (default now; honours SOURCE_DATE_EPOCH)")
	flag.Func("tag", "a name:tag the loaded image gets (repeatable)", func(s string) error {
		o.tags = append(o.tags, s)
		return nil
	})
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintf(os.Stderr, "mkimage: %v\n", err)
		os.Exit(1)
	}
}

func run(o options) error {
	if o.out == "" || len(o.tags) == 0 || flag.NArg() > 0 {
		return errors.New("usage: mkimage -out FILE -tag NAME:TAG [-flavor server|systemd-host] [flags]")
	}
	created, err := creationTime(o.created)
	if err != nil {
		return err
	}
	if hostArch := runtime.GOARCH; o.arch != hostArch && o.root == "/" {
		return fmt.Errorf("the base layer is made from this host's %s packages; an %s image needs -root with an %s tree", hostArch, o.arch, o.arch)
	}
	recipe, cfg, err := flavor(o)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(o.out), ".mkimage-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	var layers []layer
	base, st, err := writeLayer(tmp, "base", func(w io.Writer) (image.Stats, error) {
		return image.Build(w, recipe, image.Options{Root: o.root})
	})
	if err != nil {
		return fmt.Errorf("building the base layer: %w", err)
	}
	for _, m := range st.Missing {
		fmt.Fprintf(os.Stderr, "mkimage: warning: library not on this host: %s\n", m)
	}
	base.comment = fmt.Sprintf("%s userland from the host's Debian packages: %s", o.flavor, strings.Join(recipe.Packages, " "))
	layers = append(layers, base)
	if o.flavor == "systemd-host" {
		db, _, err := writeLayer(tmp, "dpkg", func(w io.Writer) (image.Stats, error) {
			return image.Stats{}, dpkgLayer(w, o.root, recipe.Packages, created)
		})
		if err != nil {
			return fmt.Errorf("building the dpkg database layer: %w", err)
		}
		db.comment = "dpkg's status of those packages, so that dpkg -i sees its dependencies"
		layers = append(layers, db)
	}
	if o.flavor == "server" {
		app, _, err := writeLayer(tmp, "app", func(w io.Writer) (image.Stats, error) { return image.Stats{}, appLayer(w, o, created) })
		if err != nil {
			return fmt.Errorf("building the execbox layer: %w", err)
		}
		app.comment = "execbox " + o.version
		layers = append(layers, app)
	}
	cfg.Architecture, cfg.OS, cfg.Created = o.arch, "linux", created.UTC().Format(time.RFC3339)
	cfg.RootFS.Type = "layers"
	for _, l := range layers {
		cfg.RootFS.DiffIDs = append(cfg.RootFS.DiffIDs, "sha256:"+l.digest)
		cfg.History = append(cfg.History, history{Created: cfg.Created, CreatedBy: "deploy/mkimage", Comment: l.comment})
	}
	cfg.Config.Labels["org.opencontainers.image.version"] = o.version
	cfg.Config.Labels["org.opencontainers.image.revision"] = o.commit
	cfg.Config.Labels["org.opencontainers.image.created"] = cfg.Created
	if err := writeArchive(o.out, cfg, layers, o.tags, created); err != nil {
		return err
	}
	fi, err := os.Stat(o.out)
	if err != nil {
		return err
	}
	fmt.Printf("wrote %s (%s, %s/%s, %d layers, %.1f MiB): %d files, %d directories, %d symlinks in the base\n",
		o.out, strings.Join(o.tags, " "), cfg.OS, cfg.Architecture, len(layers), float64(fi.Size())/(1<<20), st.Files, st.Dirs, st.Symlinks)
	return nil
}

// creationTime is s, else SOURCE_DATE_EPOCH, else now.
func creationTime(s string) (time.Time, error) {
	if s != "" {
		return time.Parse(time.RFC3339, s)
	}
	if e := os.Getenv("SOURCE_DATE_EPOCH"); e != "" {
		var sec int64
		if _, err := fmt.Sscan(e, &sec); err != nil {
			return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: %w", e, err)
		}
		return time.Unix(sec, 0), nil
	}
	return time.Now(), nil
}

// Image paths of the server flavor.
const (
	binDir     = "/usr/bin"
	libDir     = "/usr/lib/execbox"
	confPath   = "/etc/execbox/execbox.yaml"
	stateDir   = "/var/lib/execbox"
	runtimeDir = "/run/execbox"
	// nonrootDir is for execbox run as uid 65532, as deploy/kubernetes
	// runs the server: a work root of its own in the container's layer.
	nonrootDir  = "/run/execbox-nonroot"
	nonrootUID  = 65532
	healthcheck = libDir + "/healthcheck"
	entrypoint  = libDir + "/entrypoint"
)

// flavor returns the base layer's recipe and the image config.
func flavor(o options) (image.Recipe, imageConfig, error) {
	py, err := image.Lookup("python", o.root)
	if err != nil {
		return image.Recipe{}, imageConfig{}, err
	}
	var c imageConfig
	c.Config.Labels = map[string]string{"io.execbox.built-from": "host-files", "org.opencontainers.image.title": "execbox"}
	c.Config.Env = []string{"PATH=" + image.SandboxPATH, "LANG=C.UTF-8"}
	r := image.Recipe{Name: o.flavor, Files: py.Files}
	switch o.flavor {
	case "server":
		for _, f := range []*string{&o.execbox, &o.execboxInit, &o.config, &o.health, &o.entrypoint} {
			if *f == "" {
				return r, c, errors.New("the server flavor needs -execbox, -execbox-init, -config, -healthcheck and -entrypoint")
			}
		}
		// The python sandbox's userland is what native and bwrap sandboxes
		// see of the container (they bind its /usr read-only), so it is
		// what runs code; bubblewrap for the bwrap backend; mount for the
		// entrypoint, which makes the container's own cgroups writable.
		r.Packages = append(slices.Clone(py.Packages), "bubblewrap", "mount")
		c.Config.Env = append(c.Config.Env, "EXECBOX_CONFIG="+confPath)
		c.Config.Entrypoint = []string{entrypoint}
		c.Config.Cmd = []string{"serve"}
		c.Config.WorkingDir = "/"
		c.Config.User = "0:0"
		c.Config.StopSignal = "SIGTERM"
		c.Config.Volumes = map[string]struct{}{stateDir: {}}
		c.Config.Healthcheck = &healthConfig{
			Test:        []string{"CMD", healthcheck},
			Interval:    10 * time.Second,
			Timeout:     5 * time.Second,
			StartPeriod: 30 * time.Second,
			Retries:     3,
		}
		c.Config.Labels["org.opencontainers.image.description"] = "execbox serve: the HTTP API that runs untrusted code in sandboxes"
	case "systemd-host":
		r.Packages = append(slices.Clone(py.Packages),
			"systemd", "libsystemd-shared", "util-linux", "mount", "passwd", "login",
			"libc-bin", "dpkg", "diffutils", "bubblewrap")
		c.Config.Env = append(c.Config.Env, "container=docker")
		c.Config.Entrypoint = []string{"/lib/systemd/systemd"}
		c.Config.StopSignal = "SIGRTMIN+3"
		c.Config.Labels["org.opencontainers.image.description"] = "test fixture: a host with systemd as PID 1"
	default:
		return r, c, fmt.Errorf("unknown flavor %q (server, systemd-host)", o.flavor)
	}
	return r, c, nil
}

// appLayer writes execbox's own files.
func appLayer(w io.Writer, o options, created time.Time) error {
	want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[o.arch]
	for _, b := range []string{o.execbox, o.execboxInit} {
		f, err := elf.Open(b)
		if err != nil {
			return fmt.Errorf("%s: %w", b, err)
		}
		m := f.Machine
		f.Close()
		if m != want {
			return fmt.Errorf("%s is built for %v, not %s", b, m, o.arch)
		}
	}
	tw := tar.NewWriter(w)
	ownedDir := func(p string, mode int64, uid int) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(p, "/") + "/", Mode: mode, Uid: uid, Gid: uid, ModTime: created})
	}
	dir := func(p string, mode int64) error { return ownedDir(p, mode, 0) }
	file := func(p, src string, mode int64) error {
		data, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(p, "/"), Mode: mode, Size: int64(len(data)), ModTime: created}); err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	}
	steps := []func() error{
		func() error { return dir("/etc/execbox", 0o755) },
		func() error { return file(confPath, o.config, 0o644) },
		func() error { return file(binDir+"/execbox", o.execbox, 0o755) },
		// Next to the executable, where the native backend looks for it.
		func() error { return file(binDir+"/execbox-init", o.execboxInit, 0o755) },
		func() error { return dir(libDir, 0o755) },
		func() error { return file(healthcheck, o.health, 0o755) },
		func() error { return file(entrypoint, o.entrypoint, 0o755) },
		func() error { return dir(runtimeDir, 0o711) },
		func() error { return ownedDir(nonrootDir, 0o700, nonrootUID) },
		func() error { return dir(stateDir, 0o750) },
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return err
		}
	}
	return tw.Close()
}

// dpkgLayer writes /var/lib/dpkg/status with the root's entries of the
// packages the image holds, and their file lists: the systemd-host fixture
// installs the .deb with dpkg -i, which checks its dependencies against
// that database.
func dpkgLayer(w io.Writer, root string, packages []string, created time.Time) error {
	data, err := os.ReadFile(filepath.Join(root, "var/lib/dpkg/status"))
	if err != nil {
		return err
	}
	var status strings.Builder
	var lists []string
	for _, stanza := range strings.Split(string(data), "\n\n") {
		for _, line := range strings.Split(stanza, "\n") {
			if name, ok := strings.CutPrefix(line, "Package: "); ok && slices.Contains(packages, name) {
				status.WriteString(strings.TrimSpace(stanza) + "\n\n")
				lists = append(lists, name+".list", name+":"+runtime.GOARCH+".list")
				break
			}
		}
	}
	tw := tar.NewWriter(w)
	put := func(name string, content []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(content)), ModTime: created}); err != nil {
			return err
		}
		_, err := tw.Write(content)
		return err
	}
	if err := put("var/lib/dpkg/status", []byte(status.String())); err != nil {
		return err
	}
	slices.Sort(lists)
	for _, l := range lists {
		content, err := os.ReadFile(filepath.Join(root, "var/lib/dpkg/info", l))
		if err != nil {
			continue // the name without or with the architecture: one exists
		}
		if err := put("var/lib/dpkg/info/"+l, content); err != nil {
			return err
		}
	}
	return tw.Close()
}

// layer is one written layer file.
type layer struct {
	path, digest, comment string
	size                  int64
}

// writeLayer writes a layer to a file in dir, hashing it on the way.
func writeLayer(dir, name string, write func(io.Writer) (image.Stats, error)) (layer, image.Stats, error) {
	p := filepath.Join(dir, name+".tar")
	f, err := os.Create(p)
	if err != nil {
		return layer{}, image.Stats{}, err
	}
	defer f.Close()
	h := sha256.New()
	cw := &countWriter{w: io.MultiWriter(f, h)}
	st, err := write(cw)
	if err != nil {
		return layer{}, st, err
	}
	if err := f.Close(); err != nil {
		return layer{}, st, err
	}
	return layer{path: p, digest: hex.EncodeToString(h.Sum(nil)), size: cw.n}, st, nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// imageConfig is the image configuration `docker load` reads (the OCI image
// config plus Docker's Healthcheck).
type imageConfig struct {
	Architecture string          `json:"architecture"`
	OS           string          `json:"os"`
	Created      string          `json:"created"`
	Config       containerConfig `json:"config"`
	RootFS       struct {
		Type    string   `json:"type"`
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
	History []history `json:"history"`
}

type containerConfig struct {
	Env         []string            `json:"Env,omitempty"`
	Entrypoint  []string            `json:"Entrypoint,omitempty"`
	Cmd         []string            `json:"Cmd,omitempty"`
	WorkingDir  string              `json:"WorkingDir,omitempty"`
	User        string              `json:"User,omitempty"`
	StopSignal  string              `json:"StopSignal,omitempty"`
	Volumes     map[string]struct{} `json:"Volumes,omitempty"`
	Labels      map[string]string   `json:"Labels,omitempty"`
	Healthcheck *healthConfig       `json:"Healthcheck,omitempty"`
}

// healthConfig is Docker's HEALTHCHECK; durations in nanoseconds.
type healthConfig struct {
	Test        []string      `json:"Test"`
	Interval    time.Duration `json:"Interval"`
	Timeout     time.Duration `json:"Timeout"`
	StartPeriod time.Duration `json:"StartPeriod"`
	Retries     int           `json:"Retries"`
}

type history struct {
	Created   string `json:"created"`
	CreatedBy string `json:"created_by"`
	Comment   string `json:"comment,omitempty"`
}

// writeArchive writes the `docker save` layout: <digest>/layer.tar per
// layer, <config digest>.json and manifest.json.
func writeArchive(out string, cfg imageConfig, layers []layer, tags []string, mtime time.Time) error {
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(cfgJSON)
	cfgName := hex.EncodeToString(sum[:]) + ".json"
	manifest := []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}{{Config: cfgName, RepoTags: tags}}
	for _, l := range layers {
		manifest[0].Layers = append(manifest[0].Layers, l.digest+"/layer.tar")
	}
	manJSON, err := json.Marshal(manifest)
	if err != nil {
		return err
	}
	tmp := out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	defer f.Close()
	tw := tar.NewWriter(f)
	put := func(name string, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: mtime}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	for _, l := range layers {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: l.digest + "/", Mode: 0o755, ModTime: mtime}); err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: l.digest + "/layer.tar", Mode: 0o644, Size: l.size, ModTime: mtime}); err != nil {
			return err
		}
		lf, err := os.Open(l.path)
		if err != nil {
			return err
		}
		_, err = io.Copy(tw, lf)
		lf.Close()
		if err != nil {
			return err
		}
	}
	if err := put(cfgName, cfgJSON); err != nil {
		return err
	}
	if err := put("manifest.json", manJSON); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}
