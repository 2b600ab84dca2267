package image

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Recipe says what an offline image is made of.
type Recipe struct {
	// Name is the recipe's name as the CLI takes it ("python").
	Name string
	// Packages are dpkg packages taken whole (minus documentation).
	Packages []string
	// Files are single host files taken from packages not taken whole
	// (setsid from util-linux, os-release from base-files).
	Files []string
	// Changes are the Dockerfile instructions the import applies (ENV,
	// WORKDIR, USER, CMD, LABEL), as `docker import --change` takes them.
	Changes []string
}

// SandboxPATH is the PATH of every execbox image, the Debian default.
const SandboxPATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Names lists the recipes Lookup knows.
func Names() []string { return []string{"python"} }

// Lookup returns the recipe called name, resolved against the host under
// root ("/" for this host): python uses the host's python3 version.
func Lookup(name, root string) (Recipe, error) {
	switch name {
	case "python":
		return python(root)
	}
	return Recipe{}, fmt.Errorf("unknown image %q (known: %s)", name, strings.Join(Names(), ", "))
}

var pythonVersion = regexp.MustCompile(`^python(3\.[0-9]+)$`)

// python is a Python 3 interpreter with its standard library, /bin/sh
// (dash), bash, coreutils, grep, sed, find, tar, gzip and setsid: what a
// function runner or a tool call needs, what the conformance suite runs,
// and about what the python:3-slim image has.
func python(root string) (Recipe, error) {
	target, err := os.Readlink(filepath.Join(root, "usr/bin/python3"))
	if err != nil {
		return Recipe{}, fmt.Errorf("finding the host's python3 (install python3): %w", err)
	}
	m := pythonVersion.FindStringSubmatch(filepath.Base(target))
	if m == nil {
		return Recipe{}, fmt.Errorf("/usr/bin/python3 points to %q, not python3.N", target)
	}
	v := m[1]
	return Recipe{
		Name: "python",
		Packages: []string{
			"libc6", "dash", "bash", "coreutils", "grep", "sed", "findutils", "tar", "gzip",
			"python" + v + "-minimal", "libpython" + v + "-minimal", "libpython" + v + "-stdlib",
			"python3-minimal",
		},
		Files: []string{"/usr/bin/setsid", "/usr/lib/os-release", "/etc/os-release"},
		Changes: []string{
			"ENV PATH=" + SandboxPATH,
			"ENV LANG=C.UTF-8",
			"ENV PYTHONDONTWRITEBYTECODE=1",
			"WORKDIR /work",
			"USER 65534:65534",
			`CMD ["python3"]`,
			"LABEL org.opencontainers.image.title=execbox-python",
			"LABEL io.execbox.image=python",
			"LABEL io.execbox.built-from=host-files",
			"LABEL io.execbox.python=" + v,
		},
	}, nil
}
