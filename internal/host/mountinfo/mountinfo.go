package mountinfo

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Self is the calling process's mountinfo file.
const Self = "/proc/self/mountinfo"

// Mount is the part of a mountinfo line execbox reads.
type Mount struct {
	Root   string   // the path inside the filesystem that is mounted
	Point  string   // where it is mounted
	FSType string   // "tmpfs", "cgroup2", …
	Super  []string // the super block's options (a v1 cgroup hierarchy's controllers)
}

// Read parses the mountinfo file at p.
func Read(p string) ([]Mount, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", p, err)
	}
	return Parse(string(data)), nil
}

// Parse parses mountinfo text; a line it cannot read is left out.
func Parse(data string) []Mount {
	var out []Mount
	for line := range strings.Lines(data) {
		// ID parent major:minor root point options [optional…] - type source super
		f := strings.Fields(line)
		sep := slices.Index(f, "-")
		if sep < 6 || len(f) < sep+4 {
			continue
		}
		out = append(out, Mount{
			Root:   Unescape(f[3]),
			Point:  Unescape(f[4]),
			FSType: f[sep+1],
			Super:  strings.Split(f[sep+3], ","),
		})
	}
	return out
}

// Unescape undoes mountinfo's octal escapes (\040 for a space).
func Unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
