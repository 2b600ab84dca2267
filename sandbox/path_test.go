package sandbox

import (
	"errors"
	"strings"
	"testing"
)

// CheckPath, with every rule written out: the paths it takes and the exact
// message of each refusal.
func TestCheckPath(t *testing.T) {
	for _, p := range []string{
		"a", "a.txt", "dir/sub/f", ".hidden", "..a", "a..", "a/.b/c", "a b/c d", "ü/ß",
		strings.Repeat("n", 255),                               // the longest component
		strings.Repeat("d/", 2047) + "ff",                      // 4096 bytes exactly
		strings.Repeat(strings.Repeat("p", 255)+"/", 15) + "x", // 15 long components
	} {
		if err := CheckPath(p); err != nil {
			t.Errorf("CheckPath(%.40q) = %v, want nil", p, err)
		}
	}
	for _, c := range []struct{ path, msg string }{
		{"", `path "": empty`},
		{"a\x00b", `path "a\x00b": contains a NUL byte`},
		{"/etc/passwd", `path "/etc/passwd": absolute paths are not allowed`},
		{"/", `path "/": absolute paths are not allowed`},
		{"..", `path "..": ".." is not allowed`},
		{"../x", `path "../x": ".." is not allowed`},
		{"a/../../x", `path "a/../../x": ".." is not allowed`},
		{"a/..", `path "a/..": ".." is not allowed`},
		{".", `path ".": empty or '.' component`},
		{"./x", `path "./x": empty or '.' component`},
		{"a/./b", `path "a/./b": empty or '.' component`},
		{"a//b", `path "a//b": empty or '.' component`},
		{"a/", `path "a/": empty or '.' component`},
		{strings.Repeat("c", 256), `path "` + strings.Repeat("c", 256) + `": a component is longer than 255 bytes`},
		{strings.Repeat("d/", 2048) + "f", `path "` + strings.Repeat("d/", 2048) + `f": longer than 4096 bytes`},
	} {
		err := CheckPath(c.path)
		if err == nil {
			t.Errorf("CheckPath(%.40q) = nil, want %q", c.path, c.msg)
			continue
		}
		if !errors.Is(err, ErrInvalid) || CodeOf(err) != "path_invalid" || err.Error() != c.msg {
			t.Errorf("CheckPath(%.40q) = %q (code %q), want ErrInvalid path_invalid %q", c.path, err, CodeOf(err), c.msg)
		}
	}
}
