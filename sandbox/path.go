package sandbox

import "strings"

// Path bounds, as Linux has them.
const (
	MaxPathLen = 4096 // a whole relative path
	MaxNameLen = 255  // one component
)

// CheckPath validates a caller-supplied path inside the work dir: relative,
// clean of "..", NUL and empty components, and within the length bounds. It
// cannot see symlinks; writers must also refuse to pass through one (see
// internal/host/workdir). Every error is ErrInvalid and names the path.
func CheckPath(p string) error {
	bad := func(why string) error {
		return Errorf(ErrInvalid, "path_invalid", "path %q: %s", p, why)
	}
	switch {
	case p == "":
		return bad("empty")
	case hasNUL(p):
		return bad("contains a NUL byte")
	case len(p) > MaxPathLen:
		return bad("longer than 4096 bytes")
	case isAbs(p):
		return bad("absolute paths are not allowed")
	}
	for _, c := range strings.Split(p, "/") {
		switch {
		case c == "..":
			return bad(`".." is not allowed`)
		case c == "" || c == ".":
			return bad("empty or '.' component")
		case len(c) > MaxNameLen:
			return bad("a component is longer than 255 bytes")
		}
	}
	return nil
}

func isAbs(p string) bool  { return strings.HasPrefix(p, "/") }
func hasNUL(s string) bool { return strings.IndexByte(s, 0) >= 0 }
