package image

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// packageFiles lists the paths dpkg installed for pkg, or says how to get it.
func (b *builder) packageFiles(pkg string) ([]string, error) {
	info := b.host("/var/lib/dpkg/info")
	var data []byte
	var err error
	for _, name := range []string{pkg + ".list", pkg + ":" + dpkgArch() + ".list"} {
		if data, err = os.ReadFile(filepath.Join(info, name)); err == nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("package %s is not installed on this host (apt-get install %s): %w", pkg, pkg, err)
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		if line == "" || line == "/." || isExcluded(line) {
			continue
		}
		out = append(out, line)
	}
	return out, nil
}

// dpkgArch is dpkg's name for the running architecture.
func dpkgArch() string {
	switch a := runtime.GOARCH; a {
	case "386":
		return "i386"
	case "arm":
		return "armhf"
	case "ppc64le":
		return "ppc64el"
	default:
		return a
	}
}
